"""Farm tests: Ray with logical GPUs on this CPU-only machine, the interpreter backend, tiny grids."""

from pathlib import Path

import pytest
from farmkit import HALF_SPEC, write_spec


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray with 4 logical GPUs for a module's in-process sweeps (test_node_loss.py
    needs a Ray of its own, so this one does not outlive its module)."""
    import ray

    ray.init(num_cpus=2, num_gpus=4, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


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
