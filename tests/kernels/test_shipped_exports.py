"""kernels.matmul takes any file a valid export writes: each shipped database's `farm export-best` and
their merge's decide a grid of unseen shapes, both objectives, into a known route and a config legal
for the shape; and hand-made files hold what an export may (several library entries at a shape, a
library-only shape, several GPUs, a plugin's variants). Decisions only: no kernel runs."""

from __future__ import annotations

import argparse
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from cli.db import cmd_export_best
from db.merge import merge
from kernels.config import LIBRARY_CONFIG, MatmulConfig
from kernels.dispatch import EAGER, LIBRARY, LIBRARY_CALLS, OBJECTIVES, PADS_ROWS, Dispatcher
from kernels.registry import get_variant
from kernels.space import Problem, unaligned_rows
from kernels.tuned import TunedConfigs
from tools.library_table import read_csv

DEMO = Path(__file__).resolve().parents[2] / "dashboard" / "demo"
DATABASES = sorted(DEMO.glob("*.db"))
EXPORTS = [*(db.stem for db in DATABASES), "merged"]
SMS = 132  # the H100 SXM's and the H200's, the GPUs of the shipped databases
NO_SUCH_GPU = "NVIDIA B200"

# Shapes no shipped database measured: decode-sized M, skinny K, short K, tall, aligned and ragged rows.
GRID = [
    *[(m, 4096, 4096) for m in (1, 3, 7)],
    (2, 11008, 4096),
    (8, 14336, 4096),
    (24, 5120, 5120),
    (31, 4097, 4096),
    (33, 12288, 4096),
    (48, 12288, 4096),
    (63, 1000, 3000),
    (64, 14336, 4096),
    (200, 3000, 7000),
    (256, 256, 65536),
    (384, 768, 16384),
    (512, 512, 65536),
    (700, 300, 20000),
    (128, 1000, 12289),
    (1000, 1000, 9000),
    (4096, 4096, 64),
    (3000, 5000, 100),
    (8192, 8192, 16),
    (6144, 2048, 72),
    (65536, 256, 256),
    (32768, 1024, 512),
    (50000, 64, 4096),
    (760, 1000, 8000),
    (2500, 2500, 2500),
    (3072, 3072, 3072),
    (5000, 5000, 5000),
    (16000, 16000, 16000),
    (495, 5333, 71),
    (2999, 1501, 1235),
    (4097, 4097, 4097),
    (777, 999, 1111),
    (1500, 3001, 2049),
    (333, 4444, 5555),
    (6001, 333, 4100),
    (17, 17, 17),
    (100, 100, 100),
    (96, 12000, 3001),
]


def export(db: str, out: Path) -> Path:
    """`farm export-best --db db --out out`, the command itself."""
    args = argparse.Namespace(db=db, out=out, gpu=None, dtype=None, include_interpreter=False)
    assert cmd_export_best(args) == 0
    return out


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each shipped database's export and the export of their merge (`farm db merge` into a temp
    database: the shipped files are only read)."""
    folder = tmp_path_factory.mktemp("exports")
    merged = folder / "merged.db"
    merge([str(db) for db in DATABASES], str(merged))
    named = {db.stem: str(db) for db in DATABASES} | {"merged": str(merged)}
    return {name: export(db, folder / f"{name}.json") for name, db in named.items()}


def test_the_grid_is_unseen_and_the_databases_are_shipped(exports: dict[str, Path]) -> None:
    assert len(GRID) == len(set(GRID)) == 40 and len(DATABASES) >= 3
    tuned = {(e.m, e.n, e.k) for e in TunedConfigs.load(exports["merged"]).entries}
    assert not tuned & set(GRID)
    gpus = {e.gpu_name for e in TunedConfigs.load(exports["merged"]).entries}
    assert len(gpus) >= 2  # the merge holds several GPUs' entries


@pytest.mark.parametrize("name", EXPORTS)
def test_an_export_holds_one_library_entry_per_shape(exports: dict[str, Path], name: str) -> None:
    """One row per (GPU, dtype, shape, variant, objective): cuBLAS, one config in bf16, is one entry; a
    Triton variant at most two (each objective's best)."""
    entries = TunedConfigs.load(exports[name]).entries
    per_key = Counter((e.gpu_name, e.dtype, e.m, e.n, e.k, e.variant) for e in entries)
    assert max(n for key, n in per_key.items() if key[-1] == LIBRARY) == 1
    assert max(per_key.values()) <= len(OBJECTIVES)


def _check(choice, m: int, n: int, k: int, dtype: torch.dtype, shapes: set) -> str:
    """The route a decision names, after checking it is one this program can run at this shape."""
    if choice.variant in LIBRARY_CALLS:  # cuBLAS, or cuBLAS on padded copies
        assert choice.config == LIBRARY_CONFIG
    else:
        variant = get_variant(choice.variant)  # a known variant's launcher (raises if unknown)
        assert not choice.config.is_library and not variant.space.base.is_library
        assert MatmulConfig.from_dict(choice.config.as_dict()) == choice.config  # its own checks pass
        assert variant.space.prune(choice.config, Problem(m, n, k, dtype)) is None, (m, n, k, choice)
    assert choice.tuned_shape is None or choice.tuned_shape in shapes
    return choice.variant


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("name", EXPORTS)
def test_every_export_decides_every_shape_into_a_known_route(
    exports: dict[str, Path], name: str, objective: str
) -> None:
    tuned = TunedConfigs.load(exports[name])
    dispatch = Dispatcher(tuned, objective=objective)
    routes = Counter()
    for gpu, dtype in sorted({(e.gpu_name, e.dtype) for e in tuned.entries}):
        shapes = {(e.m, e.n, e.k) for e in tuned.entries if (e.gpu_name, e.dtype) == (gpu, dtype)}
        torch_dtype = getattr(torch, dtype)
        for m, n, k in GRID:
            choice = dispatch.choose(m, n, k, torch_dtype, gpu, programs=SMS, objective=objective)
            routes[_check(choice, m, n, k, torch_dtype, shapes)] += 1
    # both kinds of route are taken: a dispatcher that always ran the library (or never) fails here
    library = sum(routes[name] for name in LIBRARY_CALLS)
    assert routes[LIBRARY] and sum(routes.values()) > library, routes
    with pytest.warns(UserWarning, match=f"no tuned configs for {NO_SUCH_GPU}"):
        choice = dispatch.choose(
            48, 12288, 4096, torch.bfloat16, NO_SUCH_GPU, programs=SMS, objective=objective
        )
    assert (choice.variant, choice.tuned_shape) == (LIBRARY, None)


# ---- hand-made files: what an export may hold, each case on its own ----

GPU, OTHER_GPU = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
TILE = MatmulConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=3)


def _entry(shape, variant, ms, config=LIBRARY_CONFIG, gpu=GPU, host_ms=None):
    m, n, k = shape
    entry = {"gpu_name": gpu, "dtype": "bfloat16", "m": m, "n": n, "k": k, "variant": variant, "ms": ms,
             "tflops": 2 * m * n * k / ms * 1e-9, "config": config.as_dict()}  # fmt: skip
    return entry if host_ms is None else {**entry, "host_ms": host_ms}


def _dispatcher(tmp_path: Path, entries: list[dict]) -> Dispatcher:
    path = tmp_path / "best.json"
    path.write_text(
        json.dumps({"format": "triton-matmul-farm/best-configs", "version": 1, "entries": entries})
    )
    return Dispatcher.load(path)


def _decide(dispatch: Dispatcher, m: int, n: int, k: int, gpu: str = GPU, objective: str = "kernel"):
    choice = dispatch.choose(m, n, k, torch.bfloat16, gpu, programs=SMS, objective=objective)
    return choice.variant, choice.tuned_shape


# The H100's unseen-shapes table: benchmarks/vs_libraries.py's unseen suite timed from an export of the
# shipped databases' aligned shapes (its .meta says how that export was made)
UNSEEN_TABLE = Path(__file__).resolve().parents[2] / "docs" / "results" / "vs_libraries_h100_unseen.csv"
H100 = "NVIDIA H100 80GB HBM3"


def test_the_unseen_table_times_what_the_merged_export_runs(exports: dict[str, Path], tmp_path: Path) -> None:
    """The merged export holds the H100 study's unaligned shapes, measured with grouped, splitk and
    cuBLAS on the unaligned rows only: decided from them the unseen suite's unaligned shapes ran
    `grouped` at 0.26-0.76 of the faster of cuBLAS and Inductor (H100). Every row of the unseen table
    decides from the merged export as from its aligned shapes alone, and as the row says it ran (the
    unaligned shapes on padded copies): the table, timed from the aligned shapes (0.98-1.54 of the
    faster library), times what the shipped databases' export runs; a change of decision makes it stale."""
    tuned = TunedConfigs.load(exports["merged"])
    aligned_only = tmp_path / "aligned.json"
    bf16 = [e for e in tuned.entries if (e.gpu_name, e.dtype) == (H100, "bfloat16")]
    TunedConfigs([e for e in bf16 if unaligned_rows(Problem(e.m, e.n, e.k, torch.bfloat16)) is None]).save(
        aligned_only
    )
    assert any(unaligned_rows(Problem(e.m, e.n, e.k, torch.bfloat16)) for e in bf16)  # the study's are in
    full, aligned = Dispatcher(tuned), Dispatcher(TunedConfigs.load(aligned_only))
    rows = read_csv([str(UNSEEN_TABLE)])
    assert sum(1 for r in rows if unaligned_rows(Problem(r.m, r.n, r.k, torch.bfloat16))) >= len(rows) / 3
    for row, objective in itertools.product(rows, OBJECTIVES):
        choices = [
            d.choose(row.m, row.n, row.k, torch.bfloat16, H100, programs=SMS, objective=objective)
            for d in (full, aligned)
        ]
        assert choices[0] == choices[1], (row, objective)
        if unaligned_rows(Problem(row.m, row.n, row.k, torch.bfloat16)):
            assert choices[0].variant in PADS_ROWS, (row, objective)
        if objective == EAGER:  # tools/library_bench.py's `ours`: the dispatcher's default objective
            assert (choices[0].variant, choices[0].config.key) == (row.ours_variant, row.ours_config), row


@pytest.mark.parametrize(
    ("grouped_ms", "serves"),
    [(0.45, "grouped"), (0.55, LIBRARY), (0.65, LIBRARY)],
    ids=["ahead-of-both", "between-them", "behind-both"],
)
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_several_library_entries_at_a_shape_are_each_a_rival_never_a_candidate(
    tmp_path: Path, grouped_ms: float, serves: str, objective: str
) -> None:
    """Two cuBLAS entries (float32's ieee and tf32, or two exports joined): a Triton entry between them
    is behind one, so the library serves. A second library entry had been taken as a Triton candidate
    and its block sizes of 0 divided by (ZeroDivisionError at 200x3000x7000 on an H100)."""
    shape = (2048, 2048, 4096)
    dispatch = _dispatcher(
        tmp_path,
        [
            _entry(shape, LIBRARY, 0.50, host_ms=0.012),
            _entry(shape, LIBRARY, 0.60, host_ms=0.010),
            _entry(shape, "grouped", grouped_ms, TILE, host_ms=0.030),
        ],
    )
    # rows aligned as the shape's (2,096 columns): the library as measured, not on padded copies
    assert _decide(dispatch, 2000, 2096, 4000, objective=objective) == (serves, shape)


def test_a_shape_with_only_a_library_entry_decides_for_the_library(tmp_path: Path) -> None:
    library_only, farther = (48, 12288, 4096), (64, 4096, 4096)
    dispatch = _dispatcher(
        tmp_path,
        [
            _entry(library_only, LIBRARY, 0.040),
            _entry(farther, LIBRARY, 0.030),
            _entry(farther, "grouped", 0.010, TILE.replace(block_m=64, group_m=1)),
        ],
    )
    assert _decide(dispatch, 40, 12000, 4096) == (LIBRARY, library_only)
    assert _decide(dispatch, 60, 4000, 4096) == ("grouped", farther)  # control: the other shape's Triton


def test_only_the_running_gpus_entries_decide(tmp_path: Path) -> None:
    """A file of H100 and H200 entries: each GPU's own winners; a GPU the file does not name runs the
    library after one warning."""
    shape = (4096, 4096, 4096)
    dispatch = _dispatcher(
        tmp_path,
        [
            _entry(shape, LIBRARY, 0.200, gpu=GPU),
            _entry(shape, "grouped", 0.180, TILE, gpu=GPU),
            _entry(shape, LIBRARY, 0.150, gpu=OTHER_GPU),
            _entry(shape, "grouped", 0.170, TILE, gpu=OTHER_GPU),
        ],
    )
    assert _decide(dispatch, 4000, 4000, 4000, GPU) == ("grouped", shape)
    assert _decide(dispatch, 4000, 4000, 4000, OTHER_GPU) == (LIBRARY, shape)
    with pytest.warns(UserWarning, match=f"no tuned configs for {NO_SUCH_GPU}"):
        assert _decide(dispatch, 4000, 4000, 4000, NO_SUCH_GPU) == (LIBRARY, None)


def test_a_plugins_variants_are_passed_over(tmp_path: Path) -> None:
    """Entries of variants this program does not know, a library-space one (LIBRARY_CONFIG, block sizes
    0) among them, never serve and never raise: the known entries of the shape decide, and a shape that
    holds nothing else leaves the decision to the next."""
    plugin_only, known = (1024, 1024, 1024), (2048, 2048, 2048)
    dispatch = _dispatcher(
        tmp_path,
        [
            _entry(plugin_only, "my_plugin_matmul", 0.005, TILE),
            _entry(plugin_only, "my_plugin_library", 0.004),
            _entry(known, "my_plugin_library", 0.010),
            _entry(known, LIBRARY, 0.030),
            _entry(known, "grouped", 0.025, TILE),
        ],
    )
    assert _decide(dispatch, 1000, 1000, 1000) == ("grouped", known)
    # kernels.tuned's lookup returns what launches: a plugin's entry only where asked for by name
    tuned = TunedConfigs.load(tmp_path / "best.json")
    assert tuned.lookup(1000, 1000, 1000, torch.bfloat16, gpu_name=GPU) == ("grouped", TILE)
    assert tuned.lookup(1000, 1000, 1000, "bfloat16", variant="my_plugin_matmul") == (
        "my_plugin_matmul",
        TILE,
    )
