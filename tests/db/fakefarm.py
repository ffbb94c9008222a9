"""The sweep driver (farm.driver) on fake GPU workers: Ray's four calls the driver makes (get, wait, kill,
an actor's remote methods) answered in-process, each point "measured" by a short sleep with a time that
a test chooses. What the driver does around the points (skips, claims, runs, heartbeats) is real.

Plain functions in an importable module: the concurrency test starts drivers in spawned processes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace

from db.records import Backend, EnvironmentInfo, MeasurementRecord
from farm.cluster import WorkerHandle
from farm.driver import Driver, SweepResult
from farm.options import SweepOptions
from farm.spec import parse_spec
from farm.worker import WorkerInfo

# 40x48x64: tiled 2 + grouped 4 + splitk 8 + cublas 1 = 15 points; 24x32x40: 2 + 3 + 6 + 1 = 12
# (tests/farm/farmkit.py's tiny spec).
TINY_SPEC = """\
name: tiny
dtypes: [bfloat16]
variants: [tiled, grouped, splitk, cublas]
shapes:
  - {m: 40, n: 48, k: 64}
  - {m: 24, n: 32, k: 40}
configs: {block_m: [16], block_n: [16, 32], block_k: [16], group_m: [1, 2], split_k: [1, 2],
          num_warps: [4], num_stages: [2]}
timing: {min_reps: 2, max_reps: 2, nondeterminism_repeats: 2}
"""
TINY_POINTS = 27

FAKE_ENV = EnvironmentInfo(
    gpu_name="CPU (fake worker)",
    sm_count=4,
    l2_bytes=1 << 20,
    memory_bytes=1 << 34,
    compute_capability="",
    driver_version="",
    cuda_version="",
    torch_version="0",
    triton_version="0",
    ray_version="0",
    python_version="3",
    host="fake-host",
    project_version="0",
    backend=Backend.INTERPRETER,
)


class _Errors:
    class RayError(Exception):
        pass

    class RayActorError(RayError):
        pass

    class RayTaskError(RayError):
        cause = None

    class ActorUnavailableError(RayError):
        pass

    class GetTimeoutError(RayError):
        pass


class FakeRay:
    """ray.get / ray.wait / ray.kill over plain values: a ref is the value itself."""

    exceptions = _Errors

    @staticmethod
    def get(ref, timeout=None):
        return ref

    @staticmethod
    def wait(refs, num_returns=1, timeout=None):
        return list(refs[:num_returns]), list(refs[num_returns:])

    @staticmethod
    def kill(actor, no_restart=True):
        pass


def _remote(fn: Callable) -> SimpleNamespace:
    return SimpleNamespace(remote=fn)


class FakeActor:
    """A GPU worker whose every point is ok after `seconds` of sleep, at ms = time_of(point)."""

    def __init__(self, info: WorkerInfo, seconds: float, time_of: Callable[[object], float]):
        self.seconds, self.time_of, self._info = seconds, time_of, info
        self.info = _remote(lambda: self._info)
        self.run_batch = _remote(self._run_batch)

    def _run_batch(self, batch, timing, repeats) -> Iterator[MeasurementRecord]:
        for point in batch.points:
            time.sleep(self.seconds)
            ms = self.time_of(point)
            yield point.record(
                "ok",
                ms=ms,
                ms_p20=ms * 0.99,
                ms_p80=ms * 1.01,
                worker=self._info.worker,
                backend=Backend.INTERPRETER,
            )


@dataclass
class FakeLaunched:
    workers: list[WorkerHandle]
    ray: object = field(default_factory=FakeRay)

    def stop(self) -> None:
        pass


def run(
    db: str,
    *,
    repeat: bool = False,
    seconds: float = 0.0,
    time_of: Callable[[object], float] = lambda point: 1.0,
    spec_text: str = TINY_SPEC,
) -> SweepResult:
    """One sweep of the spec into db on one fake worker."""
    info = WorkerInfo(FAKE_ENV, "fake:0", "", Backend.INTERPRETER, 232448, os.getpid(), "node")
    handle = WorkerHandle(actor=FakeActor(info, seconds, time_of))
    options = SweepOptions(db=db, backend="interpreter", repeat=repeat, progress=False)
    return Driver(parse_spec(spec_text), options, "fake sweep").run(FakeLaunched([handle]))


def run_at(db: str, start, seconds: float, out) -> None:
    """A spawned process's sweep: it starts once every process given `start` (a multiprocessing
    Barrier) has imported the driver and waits there too, so two start together; it puts (sweep id,
    points measured, points claimed elsewhere, points skipped) on the queue `out`."""
    start.wait(120)
    result = run(db, seconds=seconds)
    out.put((result.sweep_id, result.measured, result.claimed_elsewhere, result.skipped))
