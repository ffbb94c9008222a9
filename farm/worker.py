"""`GpuWorker`: one Ray actor per GPU. It compiles ahead, checks, times, reads GPU state, and
streams plain records back; it never touches the database (the driver is the only writer).

`run_batch` is a generator (a Ray streaming generator): besides the records it yields progress
events (`Progress`), so the driver knows at every moment which point is running, and what to
blame and what to retry when the process dies or hangs. Two batches run at once (the actor is
threaded): one compiles on the CPU while the other holds the GPU.

Top-level imports stay free of `kernels` and Triton: the worker decides in `__init__` whether
this process runs CUDA or the interpreter, which must be fixed before any kernel is defined.
"""

from __future__ import annotations

import concurrent.futures
import os
import random
import sys
import threading
import traceback
import zlib
from dataclasses import dataclass, field

from db.records import Backend, MeasurementRecord, Status
from farm.errors import UserError
from farm.host_folders import private_folder

ERROR_CHARS = 2000
# How often a batch is timed while the instrument fails (farm.instrument) before its points are stored
# `instrument_error`: the profiler's failure on a fresh H100 (Kineto's internal assert, 95 of 359
# points) did not come back when the same command ran again, so a second try is worth its time; one
# that fails again stores them (--retry-failed measures them later) rather than hold the GPU. A batch
# not given a fresh process yet asks for one instead ("instrument_stale"): the shipped losses struck only
# a resumed sweep's oldest processes, never a fresh one, and the likeliest cause, CUPTI's kernel
# timestamps drifting in a long-lived process until Kineto drops them, is the process's own state
# (docs/design.md, "Instrument faults").
INSTRUMENT_TRIES = 2


@dataclass(frozen=True)
class Progress:
    """What a batch is doing now. `index` is the point being checked; `estimate_s` the phase's
    expected length, from which the driver sets its deadline."""

    phase: str  # "queued" | "warmup" | "check" | "timing" | "poisoned" | "instrument_stale"
    index: int | None = None
    estimate_s: float = 0.0
    indices: tuple[int, ...] = ()  # the points being timed
    message: str = ""  # "instrument_stale": the instrument's failure


@dataclass(frozen=True)
class WorkerInfo:
    environment: object  # db.records.EnvironmentInfo
    worker: str
    gpu_uuid: str
    backend: str
    smem_limit: int
    pid: int
    node_id: str


@dataclass
class _Slot:
    """One point's way through a batch."""

    point: object
    launch: object
    compiled: concurrent.futures.Future | None = None
    compile_s: float | None = None
    resources: object = None
    check: object = None
    record_fields: dict = field(default_factory=dict)


@dataclass(frozen=True)
class _Timing:
    """What every time_points request of one batch shares: its policy, seed, early cut and device."""

    policy: object  # farm.timing.policy.TimingPolicy
    seed: int
    cut_ms: float | None
    device: object  # torch.device
    fresh_process: bool = False  # farm.plan.Batch.fresh_process: an instrument's fault is stored here


def failure_status(exc: BaseException) -> str:
    """farm.compile.failure_status; imported late, as farm.compile imports Triton (see above)."""
    from farm.compile import failure_status as status_of

    return status_of(exc)


def host_triton_cache() -> str:
    """The Triton disk cache that every worker of this host and user shares: a kernel one worker
    compiled, the others load (farm/plan.py deals batches so that they can). Triton's default,
    ~/.triton/cache, may be one NFS home for many hosts; a local directory keeps its many small
    writes off the network. Triton loads compiled kernels from it, so a folder of that name that
    another user controls is refused (`private_folder`). A TRITON_CACHE_DIR set where the workers
    start wins."""
    return str(private_folder("farm-triton-cache"))


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text[:ERROR_CHARS]


class GpuWorker:
    def __init__(self, plugins: list, backend: str = "auto", compile_threads: int = 8, warmup_s: float = 2.0):
        # A UserError while starting (a shared folder another user controls, a plugin that fails to
        # import on this host) is raised again by info(), the driver's first call, which reports it as
        # it is; raised here, Ray would report a dead actor with the traceback folded into its message.
        self.startup_error: UserError | None = None
        try:
            self._start(plugins, backend, compile_threads, warmup_s)
        except UserError as exc:
            self.startup_error = exc

    def _start(self, plugins: list, backend: str, compile_threads: int, warmup_s: float) -> None:
        import torch

        if backend == "auto":
            backend = Backend.CUDA if torch.cuda.is_available() else Backend.INTERPRETER
        interpreted = os.environ.get("TRITON_INTERPRET") == "1"
        if backend == Backend.INTERPRETER and not interpreted:
            if "kernels" in sys.modules:
                raise RuntimeError("kernels were imported before the worker chose the interpreter backend")
            os.environ["TRITON_INTERPRET"] = "1"
        elif backend == Backend.CUDA and interpreted:
            raise RuntimeError("TRITON_INTERPRET=1 is set in a worker asked to run CUDA")

        if "TRITON_CACHE_DIR" not in os.environ:
            os.environ["TRITON_CACHE_DIR"] = host_triton_cache()
        from farm import compile as compile_ahead
        from farm.gpu import Gpu
        from farm.plugins import install_sources
        from farm.quiet_host import worker_quiet_host
        from kernels.interpreter import fix_bf16

        if backend == Backend.INTERPRETER:
            fix_bf16()
        else:
            compile_ahead.install()
        install_sources(plugins)
        self.backend = backend
        self.gpu = Gpu(backend)
        # The roofline's peaks every timing is checked against (db.physics); None under the
        # interpreter, whose times are CPU times.
        self.peaks: tuple[float, float] | None = self.gpu.peaks() if backend == Backend.CUDA else None
        self.compile_threads = compile_threads
        self.pool = concurrent.futures.ThreadPoolExecutor(compile_threads, thread_name_prefix="compile")
        self.gpu_lock = threading.Lock()
        # compiles wait while the clock takes host times (farm.quiet_host.SWITCH_ENV: a benchmark's switch)
        self.quiet = worker_quiet_host()
        self.warmup_s = warmup_s
        self.warm = False
        self.poisoned = False
        # The instrument failed twice in one batch: this process is to be restarted (farm.faults), and
        # no batch is timed in it meanwhile.
        self.stale = False
        self.clock = None

    def info(self) -> WorkerInfo:
        if self.startup_error is not None:
            raise self.startup_error
        import ray

        return WorkerInfo(
            self.gpu.environment(),
            self.gpu.worker_name(),
            self.gpu.uuid,
            self.backend,
            self.gpu.limits.smem_per_block,
            os.getpid(),
            ray.get_runtime_context().get_node_id(),
        )

    # -- one batch ---------------------------------------------------------------------------

    def run_batch(self, batch, policy, repeats: int):
        """Yield Progress events and one MeasurementRecord per point of `batch`. `policy`: a
        farm.timing.policy.TimingPolicy, or the spec's farm.spec.Timing (what the torch-free driver
        sends). The batch's `cut_ms` is its early cut (farm.timing.samples)."""
        import torch

        from farm import measure
        from farm.timing.policy import TimingPolicy
        from kernels import DTYPES, get_variant, reference_matmul

        if not isinstance(policy, TimingPolicy):
            policy = TimingPolicy.from_spec(policy)

        if self.poisoned:  # the driver restarts this worker and runs the batch elsewhere
            yield Progress("poisoned")
            return
        device, dtype = self.gpu.device, DTYPES[batch.dtype]
        # the same inputs for a shape in every process and every run (str hashes are salted per process)
        seed = zlib.crc32(f"{batch.seed}:{batch.dtype}:{batch.m}x{batch.n}x{batch.k}".encode())
        a, b = measure.make_inputs(batch.m, batch.n, batch.k, dtype, device, seed)
        slots = []
        for point in batch.points:
            launch = get_variant(point.variant).launch
            slots.append(_Slot(point, lambda launch=launch, cfg=point.config: launch(a, b, cfg)))
        side = torch.cuda.Stream(device) if device.type == "cuda" else None
        for slot in slots:
            slot.compiled = self.pool.submit(self._compile, slot, side)
        if not self.warm:
            # The first batch warms the GPU out of its idle clock while its kernels compile (the
            # compiler runs on the pool's threads; 20 configs took 24 s on an H200 from an empty
            # cache): the 2 s of warm-up leave the start-up instead of adding to it.
            with self.gpu_lock:
                if not self.warm:
                    yield Progress("warmup", estimate_s=self.warmup_s)
                    measure.warm_up(device, self.warmup_s)
                    self.warm = True
        # Compile every point before queueing for the GPU: until "queued", a worker that dies
        # may have died compiling this batch; after it, this batch is not to blame.
        concurrent.futures.wait([slot.compiled for slot in slots])
        yield Progress("queued")

        with self.gpu_lock:
            if self.poisoned:
                yield Progress("poisoned")
                return
            if self.stale:  # the driver restarts this process and runs the batch again, unblamed
                return
            reference = reference_matmul(a, b)
            ready = []
            for index, slot in enumerate(slots):
                failed = self._wait_compiled(slot)
                if failed:
                    yield failed
                    continue
                yield Progress("check", index, estimate_s=self._check_estimate(slot.point))
                outcome = self._check(slot, reference, dtype, repeats)
                if outcome is not None:
                    yield outcome
                    if self.poisoned:
                        return
                    continue
                ready.append(index)
            if not ready:
                return
            timing = _Timing(policy, seed, batch.cut_ms, device, batch.fresh_process)
            yield from self._time(timing, [slots[i] for i in ready], ready)

    # -- timing, the instrument's faults and physics -------------------------------------------

    def _time(self, timing: _Timing, slots: list, indices: list[int]):
        """Time `slots` (the batch's points `indices`) and yield their records. A point whose time
        physics forbids (db.physics) is timed again once, with the others that failed: ok if its
        second time passes, else stored `implausible` with both times' reasons and its second
        timing kept for inspection (never read as a time)."""
        from db.physics import implausibility

        timings = yield from self._timings(timing, slots, indices)
        if timings is None:
            return
        peaks = self.peaks

        def reason(slot, t) -> str:
            p = slot.point
            return "" if peaks is None else implausibility(p.m, p.n, p.k, p.dtype, t.ms, t.stream_ms, *peaks)

        first = [reason(slot, t) for slot, t in zip(slots, timings)]
        again = [j for j, why in enumerate(first) if why]
        for j, (slot, t) in enumerate(zip(slots, timings)):
            if not first[j]:
                yield self._record(slot, Status.OK, timing=t)
        if not again:
            return
        retimed = yield from self._timings(timing, [slots[j] for j in again], [indices[j] for j in again])
        if retimed is None:
            return
        for j, t in zip(again, retimed):
            why = reason(slots[j], t)
            if not why:
                yield self._record(slots[j], Status.OK, timing=t)
                continue
            error = f"{why}; timed again after: {first[j]}"
            yield self._record(slots[j], Status.IMPLAUSIBLE, error=error[:ERROR_CHARS], timing=t)

    def _timings(self, timing: _Timing, slots: list, indices: list[int]):
        """One time_points request over `slots`, yielding its Progress; returns their timings, or None
        where it yielded their final records instead (or the worker's poisoned context).

        An exception while timing: a lost CUDA context poisons the worker (the driver restarts it and
        blames the points timed); the instrument's (farm.instrument: the profiler, CUPTI, NVML) times
        the points again once, then, unless the batch was given its fresh process already, stops the
        batch with "instrument_stale" (the driver restarts the worker and requeues the points for the
        fresh process, unblamed), else stores them `instrument_error`; any other is the launchers',
        `launch_error` (farm.compile.failure_status)."""
        from farm import measure
        from farm.instrument import instrument_fault
        from farm.timing import estimate_seconds, time_points
        from farm.timing.request import TimingRequest

        estimate = sum(estimate_seconds(timing.policy, s.check.host_s) for s in slots)
        faults = []
        while True:
            yield Progress("timing", estimate_s=estimate, indices=tuple(indices))
            try:
                if timing.device.type == "cuda" and self._clock_is_low(self.gpu.state()):
                    measure.warm_up(timing.device, 0.3)
                return time_points(
                    TimingRequest(
                        [s.launch for s in slots],
                        [s.check.host_s for s in slots],
                        self._clock(timing.device),
                        timing.policy,
                        random.Random(timing.seed),
                        timing.cut_ms,
                    )
                )
            except Exception as exc:  # a point that passed its check failed while timed, or the instrument
                if not self._context_ok():
                    self.poisoned = True
                    yield Progress("poisoned", indices=tuple(indices))
                    return None
                fault = instrument_fault(exc)
                if fault is None:
                    for slot in slots:
                        yield self._record(slot, failure_status(exc), error=_error_text(exc))
                    return None
                faults.append(fault)
                if len(faults) == INSTRUMENT_TRIES and not timing.fresh_process:
                    self.stale = True
                    yield Progress(
                        "instrument_stale", indices=tuple(indices), message=str(fault)[:ERROR_CHARS]
                    )
                    return None
                if len(faults) == INSTRUMENT_TRIES:
                    # the instrument's own words first: the line the summary and the failed list show
                    said = f"the instrument failed on each of {len(faults)} tries; not the kernel's fault"
                    error = f"{str(fault)[: ERROR_CHARS - len(said) - 1]}\n{said}"
                    for slot in slots:
                        yield self._record(slot, Status.INSTRUMENT_ERROR, error=error)
                    return None

    # -- steps ---------------------------------------------------------------------------------

    def _compile(self, slot, side_stream):
        import torch

        from farm.compile import compile_launcher
        from kernels import get_variant

        if self.backend == Backend.INTERPRETER or get_variant(slot.point.variant).baseline:
            return None  # nothing to compile (a library baseline would run instead)
        if side_stream is None:
            return compile_launcher(slot.launch)
        with self.quiet.compiling(), torch.cuda.stream(side_stream):  # not while host times are taken
            return compile_launcher(slot.launch)

    def _wait_compiled(self, slot) -> MeasurementRecord | None:
        try:
            compiled = slot.compiled.result()
        except Exception as exc:  # the compiler, or the launcher's own code run to compile ahead
            return self._record(slot, failure_status(exc), error=_error_text(exc) + "\n" + _last_frames(exc))
        if compiled is not None:
            slot.compile_s, slot.resources = compiled.seconds, compiled.resources
        return None

    def _check_estimate(self, point) -> float:
        # fp64 reference is computed already; a check is a few launches of the kernel
        return 4 * point.flops / 50e12

    def _check(self, slot, reference, dtype, repeats) -> MeasurementRecord | None:
        """None if the point is fit to time; otherwise its final record."""
        from farm import measure
        from kernels import get_variant

        point = slot.point
        try:
            slot.check = measure.check(
                slot.launch,
                reference,
                dtype,
                point.k,
                point.config.input_precision,
                device=self.gpu.device,
                m=point.m,
                n=point.n,
                split_k=point.config.split_k,
                repeats=repeats if get_variant(point.variant).atomic else 1,
            )
        except Exception as exc:
            if not self._context_ok():
                self.poisoned = True
                return self._record(slot, Status.CRASHED, error="CUDA context lost: " + _error_text(exc))
            return self._record(slot, failure_status(exc), error=_error_text(exc) + "\n" + _last_frames(exc))
        if not slot.check.ok:
            check = slot.check
            beyond = ">" if check.rel_err > check.tolerance else "<="
            error = f"rel_err {check.rel_err:.3g} {beyond} tolerance {check.tolerance:.3g}"
            if check.scratch_left:
                error += "; its launches left the kept split-K scratch not zeroed (zeroed for the next point)"
            return self._record(slot, Status.WRONG, error=error)
        return None

    def _context_ok(self) -> bool:
        import torch

        if self.gpu.device.type != "cuda":
            return True
        try:
            torch.cuda.synchronize(self.gpu.device)
            return torch.ones(1, device=self.gpu.device).add_(1).item() == 2.0
        except Exception:
            return False

    def _clock(self, device):
        from farm.clock import CudaClock, HostClock

        if self.clock is None:
            self.clock = (
                CudaClock(device, self.gpu.limits.l2_bytes, meter=self.gpu, quiet=self.quiet)
                if device.type == "cuda"
                else HostClock()
            )
        return self.clock

    def _clock_is_low(self, state) -> bool:
        top = self.gpu.max_sm_clock()
        return bool(top and state.sm_clock_mhz and state.sm_clock_mhz < 0.8 * top)

    def _record(self, slot, status: str, *, error: str = "", timing=None) -> MeasurementRecord:
        """The point's row; `timing`: its farm.timing.samples.PointTiming, None where it was not timed."""
        from farm.metrics import derived

        p, check = slot.point, slot.check
        fields = derived(
            p.m, p.n, p.k, p.dtype, p.config, self.gpu.limits, slot.resources, timing.ms if timing else None
        )
        return p.record(
            status,
            error,
            rel_err=check.rel_err if check else None,
            nondeterminism=check.nondeterminism if check else None,
            compile_s=slot.compile_s,
            worker=self.gpu.worker_name(),
            gpu_uuid=self.gpu.uuid,
            backend=self.backend,
            **(timing.columns() if timing else {}),
            **fields,
        )


def _last_frames(exc: BaseException, limit: int = 3) -> str:
    return "".join(traceback.format_exception(exc, limit=-limit))[-ERROR_CHARS:]
