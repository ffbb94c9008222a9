"""The sweep driver: hands batches to the GPU workers in completion order, keeps every worker
busy with bounded work in flight, and survives faults.

It composes three parts, one job each: farm/cluster.py (join or start Ray, start and stop the
workers; farm/gpu_wait.py waits for them), farm/faults.py (the fault policy: what a lost worker's
points become, retry once, quarantine) and farm/sink.py (the one database writer, counts and
progress bar). What stays here is dispatch and the loop: progress reports, deadlines, worker recovery.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import signal
import time
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from db.engine import make_engine, sqlite_file
from db.errors import DatabaseError
from db.records import CUT_FACTOR, Backend, MeasurementRecord, Status
from db.resume import stored_times
from db.schema import ensure_current
from db.writes import done_keys, environment_id
from farm import cluster, gpu_wait
from farm.errors import UserError
from farm.faults import (
    GPU_PHASES,
    INSTRUMENT,
    WORKER_LOST,
    Fault,
    FaultPolicy,
    InFlight,
    failure_record,
    progress_deadline,
)
from farm.metrics import NOMINAL_GPU, DeviceLimits
from farm.options import SweepOptions
from farm.plan import (
    Batch,
    Plan,
    Point,
    code_versions,
    estimate_gpu_seconds,
    expand,
    host_memory_bytes,
    interpreter_refusal,
    pending,
    split_too_large,
    too_large_error,
)
from farm.plugins import load_plugin
from farm.search import load_observations, parse_budget
from farm.sink import FLUSH_EVERY_S, WRITE_ERRORS, ResultSink, full_disk, write_failed
from farm.source import GridSource, PointSource, SearchSource
from farm.spec import GridSpec, spec_as_dict
from farm.worker import Progress
from kernels.space import DEFAULT_SMEM_LIMIT

log = logging.getLogger("farm")

# With work queued and every worker restarting (a lost node, a GPU reset), wait this long for one.
RECOVERY_WAIT_S = 600.0


@dataclass
class SweepResult:
    sweep_id: int | None
    skipped: int  # points the database already held
    counts: collections.Counter
    failures: list[MeasurementRecord]
    faults: list[Fault]
    seconds: float
    status: str
    # points another running sweep had claimed, or stored while this one ran (db.claims): not measured here
    claimed_elsewhere: int = 0

    @property
    def measured(self) -> int:
        return sum(self.counts.values())


class Driver:
    def __init__(self, spec: GridSpec, options: SweepOptions, command: str):
        self.spec, self.options, self.command = spec, options, command
        self.repeats = spec.timing.nondeterminism_repeats
        self.queue: collections.deque[Batch] = collections.deque()
        self.inflight: dict[object, InFlight] = {}
        self.workers: list[cluster.WorkerHandle] = []
        self.faults: list[Fault] = []
        self.versions: dict[str, str] = {}
        self.fault_policy = FaultPolicy(self.versions)
        self.sink: ResultSink | None = None
        self.plan: Plan | None = None
        self.source: PointSource | None = None
        # the best kernel ms known per (dtype, m, n, k): stored before the sweep and measured since (the cut)
        self.best_ms: dict[tuple, float] = {}

    @property
    def counts(self) -> collections.Counter:
        """Points stored so far, by status (empty before the sweep starts)."""
        return self.sink.counts if self.sink else collections.Counter()

    # -- set-up --------------------------------------------------------------------------------

    def run(self, launched: cluster.Launched | None = None) -> SweepResult:
        """The sweep, on the workers `cluster.launch` created (this call stops them), or on its own."""
        if launched is None:
            plugin_sources = [load_plugin(path) for path in self.options.plugins]
            # Validates variants before anything is started or written.
            self.plan = Plan(DEFAULT_SMEM_LIMIT, expand(self.spec)[0])
            # Ray first: an unreachable cluster is an error before the database file is created.
            launched = self.options.launch(plugin_sources)
        self.engine = None
        try:
            # The workers import torch and open their GPUs while the database opens and migrates.
            self.workers = launched.workers
            self.engine = self._open_database()
            # The plan for an H100/H200's shared memory, made while the workers start (the full
            # preset's 124k points: 1.8 s); _run plans again for workers with less or more.
            if self.plan is None:
                self.plan = Plan(DEFAULT_SMEM_LIMIT, expand(self.spec)[0])
            gpu_wait.await_workers(launched.ray, self.workers, wait_s=self.options.wait_s)
            return self._run(launched.ray)
        finally:
            launched.stop()
            if self.engine is not None:
                # Its pooled connection kept the file open after the sweep: a library caller's every
                # sweep left a descriptor behind, and a full tmpfs could not be unmounted.
                self.engine.dispose()

    def _open_database(self) -> Engine:
        """The engine, the database created or at head. A full disk while it is created (SQLite's WAL
        switch, the -shm file, the migrations' pages) is the sweep's one-line WriteFailed (exit 3: the
        same command runs once there is room), not a damaged database or a traceback; other problems
        stay DatabaseError (exit 2)."""
        engine = None
        try:
            engine = make_engine(self.options.db)
            ensure_current(engine, create=True)
            return engine
        except (DatabaseError, *WRITE_ERRORS) as exc:
            if engine is not None:
                engine.dispose()
            file = sqlite_file(self.options.db)
            if not full_disk(exc, file.parent if file else None):
                raise
            raise write_failed(self.options.db, exc, 0, "nothing was stored") from None

    def _run(self, ray) -> SweepResult:
        o = self.options
        try:
            with Session(self.engine) as session:
                for w in self.workers:
                    w.env_id = environment_id(session, w.info.environment)
                session.commit()
        except WRITE_ERRORS as exc:  # a full disk, a read-only file: one line, nothing started yet
            raise write_failed(self.engine, exc, len(self.plan.points), "nothing was stored") from None
        smem = min(w.info.smem_limit for w in self.workers)
        points = self.plan.points if self.plan.smem_limit == smem else expand(self.spec, smem_limit=smem)[0]
        self._check_backend(points)
        self.versions.update(code_versions(self.spec.variants))
        env_ids = {w.env_id for w in self.workers}
        statuses = (Status.OK, Status.WRONG) if o.retry_failed else None
        self.claim_statuses = statuses  # what counts as stored when a claim finds a point measured meanwhile
        if o.repeat:  # every point again, as this sweep's own run of it (the older runs stay)
            done: set[tuple] = set()
        else:
            with self.engine.connect() as conn:
                done = done_keys(
                    conn,
                    env_ids,
                    statuses=statuses,
                    code_versions=set(self.versions.values()),
                    variants={p.variant for p in points},
                    dtypes={p.dtype for p in points},
                    shapes={p.shape for p in points},
                )
        todo = pending(points, self.versions, done)
        skipped = len(points) - len(todo)
        memory = self._memory_bytes()
        todo, too_large = split_too_large(todo, memory)  # stored as rows below, never run
        self.source = self._source(points, todo, env_ids)
        self.sink = ResultSink.open(
            self.engine,
            name=self.spec.name,
            spec=spec_as_dict(self.spec),
            command=self.command,
            n_points=self.source.size + len(too_large),
            progress=o.progress,
            repeat=o.repeat,
        )
        for point in too_large:
            self._store(point, point.record(Status.TOO_LARGE, too_large_error(point, memory)), None)
        start = time.monotonic()
        status = "finished"
        # `farm sweep` turns the first SIGTERM into KeyboardInterrupt and lets its clean-up finish
        # (cli/sweep.py, StopSignals); a caller of run_sweep that installed nothing gets the first part.
        default = signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None)
        previous = signal.signal(signal.SIGTERM, _raise_interrupt) if default else None
        try:
            self._loop(ray)
            if self.queue:
                status = "failed"
        except KeyboardInterrupt:
            status = "interrupted"
        finally:
            if default:
                signal.signal(signal.SIGTERM, previous)
            self.sink.close(status)
        return SweepResult(
            self.sink.sweep_id,
            skipped,
            self.sink.counts,
            self.sink.failures,
            self.faults,
            time.monotonic() - start,
            status,
            self.sink.claimed_elsewhere,
        )

    def _source(self, points: list[Point], todo: list[Point], env_ids: set[int]) -> PointSource:
        """The grid (every point not stored yet) or a search over the plan; and the best time stored per
        shape, which the early cut compares with."""
        o = self.options
        with self.engine.connect() as conn:
            stored = stored_times(
                conn, env_ids, code_versions=set(self.versions.values()), shapes={p.shape for p in points}
            )
        times = {p: stored.get(p.key(self.versions[p.variant]), _ABSENT) for p in points}
        for p, ms in times.items():
            if ms not in (None, _ABSENT):
                self._note_best(p, ms)
        if o.search == "grid":
            return GridSource(todo, self.spec.seed)
        gpu = self.workers[0].info.environment
        # Every GPU's rows teach: each row carries its own SMs and L2 (farm/search/features.py), and the
        # in-group correction (farm/search/model.py) learns this GPU's offset from its first points.
        observations = load_observations([o.db, *o.train])
        fit = set(todo)  # too_large points and, without --repeat, stored ones are not candidates to run
        return SearchSource(
            [p for p in points if p in fit or times[p] is not _ABSENT],
            strategy=o.search,
            budget=parse_budget(o.budget),
            seed=self.spec.seed,
            stored={} if o.repeat else {p: ms for p, ms in times.items() if ms is not _ABSENT},
            observations=observations,
            limits=_limits(gpu),
        )

    def _note_best(self, point: Point, ms: float) -> None:
        shape = (point.dtype, *point.shape)
        self.best_ms[shape] = min(ms, self.best_ms.get(shape, ms))

    def _check_backend(self, points: list[Point]) -> None:
        """GPU-sized points on workers that run the interpreter (no GPU) only when asked for."""
        on_cpu = any(w.info.backend == Backend.INTERPRETER for w in self.workers)
        if on_cpu and self.options.backend != Backend.INTERPRETER:
            refusal = interpreter_refusal(points, estimate_gpu_seconds(points, self.options.compile_threads))
            if refusal:
                raise UserError(refusal)

    def _memory_bytes(self) -> int:
        """The least memory of a worker's device; the interpreter's is this host's (the CPU)."""
        return min(w.info.environment.memory_bytes or host_memory_bytes() for w in self.workers)

    # -- the loop ------------------------------------------------------------------------------

    def _loop(self, ray) -> None:
        """Until every point is stored. Workers still restarting at the end (their node is gone and
        no GPU is free for them) are not waited for; with work left and no worker alive, the
        sweep ends `failed` after RECOVERY_WAIT_S."""
        stalled_since = None
        while self.queue or self.inflight or not self.source.exhausted:
            self._dispatch()
            if not self.queue and not self.inflight and not self.source.exhausted:
                log.error("the point source has nothing to hand out and nothing in flight; stopping")
                return
            if not self.inflight:
                if not any(w.recovering for w in self.workers):
                    log.error("no live workers left; %d batches not run", len(self.queue))
                    return
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > RECOVERY_WAIT_S:
                    log.error(
                        "no worker came back in %.0f s; %d batches not run", RECOVERY_WAIT_S, len(self.queue)
                    )
                    return
            else:
                stalled_since = None
            waitables = list(self.inflight) + [w.info_call for w in self.workers if w.recovering]
            ready, _ = ray.wait(waitables, num_returns=1, timeout=self._wait_timeout())
            for ref in ready:
                if ref in self.inflight:
                    self._advance(ray, ref)
                else:
                    self._recovered(ray, ref)
            self._check_deadlines(ray)
            self.sink.flush()

    def _wait_timeout(self) -> float:
        deadlines = [f.deadline for f in self.inflight.values() if f.deadline]
        until = min(deadlines, default=time.monotonic() + FLUSH_EVERY_S) - time.monotonic()
        return max(0.05, min(FLUSH_EVERY_S, until))

    def _dispatch(self) -> None:
        """Give the next batch to the least busy worker until every worker has its share in flight; a
        batch that waits for a restarted worker's fresh process (Batch.worker) goes to that one alone."""
        while self.queue or self._refill():
            ready = [
                wi
                for wi, w in enumerate(self.workers)
                if w.alive and not w.recovering and w.inflight < self.options.inflight_per_worker
            ]
            if not ready:
                return
            batch = self._next_batch(ready)
            if batch is None:
                return
            wi = (
                batch.worker
                if batch.worker is not None
                else min(ready, key=lambda i: self.workers[i].inflight)
            )
            w = self.workers[wi]
            batch = self._without_quarantined(self._claimed(batch))
            if batch.points:
                batch.fresh_process = self.fault_policy.fresh_process(batch.points)
                # the spec's timing: the worker makes its farm.timing.TimingPolicy (farm.timing imports torch)
                best = self.best_ms.get((batch.dtype, batch.m, batch.n, batch.k))
                batch.cut_ms = CUT_FACTOR * best if best else None
                gen = w.actor.run_batch.remote(batch, self.spec.timing, self.repeats)
                index_of = {(p.variant, p.config.key): i for i, p in enumerate(batch.points)}
                deadline = time.monotonic() + self._compile_allowance(batch)
                self.inflight[gen] = InFlight(batch, wi, index_of, deadline=deadline)
                w.inflight += 1

    def _next_batch(self, ready: list[int]) -> Batch | None:
        """The first queued batch one of the `ready` workers may run, taken off the queue (refilled from
        the point source where no queued batch may run now); None if there is none."""
        while True:
            for i, batch in enumerate(self.queue):
                if batch.worker is not None and not self.workers[batch.worker].alive:
                    batch.worker = None  # its worker did not come back: any worker's process is fresher
                if batch.worker is None or batch.worker in ready:
                    del self.queue[i]
                    return batch
            queued = len(self.queue)
            self._refill()
            if len(self.queue) == queued:
                return None

    def _claimed(self, batch: Batch) -> Batch:
        """The batch's points that this sweep now holds the claim of (db.claims): another running sweep
        into the same database measures the others, or has stored them since the plan was made."""
        env_ids = {w.env_id for w in self.workers if w.env_id is not None}
        keys = {p.key(self.versions[p.variant]): p for p in batch.points}
        ours = self.sink.claim(env_ids, keys, self.claim_statuses)
        batch.points = [p for key, p in keys.items() if key in ours]
        for key, p in keys.items():
            if key not in ours:
                self.source.tell(p, None)  # another sweep measures it, or has
        return batch

    def _without_quarantined(self, batch: Batch) -> Batch:
        keep = []
        for point in batch.points:
            instead = self.fault_policy.quarantined(point)
            if instead is None:
                keep.append(point)
            else:
                self._store(point, instead, None)
        batch.points = keep
        return batch

    def _compile_allowance(self, batch: Batch) -> float:
        # Compiling and waiting for the GPU behind the other batch: about 0.5 s per config on 8
        # threads, and the other batch's timing; generous, it only catches a hung compiler.
        return self.options.point_timeout_s * 5 + 2.0 * len(batch.points)

    def _advance(self, ray, ref) -> None:
        flight = self.inflight[ref]
        try:
            item = ray.get(next(ref))
        except StopIteration:
            self._finish_batch(ref)
            return
        except ray.exceptions.RayActorError as exc:
            self._worker_lost(ray, flight.worker, WORKER_LOST, str(exc).splitlines()[0])
            return
        except ray.exceptions.RayTaskError as exc:  # the worker itself raised: a bug, retried once per point
            self._task_failed(ref, exc)
            return
        now = time.monotonic()
        if isinstance(item, Progress):
            if item.phase == "poisoned":  # a CUDA error while timing, or a batch that met a lost context
                self._worker_lost(ray, flight.worker, "crashed", "CUDA context lost", kill=True)
                return
            if item.phase == "instrument_stale":  # the instrument failed twice: a fresh process may not
                self._worker_lost(ray, flight.worker, INSTRUMENT, item.message, kill=True, stale=ref)
                return
            flight.phase, flight.current = item.phase, item.index
            if item.phase == "timing":
                flight.timing = item.indices
            flight.deadline = progress_deadline(
                item.phase, now, flight.deadline, self.options.point_timeout_s, item.estimate_s
            )
            return
        index = flight.index_of[(item.variant, item.config_key)]
        flight.done.add(index)
        if item.status == Status.CRASHED:  # the worker caught its own CUDA error; its context is gone
            point = flight.batch.points[index]
            self._retry_or_store(point, item, flight.worker)
            flight.current = None
            self._worker_lost(
                ray, flight.worker, "crashed", item.error.splitlines()[0], kill=True, culprit=point.label()
            )
            return
        self._store(flight.batch.points[index], item, flight.worker)

    def _finish_batch(self, ref) -> None:
        flight = self.inflight.pop(ref)
        self.workers[flight.worker].inflight -= 1
        missing = [p for i, p in enumerate(flight.batch.points) if i not in flight.done]
        if missing:  # the worker stopped early (it refused a batch once poisoned): run them again
            self._requeue(missing)

    def _task_failed(self, ref, exc) -> None:
        flight = self.inflight.pop(ref)
        self.workers[flight.worker].inflight -= 1
        message = str(exc.cause if getattr(exc, "cause", None) else exc).splitlines()[0][:500]
        for i, point in enumerate(flight.batch.points):
            if i not in flight.done:
                failure = failure_record(point, Status.LAUNCH_ERROR, f"worker error: {message}")
                self._retry_or_store(point, failure, flight.worker)

    # -- faults (the decisions are farm/faults.py's; here they are applied) ---------------------

    def _check_deadlines(self, ray) -> None:
        now = time.monotonic()
        for ref, flight in list(self.inflight.items()):
            if ref in self.inflight and flight.deadline and now > flight.deadline:
                label = flight.batch.points[flight.current].label() if flight.current is not None else "batch"
                self._worker_lost(ray, flight.worker, "timeout", f"no progress on {label}", kill=True)

    def _worker_lost(
        self, ray, wi: int, kind: str, detail: str, kill: bool = False, culprit: str = "", stale=None
    ) -> None:
        """Re-queue or settle every batch in flight on worker wi, then wait for Ray to restart it.
        kind INSTRUMENT: `stale` is the batch whose instrument failed twice; nobody is blamed."""
        w = self.workers[wi]
        suspect_label = culprit
        flights = {ref: flight for ref, flight in self.inflight.items() if flight.worker == wi}
        on_gpu = [flight for flight in flights.values() if flight.phase in GPU_PHASES]
        for ref, flight in flights.items():
            del self.inflight[ref]
            w.inflight -= 1
            gpu_elsewhere = any(other is not flight for other in on_gpu)
            if kind == INSTRUMENT:
                outcome = self.fault_policy.restarted(flight, stale=ref == stale)
            else:
                outcome = self.fault_policy.lost(flight, kind, detail, gpu_elsewhere)
            if outcome.innocent:
                self._requeue(outcome.innocent)
            if outcome.fresh:  # at the front: the first batch the fresh process times
                self._requeue(outcome.fresh, worker=wi)
            self._requeue(outcome.retry, single=True)
            for point, record in outcome.store:
                self._store(point, record, wi)
            if outcome.suspects:
                suspect_label = outcome.suspects[0].label()  # the one heard checked, before the one after it
        fault = Fault(kind, wi, suspect_label, time.monotonic(), old_pid=w.info.pid, detail=detail)
        self.faults.append(fault)
        log.warning("worker %d: %s (%s) %s", wi, kind, detail, suspect_label)
        if kill:
            ray.kill(w.actor, no_restart=False)
        w.fault = fault
        w.info_call = w.actor.info.remote()

    def _recovered(self, ray, ref) -> None:
        w = next(w for w in self.workers if w.info_call == ref)
        w.info_call = None
        try:
            info = ray.get(ref)
        except ray.exceptions.ActorUnavailableError:  # still restarting: ask again shortly
            info = None
        except ray.exceptions.RayError as exc:  # restarts used up, or its node is gone for good
            w.alive = False
            log.error("a worker did not come back: %s", str(exc).splitlines()[0])
            return
        if info is None or info.pid == w.fault.old_pid:  # the killed process answered before it went
            time.sleep(0.2)
            w.info_call = w.actor.info.remote()
            return
        w.info = info
        w.fault.recovery_s = time.monotonic() - w.fault.detected

    def _retry_or_store(self, point: Point, failure: MeasurementRecord, wi: int) -> None:
        if self.fault_policy.retry(point):
            self._requeue([point], single=True)
        else:
            self._store(point, failure, wi)

    def _requeue(self, points: list[Point], *, single: bool = False, worker: int | None = None) -> None:
        """Put points back at the front of the queue: as one batch, or one batch per point (to find
        out which of them kills its worker); `worker`: for that worker alone (its fresh process)."""
        for group in [[p] for p in points] if single else [points] if points else []:
            p = group[0]
            self.queue.appendleft(Batch(p.dtype, p.m, p.n, p.k, group, seed=self.spec.seed, worker=worker))

    # -- results -------------------------------------------------------------------------------

    def _store(self, point: Point, record: MeasurementRecord, wi: int | None) -> None:
        """Complete the record with where it ran, hand it to the sink, and let the policy see it."""
        record.code_version = self.versions[point.variant]
        w = self.workers[wi] if wi is not None else next(w for w in self.workers if w.env_id is not None)
        if not record.backend or not record.worker:
            record.backend = w.info.backend
            record.worker = record.worker or w.info.worker
            record.gpu_uuid = record.gpu_uuid or w.info.gpu_uuid
        self.sink.add(w.env_id, record, faults=len(self.faults))
        self.fault_policy.stored(point, record)
        if record.status == Status.OK and record.ms:
            self._note_best(point, record.ms)
        self.source.tell(point, record)

    def _refill(self) -> bool:
        """Queue what the point source can hand out now; False when it has nothing."""
        self.queue.extend(self.source.take())
        return bool(self.queue)


def _limits(environment) -> DeviceLimits:
    """The search's model of the workers' GPU: its SMs and L2 (the interpreter models NOMINAL_GPU's)."""
    if not environment.sm_count or not environment.l2_bytes:
        return NOMINAL_GPU
    return dataclasses.replace(NOMINAL_GPU, sm_count=environment.sm_count, l2_bytes=environment.l2_bytes)


_ABSENT = object()  # a point no run of this environment and code version holds


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def run_sweep(
    spec: GridSpec, options: SweepOptions, command: str, launched: cluster.Launched | None = None
) -> SweepResult:
    return Driver(spec, options, command).run(launched)
