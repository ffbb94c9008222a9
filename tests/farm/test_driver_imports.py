"""A sweep's driver imports neither torch nor Triton (2.8 s and more of start-up on an H200 host,
docs/perf-notes.md): it plans from the built-in variants' declarations and the config spaces, and
only the workers import the variant modules. Each check runs in a fresh interpreter, as
`sys.modules` of this one holds torch already."""

import importlib
import json
import pickle
import shutil
import subprocess
import sys
import tempfile

import pytest
from farmkit import ONE_POINT_SPEC, REPO, measurements, subprocess_env, write_spec

from farm.spec import load_spec
from kernels import register_variant
from kernels.registry import _REGISTRY, BUILTINS, _declared, get_variant

HEAVY = ("torch", "triton", "numpy", "pandas")


def run_fresh(code: str) -> object:
    """What `code` leaves in `result`, in a fresh Python; `loaded` there is sys.modules' top names."""
    probe = f"{code}\nimport json, sys\nloaded = sorted({{m.split('.')[0] for m in sys.modules}})\n"
    probe += "print(json.dumps([globals().get('result'), loaded]))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env=subprocess_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def heavy_after(code: str) -> list[str]:
    loaded = run_fresh(code)[1]  # once: in the comprehension it ran the code once per module (4x)
    return [m for m in HEAVY if m in loaded]


def load_module(name: str) -> None:
    """Import a built-in's module, which registers the variant with its launcher."""
    importlib.import_module(BUILTINS[name].module)


@pytest.mark.parametrize(
    ("code", "allowed"),
    [
        pytest.param(
            "import cli.sweep, farm.cluster, farm.options, farm.plan, farm.plugins, farm.spec",
            (),
            id="what-runs-before-ray-init",
        ),
        # farm.driver's database modules bring pandas and numpy (db.queries); never torch.
        pytest.param("import farm.driver", ("numpy", "pandas"), id="farm-driver"),
        pytest.param(
            "import cli\n"
            "cli.main(['sweep', '--preset', 'smoke', '--dry-run'])\n"
            "from farm.plan import code_versions, expand, make_batches\n"
            "from farm.spec import load_spec\n"
            "spec = load_spec(preset='full')\n"
            # every variant, on an aligned and a ragged shape: 8,152 points, not the preset's 243,552
            "one = lambda m, n, k: type(spec.shapes[0])(m=[m], n=[n], k=[k])\n"
            "spec = spec.model_copy(update={'shapes': [one(2048, 2048, 4096), one(495, 33, 71)]})\n"
            "points, _ = expand(spec)\n"
            "make_batches(points, 0)\n"
            "code_versions(spec.variants)",
            (),
            id="dry-run-and-a-plan-of-every-variant",
        ),
        pytest.param("import kernels", (), id="the-kernels-package"),
    ],
)
def test_the_driver_path_imports_no_torch(code: str, allowed: tuple) -> None:
    assert [m for m in heavy_after(code) if m not in allowed] == []


def test_a_launch_imports_its_module() -> None:
    assert heavy_after("from kernels import get_variant\nlaunch = get_variant('tiled').launch")[:2] == [
        "torch",
        "triton",
    ]


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_each_declaration_is_what_its_module_registers(name: str) -> None:
    load_module(name)
    declared, registered = _declared(name), _REGISTRY[name]
    assert (declared.space, declared.atomic, declared.baseline, declared.source_file) == (
        registered.space,
        registered.atomic,
        registered.baseline,
        registered.source_file,
    )
    assert registered.launcher is not None and registered.description
    assert get_variant(name) is registered


def test_a_registration_that_disagrees_with_its_declaration_is_refused() -> None:
    load_module("splitk")
    with pytest.raises(ValueError, match=r"declared in kernels\.registry\.BUILTINS"):
        register_variant("splitk", config_space="splitk")(_REGISTRY["splitk"].launcher)  # not atomic
    assert _REGISTRY["splitk"].atomic


PLAN = """\
from farm.plan import code_versions, expand
from farm.spec import load_spec
spec = load_spec(preset='smoke')
points, pruned = expand(spec)
plan = [[p.variant, p.dtype, *p.shape, p.config.key] for p in points]
result = [plan, dict(pruned), code_versions(spec.variants)]
"""


def test_the_plan_from_declarations_is_the_plan_of_the_loaded_variants() -> None:
    """Points, pruning counts and code versions of the smoke preset: planned in a fresh Python from
    the declarations alone, and here with every variant module imported."""
    declared, loaded = run_fresh(PLAN)
    for name in load_spec(preset="smoke").variants:
        load_module(name)
        assert _REGISTRY[name].launcher is not None
    scope: dict = {}
    exec(PLAN, scope)
    assert "torch" not in loaded and len(declared[0]) > 0 and sum(declared[1].values()) > 0
    assert declared == json.loads(json.dumps(scope["result"]))


def test_what_a_worker_sends_back_unpickles_without_torch() -> None:
    """A worker's WorkerInfo reaches the driver pickled: a torch type in it (torch.__version__ is a
    TorchVersion) would import torch there, 2-3 s after the worker is up."""
    from farm.gpu import Gpu
    from farm.worker import WorkerInfo

    gpu = Gpu("interpreter")
    info = WorkerInfo(gpu.environment(), gpu.worker_name(), gpu.uuid, "interpreter", 1 << 16, 1, "node")
    code = f"import pickle\nresult = repr(pickle.loads({pickle.dumps(info)!r}).environment.torch_version)"
    version, loaded = run_fresh(code)
    assert "torch" not in loaded and version == repr(info.environment.torch_version)


@pytest.mark.slow
def test_a_whole_sweep_leaves_the_driver_without_torch(tmp_path) -> None:
    """`farm sweep` in one process, a new local Ray and one interpreter worker: one point stored, and
    the driver never imported torch (the workers did). One point: the driver's imports are the same
    for 1 or 27, and the tiny spec's 27 on one worker took 20 s more."""
    spec = write_spec(tmp_path, ONE_POINT_SPEC)
    ray_tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths stay under 108 bytes
    code = (
        "import os\n"
        f"os.environ['RAY_TMPDIR'] = {ray_tmp!r}  # no head of this node is joined\n"
        "import cli\n"
        f"result = cli.main(['sweep', '--spec', {str(spec)!r}, '--db', {str(tmp_path / 'x.db')!r},"
        " '--workers', '1', '--no-progress'])"
    )
    try:
        status, loaded = run_fresh(code)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert status == 0 and len(measurements(tmp_path / "x.db")) == 1
    assert [m for m in ("torch", "triton") if m in loaded] == []
