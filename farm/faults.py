"""The fault policy (DESIGN "Faults"), as decisions over the in-flight state; no Ray, no database.

- A worker that dies (a CUDA error poisons its context, a segfault, SIGKILL, a lost node) is
  restarted by Ray. The point it was checking is the suspect: it is retried once, alone, then
  stored `crashed`. Points it was timing are retried one by one. Its other points go back to
  the queue untouched.
- A batch past its deadline gets its worker killed and restarted; the point it was checking (or
  the batch's only point) is stored `timeout` at once: a hang is not worth a second deadline.
- A config stored `crashed` or `timeout` is quarantined: its points on other shapes are stored
  with the same status without running, so one bad config cannot use up the restarts.
- A worker whose instrument failed twice in one batch (farm.worker: CUPTI degrades in an old
  process) is restarted; nobody is blamed. That batch's unfinished points wait for the fresh
  process, once per point; the worker's other batches go back to the queue untouched.

The driver applies the decisions (requeue, store, kill) and owns the Ray calls.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from db.records import MeasurementRecord, Status
from farm.metrics import operand_bytes
from farm.plan import Batch, Point

FINAL = (Status.CRASHED, Status.TIMEOUT)
QUARANTINED = "quarantined"


@dataclass
class Fault:
    kind: str  # "crashed" | "timeout" | "worker lost" | "instrument"
    worker: int
    point: str
    detected: float
    old_pid: int | None = None  # the process that failed; the restarted worker has another
    recovery_s: float | None = None
    detail: str = ""  # what was heard: the instrument's message for "instrument"


@dataclass
class InFlight:
    """A batch a worker is running, as far as its progress reports tell."""

    batch: Batch
    worker: int
    index_of: dict
    done: set = field(default_factory=set)
    # "compile" until the worker's first report, then its farm.worker.Progress phase: queued |
    # warmup | check | timing | poisoned
    phase: str = "compile"
    current: int | None = None
    timing: tuple = ()
    deadline: float = 0.0


@dataclass
class LostBatch:
    """What becomes of a batch whose worker died or hung."""

    suspects: list[Point]  # the points that may have caused it
    innocent: list[Point]  # back to the queue as one batch
    retry: list[Point]  # each back alone (first failure)
    store: list[tuple[Point, MeasurementRecord]]  # settled: stored with this record
    # back as one batch for the worker's restarted process alone (an instrument that went stale)
    fresh: list[Point] = field(default_factory=list)


# The fault kind of a worker whose process died (Ray's RayActorError), not hung or poisoned.
WORKER_LOST = "worker lost"
# The fault kind of a worker restarted because its instrument failed twice in one batch (farm.worker).
INSTRUMENT = "instrument"
# The phases in which a batch holds its worker's GPU (farm.worker: one batch at a time).
GPU_PHASES = ("warmup", "check", "timing")


def suspects(flight: InFlight, gpu_elsewhere: bool = False, died: bool = False) -> set[int]:
    """The points that may have killed the worker: the one being checked, those being timed,
    or, while the batch was still compiling, all of it (a compiler crash, or a launcher that
    kills its process even when asked only to compile).

    died: the worker's process is gone, and the last report it yielded may have gone with it (a
    retry that killed its worker again, heard only `queued`, ran a third time in one CI run). So
    the point after the one heard checked is a suspect too, and a batch last heard `queued` is
    blamed (its first unfinished point) unless another batch of its worker was heard on the GPU
    (`gpu_elsewhere`). A hung or poisoned worker still reports: it is where it was heard."""
    unfinished = set(range(len(flight.batch.points))) - flight.done
    if flight.phase == "compile":
        return unfinished
    if flight.phase == "check" and flight.current is not None:
        after = [i for i in sorted(unfinished) if i > flight.current][:1] if died else []
        return {flight.current, *after} & unfinished  # its record may have come: then not it
    if flight.phase == "timing":
        return set(flight.timing) & unfinished
    if flight.phase == "queued" and died and not gpu_elsewhere and unfinished:
        return {min(unfinished)}
    return set()


def progress_deadline(phase: str, now: float, current: float, floor_s: float, estimate_s: float) -> float:
    """When a batch in flight must next be heard from, after it reported `phase` (0.0: no deadline).

    "queued": waiting for the GPU behind another batch, no deadline. "check" gets 10x its estimate
    (a first launch may still load the kernel), every other phase 3x, over the floor. "warmup" comes
    while the first batch compiles, so it never shortens the compile allowance already set.
    """
    if phase == "queued":
        return 0.0
    deadline = now + floor_s + (10 if phase == "check" else 3) * estimate_s
    return max(current, deadline) if phase == "warmup" else deadline


def failure_record(point: Point, status: str, error: str) -> MeasurementRecord:
    return point.record(status, error, operand_bytes=operand_bytes(point.m, point.n, point.k, point.dtype))


class FaultPolicy:
    """Retry once then store, and quarantine, over the attempts and stored failures it has seen."""

    def __init__(self, versions: dict[str, str]):
        self.versions = versions  # variant -> code version: part of a point's identity
        self.attempts: collections.Counter = collections.Counter()
        self.quarantine: dict[tuple, MeasurementRecord] = {}
        self.fresh_given: set[tuple] = set()  # points given a fresh process for the instrument

    def retry(self, point: Point) -> bool:
        """Count a failure of `point`: True the first time (run it again, alone), then False (store it)."""
        key = point.key(self.versions[point.variant])
        self.attempts[key] += 1
        return self.attempts[key] < 2

    def lost(self, flight: InFlight, kind: str, detail: str, gpu_elsewhere: bool = False) -> LostBatch:
        """The batch of a worker that died (`crashed`, `worker lost`) or hung (`timeout`);
        gpu_elsewhere: another batch of that worker was heard on the GPU (`suspects`)."""
        blamed = suspects(flight, gpu_elsewhere, died=kind == WORKER_LOST)
        outcome = LostBatch(
            suspects=[flight.batch.points[i] for i in sorted(blamed)],
            innocent=[p for i, p in enumerate(flight.batch.points) if i not in flight.done | blamed],
            retry=[],
            store=[],
        )
        for point in outcome.suspects:
            if kind == "timeout" and (flight.phase == "check" or len(flight.batch.points) == 1):
                outcome.store.append((point, failure_record(point, Status.TIMEOUT, f"timed out: {detail}")))
            elif self.retry(point):
                outcome.retry.append(point)
            else:
                outcome.store.append((point, failure_record(point, Status.CRASHED, f"{kind}: {detail}")))
        return outcome

    def restarted(self, flight: InFlight, stale: bool) -> LostBatch:
        """A batch of a worker restarted for its instrument (INSTRUMENT): no suspects, no retry counted.
        stale: the batch whose instrument failed twice; its unfinished points go to the fresh process
        (`fresh`), noted so that they are never given another (`fresh_process`). The worker's other
        batches are innocent."""
        unfinished = [p for i, p in enumerate(flight.batch.points) if i not in flight.done]
        if not stale:
            return LostBatch(suspects=[], innocent=unfinished, retry=[], store=[])
        self.fresh_given.update(p.key(self.versions[p.variant]) for p in unfinished)
        return LostBatch(suspects=[], innocent=[], retry=[], store=[], fresh=unfinished)

    def fresh_process(self, points: list[Point]) -> bool:
        """Whether any of `points` was given its fresh process already: the worker then stores an
        instrument's fault (`instrument_error`) instead of asking for another (one a point: a broken
        instrument cannot loop)."""
        return any(p.key(self.versions[p.variant]) in self.fresh_given for p in points)

    def stored(self, point: Point, record: MeasurementRecord) -> None:
        """Note a stored record: a config that ended crashed or timeout is quarantined."""
        if record.status in FINAL and not record.error.startswith(QUARANTINED):
            self.quarantine[(point.variant, point.dtype, point.config.key)] = record

    def quarantined(self, point: Point) -> MeasurementRecord | None:
        """The record to store instead of running `point`, if its config is quarantined."""
        culprit = self.quarantine.get((point.variant, point.dtype, point.config.key))
        if culprit is None:
            return None
        note = (
            f"{QUARANTINED}: this config ended {culprit.status} on {culprit.m}x{culprit.n}x{culprit.k} "
            f"({culprit.error.splitlines()[0][:200]}); not run"
        )
        return failure_record(point, culprit.status, note)
