"""Farm tests: Ray with logical GPUs on this CPU-only machine, the interpreter backend, tiny grids."""

from pathlib import Path

import pytest
from farmkit import HALF_SPEC, write_spec

# One local Ray with 4 logical GPUs for every module whose tests use `ray_cluster`: those modules run
# one after another (pytest_collection_modifyitems) and the Ray is shut down after the last test of
# the last of them (pytest_runtest_teardown), so no other module sees it: an in-process sweep there
# starts a local Ray of its own, and test_node_loss.py needs a Ray of its own. A start and a shutdown
# took 6 s, once for each such module before.
_RAY_MODULES: set[str] = set()  # the files of the modules that use it
_ray_up = []  # [the ray module] while it is up


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


def pytest_collection_modifyitems(session, config, items) -> None:
    """The modules that use `ray_cluster` moved together, to where the first of them was; each
    module's tests stay together and in their order."""
    _RAY_MODULES.update(_file(item) for item in items if "ray_cluster" in item.fixturenames)
    if not _RAY_MODULES:
        return
    first = next(i for i, item in enumerate(items) if _file(item) in _RAY_MODULES)
    rest = [item for item in items if _file(item) not in _RAY_MODULES]
    items[:] = rest[:first] + [item for item in items if _file(item) in _RAY_MODULES] + rest[first:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if _ray_up and (nextitem is None or _file(nextitem) not in _RAY_MODULES):
        _ray_up.pop().shutdown()


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray with 4 logical GPUs for a module's in-process sweeps: the one every module that
    uses this fixture shares."""
    if not _ray_up:
        import ray

        ray.init(num_cpus=2, num_gpus=4, include_dashboard=False, log_to_driver=False)
        _ray_up.append(ray)
    return _ray_up[0]


@pytest.fixture(scope="module")
def worker():
    """A GpuWorker on the interpreter backend, in process (no Ray): a module's batches run through it."""
    import os

    from farm.worker import GpuWorker

    os.environ["TRITON_INTERPRET"] = "1"
    w = GpuWorker([], backend="interpreter", compile_threads=1)
    yield w
    w.pool.shutdown()


@pytest.fixture
def tiny_spec(tmp_path) -> Path:
    return write_spec(tmp_path)


@pytest.fixture
def half_spec(tmp_path) -> Path:
    """The tiny spec's second shape: 12 points, for sweeps stopped or hurt half-way."""
    return write_spec(tmp_path, HALF_SPEC, "half.yaml")
