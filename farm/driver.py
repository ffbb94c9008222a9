"""The sweep driver: hands batches to the GPU workers in completion order, keeps every worker
busy with bounded work in flight, is the only writer of the database, and survives faults.

Faults (DESIGN "Faults"):
- A worker that dies (a CUDA error poisons its context, a segfault, SIGKILL, a lost node) is
  restarted by Ray. The point it was checking is the suspect: it is retried once, alone, then
  stored `crashed`. Points it was timing are retried one by one. Its other points go back to
  the queue untouched.
- A batch past its deadline (scaled from the phase's expected time, with a floor) gets its
  worker killed and restarted; the point it was checking is stored `timeout`.
- A config stored `crashed` or `timeout` is quarantined: its points on other shapes are stored
  with the same status without running, so one bad config cannot use up the restarts.
- Records are upserted as they arrive (one transaction per flush): a driver killed at any moment
  loses at most the last second of results, and a rerun skips what the database holds.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field

from tqdm import tqdm

from db.records import MeasurementRecord, Status
from farm.errors import UserError
from farm.measure import TimingPolicy
from farm.plan import Batch, Point, code_versions, expand, make_batches, pending
from farm.plugins import load_plugin
from farm.spec import GridSpec, spec_as_dict
from farm.worker import GpuWorker, Progress, WorkerInfo

log = logging.getLogger("farm")

FLUSH_EVERY_S = 1.0
# With work queued and every worker restarting (a lost node, a GPU reset), wait this long for one.
RECOVERY_WAIT_S = 600.0
FINAL = (Status.CRASHED, Status.TIMEOUT)


@dataclass
class SweepOptions:
    db: str
    plugins: list[str] = field(default_factory=list)
    address: str | None = None
    backend: str = "auto"
    workers: int | None = None  # local run without a GPU: number of logical GPUs (workers)
    point_timeout_s: float = 60.0  # the floor of every deadline
    compile_threads: int = 8
    inflight_per_worker: int = 2
    max_restarts: int = 20
    retry_failed: bool = False
    progress: bool = True


@dataclass
class Fault:
    kind: str  # "crashed" | "timeout" | "worker lost"
    worker: int
    point: str
    detected: float
    old_pid: int | None = None  # the process that failed; the restarted worker has another
    recovery_s: float | None = None


@dataclass
class _Worker:
    actor: object
    info: WorkerInfo | None = None
    env_id: int | None = None
    alive: bool = True
    recovering: object = None  # ObjectRef of the info() call that says it is back
    fault: Fault | None = None
    inflight: int = 0


@dataclass
class _InFlight:
    batch: Batch
    worker: int
    index_of: dict
    done: set = field(default_factory=set)
    phase: str = "compile"
    current: int | None = None
    timing: tuple = ()
    deadline: float = 0.0


@dataclass
class SweepResult:
    sweep_id: int | None
    skipped: int  # points the database already held
    counts: collections.Counter
    failures: list[MeasurementRecord]
    faults: list[Fault]
    seconds: float
    status: str

    @property
    def measured(self) -> int:
        return sum(self.counts.values())


class Driver:
    def __init__(self, spec: GridSpec, options: SweepOptions, command: str):
        self.spec, self.options, self.command = spec, options, command
        self.policy = TimingPolicy(
            spec.timing.min_reps,
            spec.timing.max_reps,
            spec.timing.target_ci,
            spec.timing.max_seconds_per_point,
        )
        self.repeats = spec.timing.nondeterminism_repeats
        self.queue: collections.deque[Batch] = collections.deque()
        self.inflight: dict[object, _InFlight] = {}
        self.workers: list[_Worker] = []
        self.buffer: list[tuple[int, MeasurementRecord]] = []
        self.counts: collections.Counter = collections.Counter()
        self.failures: list[MeasurementRecord] = []
        self.faults: list[Fault] = []
        self.attempts: collections.Counter = collections.Counter()
        self.quarantine: dict[tuple, MeasurementRecord] = {}
        self.last_flush = time.monotonic()
        self.versions: dict[str, str] = {}
        self.started_ray = False
        self.started = time.monotonic()

    # -- set-up --------------------------------------------------------------------------------

    def run(self) -> SweepResult:
        import ray

        from db.engine import make_engine
        from db.queries import done_keys
        from db.schema import ensure_current
        from db.writes import environment_id, finish_sweep, start_sweep

        plugin_sources = [load_plugin(path) for path in self.options.plugins]
        expand(self.spec)  # validates variants before anything is started or written
        self.engine = make_engine(self.options.db)
        ensure_current(self.engine, create=True)
        self._start_ray(ray)
        self._start_workers(ray, plugin_sources)
        with self._session() as session:
            for w in self.workers:
                w.env_id = environment_id(session, w.info.environment)
            session.commit()
        smem = min(w.info.smem_limit for w in self.workers)
        points, _ = expand(self.spec, smem_limit=smem)
        self.versions = code_versions(self.spec.variants)
        env_ids = {w.env_id for w in self.workers}
        statuses = (Status.OK, Status.WRONG) if self.options.retry_failed else None
        with self.engine.connect() as conn:
            done = done_keys(conn, env_ids, statuses=statuses)
        todo = pending(points, self.versions, done)
        self.queue.extend(make_batches(todo, self.spec.seed))
        with self._session() as session:
            self.sweep_id = start_sweep(
                session,
                name=self.spec.name,
                spec=spec_as_dict(self.spec),
                command=self.command,
                n_points=len(todo),
            )
            session.commit()
        start = self.started = time.monotonic()
        status = "finished"
        self.bar = tqdm(
            total=len(todo),
            unit="pt",
            disable=not self.options.progress,
            dynamic_ncols=True,
            desc=self.spec.name,
            file=sys.stderr,
        )
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self._loop(ray)
            if self.queue:
                status = "failed"
        except KeyboardInterrupt:
            status = "interrupted"
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.bar.close()
            self._stop_workers(ray)
            self._flush(force=True)
            with self._session() as session:
                finish_sweep(
                    session,
                    self.sweep_id,
                    status=status,
                    n_ok=self.counts[Status.OK],
                    n_failed=sum(v for k, v in self.counts.items() if k != Status.OK),
                )
                session.commit()
            if self.started_ray:
                ray.shutdown()
        return SweepResult(
            self.sweep_id,
            len(points) - len(todo),
            self.counts,
            self.failures,
            self.faults,
            time.monotonic() - start,
            status,
        )

    def _session(self):
        from sqlalchemy.orm import Session

        return Session(self.engine)

    def _start_ray(self, ray) -> None:
        if ray.is_initialized():
            return
        quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
        if self.options.address or os.environ.get("RAY_ADDRESS"):
            ray.init(address=self.options.address, **quiet)
        else:
            import torch

            gpus = torch.cuda.device_count()
            ray.init(num_gpus=gpus or self.options.workers or 2, include_dashboard=False, **quiet)
        self.started_ray = True

    def _start_workers(self, ray, plugin_sources) -> None:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        count = min(gpus, self.options.workers) if self.options.workers else gpus
        if count < 1:
            raise UserError(
                "the Ray cluster has no GPUs; on a machine without one, run locally (no --address)"
            )
        actor_class = ray.remote(GpuWorker).options(
            num_gpus=1,
            num_cpus=0,
            max_restarts=self.options.max_restarts,
            max_task_retries=0,
            max_concurrency=self.options.inflight_per_worker,
        )
        for _ in range(count):
            actor = actor_class.remote(plugin_sources, self.options.backend, self.options.compile_threads)
            self.workers.append(_Worker(actor))
        infos = ray.get([w.actor.info.remote() for w in self.workers], timeout=600)
        for w, info in zip(self.workers, infos):
            w.info = info
        log.info("workers: %s", ", ".join(f"{i.worker} ({i.environment.gpu_name})" for i in infos))

    def _stop_workers(self, ray) -> None:
        for w in self.workers:
            ray.kill(w.actor, no_restart=True)

    # -- the loop ------------------------------------------------------------------------------

    def _loop(self, ray) -> None:
        """Until every point is stored. Workers still restarting at the end (their node is gone and
        no GPU is free for them) are not waited for; with work left and no worker alive, the
        sweep ends `failed` after RECOVERY_WAIT_S."""
        stalled_since = None
        while self.queue or self.inflight:
            self._dispatch()
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
            waitables = list(self.inflight) + [w.recovering for w in self.workers if w.recovering]
            ready, _ = ray.wait(waitables, num_returns=1, timeout=self._wait_timeout())
            for ref in ready:
                if ref in self.inflight:
                    self._advance(ray, ref)
                else:
                    self._recovered(ray, ref)
            self._check_deadlines(ray)
            self._flush()

    def _wait_timeout(self) -> float:
        deadlines = [f.deadline for f in self.inflight.values() if f.deadline]
        until = min(deadlines, default=time.monotonic() + FLUSH_EVERY_S) - time.monotonic()
        return max(0.05, min(FLUSH_EVERY_S, until))

    def _dispatch(self) -> None:
        """Give the next batch to the least busy worker until every worker has its share in flight."""
        while self.queue:
            ready = [
                wi
                for wi, w in enumerate(self.workers)
                if w.alive and not w.recovering and w.inflight < self.options.inflight_per_worker
            ]
            if not ready:
                return
            wi = min(ready, key=lambda i: self.workers[i].inflight)
            w = self.workers[wi]
            batch = self._without_quarantined(self.queue.popleft())
            if batch.points:
                gen = w.actor.run_batch.remote(batch, self.policy, self.repeats)
                index_of = {(p.variant, p.config.key): i for i, p in enumerate(batch.points)}
                deadline = time.monotonic() + self._compile_allowance(batch)
                self.inflight[gen] = _InFlight(batch, wi, index_of, deadline=deadline)
                w.inflight += 1

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
            self._worker_lost(ray, flight.worker, "worker lost", str(exc).splitlines()[0])
            return
        except ray.exceptions.RayTaskError as exc:  # the worker itself raised: a bug, retried once per point
            self._task_failed(ref, exc)
            return
        now = time.monotonic()
        if isinstance(item, Progress):
            if item.phase == "poisoned":  # a CUDA error while timing, or a batch that met a lost context
                self._worker_lost(ray, flight.worker, "crashed", "CUDA context lost", kill=True)
                return
            flight.phase, flight.current = item.phase, item.index
            if item.phase == "timing":
                flight.timing = item.indices
            if item.phase == "queued":  # waiting for the GPU behind the other batch: no deadline
                flight.deadline = 0.0
            else:
                scale = 10 if item.phase == "check" else 3
                flight.deadline = now + self.options.point_timeout_s + scale * item.estimate_s
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
                failure = self._failure_record(point, Status.LAUNCH_ERROR, f"worker error: {message}")
                self._retry_or_store(point, failure, flight.worker)

    # -- faults --------------------------------------------------------------------------------

    def _check_deadlines(self, ray) -> None:
        now = time.monotonic()
        for ref, flight in list(self.inflight.items()):
            if ref in self.inflight and flight.deadline and now > flight.deadline:
                label = flight.batch.points[flight.current].label() if flight.current is not None else "batch"
                self._worker_lost(ray, flight.worker, "timeout", f"no progress on {label}", kill=True)

    def _worker_lost(
        self, ray, wi: int, kind: str, detail: str, kill: bool = False, culprit: str = ""
    ) -> None:
        """Re-queue or settle every batch in flight on worker wi, then wait for Ray to restart it."""
        w = self.workers[wi]
        suspect_label = culprit
        for ref, flight in list(self.inflight.items()):
            if flight.worker != wi:
                continue
            del self.inflight[ref]
            w.inflight -= 1
            suspects = self._suspects(flight)
            innocent = [
                p for i, p in enumerate(flight.batch.points) if i not in flight.done and i not in suspects
            ]
            if innocent:
                self._requeue(innocent)
            for i in sorted(suspects):
                point = flight.batch.points[i]
                suspect_label = point.label()
                if kind == "timeout" and (flight.phase == "check" or len(flight.batch.points) == 1):
                    self._store(
                        point, self._failure_record(point, Status.TIMEOUT, f"timed out: {detail}"), wi
                    )
                    continue
                failure = self._failure_record(point, Status.CRASHED, f"{kind}: {detail}")
                self._retry_or_store(point, failure, wi)
        fault = Fault(kind, wi, suspect_label, time.monotonic(), old_pid=w.info.pid)
        self.faults.append(fault)
        log.warning("worker %d: %s (%s) %s", wi, kind, detail, suspect_label)
        if kill:
            ray.kill(w.actor, no_restart=False)
        w.fault = fault
        w.recovering = w.actor.info.remote()

    @staticmethod
    def _suspects(flight: _InFlight) -> set[int]:
        """The points that may have killed the worker: the one being checked, those being timed,
        or, while the batch was still compiling, all of it (a compiler crash, or a launcher that
        kills its process even when asked only to compile)."""
        unfinished = set(range(len(flight.batch.points))) - flight.done
        if flight.phase == "compile":
            return unfinished
        if flight.phase == "check" and flight.current is not None:
            return {flight.current}
        if flight.phase == "timing":
            return set(flight.timing) & unfinished
        return set()

    def _recovered(self, ray, ref) -> None:
        w = next(w for w in self.workers if w.recovering == ref)
        w.recovering = None
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
            w.recovering = w.actor.info.remote()
            return
        w.info = info
        w.fault.recovery_s = time.monotonic() - w.fault.detected

    def _attempt_key(self, point: Point) -> tuple:
        return point.key(self.versions[point.variant])

    def _retry_or_store(self, point: Point, failure: MeasurementRecord, wi: int) -> None:
        key = self._attempt_key(point)
        self.attempts[key] += 1
        if self.attempts[key] >= 2:
            self._store(point, failure, wi)
        else:
            self._requeue([point], single=True)

    def _requeue(self, points: list[Point], *, single: bool = False) -> None:
        """Put points back at the front of the queue: as one batch, or one batch per point (to find
        out which of them kills its worker)."""
        for group in [[p] for p in points] if single else [points]:
            p = group[0]
            self.queue.appendleft(Batch(p.dtype, p.m, p.n, p.k, group, seed=self.spec.seed))

    def _without_quarantined(self, batch: Batch) -> Batch:
        keep = []
        for point in batch.points:
            culprit = self.quarantine.get((point.variant, point.dtype, point.config.key))
            if culprit is None:
                keep.append(point)
                continue
            note = (
                f"quarantined: this config ended {culprit.status} on {culprit.m}x{culprit.n}x{culprit.k} "
                f"({culprit.error.splitlines()[0][:200]}); not run"
            )
            self._store(point, self._failure_record(point, culprit.status, note), None)
        batch.points = keep
        return batch

    @staticmethod
    def _failure_record(point: Point, status: str, error: str) -> MeasurementRecord:
        from farm.metrics import operand_bytes

        return point.record(
            status, error, operand_bytes=operand_bytes(point.m, point.n, point.k, point.dtype)
        )

    # -- results -------------------------------------------------------------------------------

    def _store(self, point: Point, record: MeasurementRecord, wi: int | None) -> None:
        record.code_version = self.versions[point.variant]
        w = self.workers[wi] if wi is not None else next(w for w in self.workers if w.env_id is not None)
        if not record.backend or not record.worker:
            record.backend = w.info.backend
            record.worker = record.worker or w.info.worker
            record.gpu_uuid = record.gpu_uuid or w.info.gpu_uuid
        self.buffer.append((w.env_id, record))
        self.counts[record.status] += 1
        if record.status != Status.OK:
            self.failures.append(record)
        if record.status in FINAL and not record.error.startswith("quarantined"):
            self.quarantine[(point.variant, point.dtype, point.config.key)] = record
        self.bar.update(1)
        failed = sum(v for k, v in self.counts.items() if k != Status.OK)
        elapsed = time.monotonic() - self.started
        per_min = f"{self.bar.n / elapsed * 60:.0f}/min" if elapsed > 0 else "-"
        self.bar.set_postfix(
            ok=self.counts[Status.OK], failed=failed, faults=len(self.faults), rate=per_min, refresh=False
        )

    def _flush(self, force: bool = False) -> None:
        if not self.buffer or (not force and time.monotonic() - self.last_flush < FLUSH_EVERY_S):
            return
        from db.writes import upsert_measurements

        by_env: dict[int, list[MeasurementRecord]] = collections.defaultdict(list)
        for env_id, record in self.buffer:
            by_env[env_id].append(record)
        with self._session() as session:
            for env_id, records in by_env.items():
                upsert_measurements(session, environment_id=env_id, sweep_id=self.sweep_id, records=records)
            session.commit()
        self.buffer.clear()
        self.last_flush = time.monotonic()


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def run_sweep(spec: GridSpec, options: SweepOptions, command: str) -> SweepResult:
    return Driver(spec, options, command).run()
