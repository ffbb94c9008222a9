"""How one block of launches is timed on the GPU, and what NVML says about it (farm.timing decides
which blocks run when).

A block is back-to-back launches of one or more launchers, each behind an L2 flush, queued behind
a GPU sleep as long as the host needs to queue them, so host time stays out of the events.
Three times per launch:
- kernel time (`ms`, the main figure): the launcher's GPU kernel durations as CUPTI records them
  (torch.profiler; farm.cupti reads them), what Nsight and CUDA graphs see, summed where they run
  one after another and counted once where they overlap (a kernel launched dependent on the one
  before it, waiting);
- stream time: CUDA events around the launcher, idle gaps between its kernels included (a split
  launcher's zero, kernel and cast: 18.8 us of events against 12.5 us of kernels at
  128x128x32768 on an H200);
- host time of one launcher call, taken apart from the samples (`CudaClock.host_times`): a few
  calls outside the profiler session, with the worker's compiles held back (farm.quiet_host).
While each block is queued and runs: NVML's total-energy counter (the energy between the first
and the last update seen, farm.energy.EnergyPoller), and the SM clock and throttle reasons. Inside a
metered span (`CudaClock.metered`) a block is one round of the span: the energy counter is read at
the span's two ends instead, and the clock sampled once while the block runs and once after it.
A point's energy window (`CudaClock.energy_window`) is blocks of one launcher, back to back for
farm.energy.ENERGY_WINDOW_S, under one poller: its energy, no timing samples.
Every call into torch.profiler here, and NVML's state reads (farm.gpu), raise farm.errors.InstrumentError
where they fail (farm.instrument), so that the worker never blames the kernels for the instrument.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from db.physics import STREAM_SPREAD, lost_kernels
from farm.cupti import LAUNCH_LABEL, activities, kernel_ms_per_launch
from farm.energy import EnergyPoller, span_joules
from farm.errors import InstrumentError
from farm.gpu import GpuState
from farm.instrument import PROFILER, Around, calling
from farm.quiet_host import QuietHost

Launch = Callable[[], torch.Tensor]

# L2 flush: writing 2x the L2 evicts it; at least 256 MiB, as triton.testing.do_bench does.
MIN_FLUSH_BYTES = 256 * 2**20
# torch.cuda._sleep spins this many cycles per microsecond at about 1.4-2 GHz; the estimate only
# has to be long enough, not exact.
SLEEP_CYCLES_PER_US = 2000
MAX_SLEEP_US = 50_000
# Host time per launch besides the launcher itself: the flush's zero_ and two event records.
ENQUEUE_OVERHEAD_US = 20
# Under torch.profiler every CUDA call also records an event: queue slower, sleep longer.
PROFILED_HOST_FACTOR = 3.0
# A profiler session that lost the GPU activities of more than this share of its launches is not read:
# the worker times its batch again (farm.errors.InstrumentError). A lost launch used to keep its stream
# time: in one resumed H100 sweep every cuBLAS launch of eight shapes and all eight grouped configs of
# 64x4096x4096 read their stream time (ms == stream_ms, 2-3 us of launch gaps over a 20 us kernel), the
# symptom of sessions whose profile lost their kernels; no other run of the shipped databases lost one.
MAX_LOST_SHARE = 0.05
# Throttle-reason bits of the power limiter (nvml.h: SW power cap 0x4, HW power brake 0x80).
POWER_CAP_BITS = 0x4 | 0x80
# Host poll period while a block runs, to sample the SM clock through NVML (tens of us a read).
POLL_S = 0.002
# A point's host-time block (`CudaClock.host_times`): at most 30 calls, at least 3, within 20 ms of GPU
# work. The median is the point's host time; a call long enough that only a few fit
# is one whose GPU time an eager caller waits for, not its host time (a 13 ms 16384^3 call: 3 calls).
HOST_LAUNCHES = 30
MIN_HOST_LAUNCHES = 3
HOST_BLOCK_S = 0.02


class Meter:
    """NVML readings a clock takes around blocks; farm.gpu.Gpu implements them. This one reads
    nothing (CPU, or no NVML)."""

    def state(self) -> GpuState:
        return GpuState()

    def energy_mj(self) -> int | None:
        return None

    def power_limit_w(self) -> float | None:
        return None


# -- one block of launches -----------------------------------------------------------------------


@dataclass
class Readings:
    """NVML over one block: wall seconds, energy, mean SM clock of the samples taken while it ran."""

    seconds: float
    joules: float | None = None
    sm_clock_mhz: float | None = None
    power_limit_w: float | None = None
    state: GpuState = field(default_factory=GpuState)
    # the seconds `joules` covers: between two updates of the energy counter inside the block
    # (farm.energy.EnergyUpdates); None: the whole block (a metered span, read at its two ends)
    energy_s: float | None = None

    @property
    def metered_s(self) -> float:
        """Seconds of GPU work the energy reading covers."""
        return self.seconds if self.energy_s is None else self.energy_s

    @property
    def watts(self) -> float | None:
        seconds = self.metered_s
        return self.joules / seconds if self.joules is not None and seconds > 0 else None

    def at_power_limit(self, headroom: float) -> bool:
        """The power limiter held the clock, or the block drew `headroom` of the power allowed."""
        if self.state.throttle_mask & POWER_CAP_BITS:
            return True
        return bool(self.watts and self.power_limit_w and self.watts >= headroom * self.power_limit_w)


@dataclass
class Block:
    """Per launch of a block: kernel, stream and host milliseconds; and the block's readings."""

    kernel_ms: list[float | None]  # None: a launch whose GPU activity the profile lost
    stream_ms: list[float]
    host_ms: list[float]
    readings: Readings


def head_start_us(host_s: Sequence[float], factor: float = 1.0, gpu_s: float = 0.0) -> float:
    """GPU sleep that lets the host queue each launch before the GPU reaches it.

    Launch j is queued after the host's first j+1 calls and reached by the GPU after the sleep
    and j launches of gpu_s each (0: unknown, the whole queueing time). A block of a 1 ms kernel
    with 60 us of host time per launch then sleeps 0.2 ms, not 9 ms: the sleep is idle GPU,
    which would let the power limiter relax inside a block meant to hold it steady.
    """
    queued_us, ahead_us = 0.0, 0.0
    for j, h in enumerate(host_s):
        queued_us += factor * (1e6 * h + ENQUEUE_OVERHEAD_US)
        ahead_us = max(ahead_us, queued_us - j * 1e6 * gpu_s)
    return min(MAX_SLEEP_US, 1.5 * ahead_us + 100)


def max_block_launches(host_s: float, factor: float = 1.0, gpu_s: float = 0.0) -> int:
    """Launches of one launcher that the longest head start covers (10,000 if the GPU is the slower)."""
    host_us = factor * (1e6 * host_s + ENQUEUE_OVERHEAD_US)
    gain_us = host_us - 1e6 * gpu_s  # how much further the host falls behind per launch
    if gain_us <= 0:
        return 10_000
    return max(1, min(10_000, int(((MAX_SLEEP_US - 100) / 1.5 - host_us) / gain_us) + 1))


class CudaClock:
    """Cold-L2 GPU timing: blocks of launches, each behind a flush, queued behind a sleep."""

    def __init__(
        self, device: torch.device, l2_bytes: int, meter: Meter | None = None, quiet: QuietHost | None = None
    ):
        self.device = device
        self.meter = meter or Meter()
        self.quiet = quiet or QuietHost()  # the worker's compiles wait while host times are taken
        nbytes = max(MIN_FLUSH_BYTES, 2 * l2_bytes)
        self.flush_buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=device)
        self.flush_ms = self._time_flush()
        self._pending: list[tuple[Block, int]] | None = None  # profiled blocks of the open session
        self._labels = 0
        self._profiler = None  # the open session's torch.profiler.profile
        self._in_span = False  # inside `metered`: blocks read no energy of their own
        # The first profiler session of a process starts CUPTI (up to a second): do it now, not
        # between a config's settling and its measured block, where the GPU would idle through it.
        with self.profiled():
            self.flush_buffer.zero_()

    def _time_flush(self, n: int = 5) -> float:
        """GPU time of one flush (about 0.07 ms for 256 MiB on an H200), for sizing blocks in time."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.flush_buffer.zero_()
        start.record()
        for _ in range(n):
            self.flush_buffer.zero_()
        end.record()
        torch.cuda.synchronize(self.device)
        return start.elapsed_time(end) / n

    @contextlib.contextmanager
    def profiled(self):
        """One torch.profiler session over every profiled block run inside it; their kernel times
        are stream times until it closes, then CUPTI's. Starting and stopping the profiler costs
        host time while the GPU idles: a session keeps that out of the rounds of a regime."""
        if self._pending is not None:  # already in a session
            yield
            return
        from torch.profiler import ProfilerActivity, profile

        self._pending, self._labels = [], 0
        try:
            # The profiler's start, stop and results are the instrument's (farm.instrument); the blocks
            # inside are the kernels'. Their last errors surface at a sync before the stop, as theirs.
            with calling(PROFILER):
                session = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            try:
                with Around(PROFILER, session) as prof:
                    self._profiler = prof
                    yield
                    torch.cuda.synchronize(self.device)
            except BaseException:
                _reset_profiler()
                raise
            with calling(PROFILER):
                events = activities(prof)
            kernel = kernel_ms_per_launch(events, self._labels)
            # On a CPU (the tests' clock) no launch has GPU activity to read: its stream time stands in.
            on_gpu = self.device.type == "cuda"
            if on_gpu:
                stream = [ms for block, _ in self._pending for ms in block.stream_ms]
                kernel = [
                    None if ms is not None and lost_kernels(ms, s) else ms for ms, s in zip(kernel, stream)
                ]
            lost = sum(ms is None for ms in kernel)
            if on_gpu and lost > MAX_LOST_SHARE * len(kernel):
                raise InstrumentError(
                    PROFILER,
                    f"the profile lost the GPU work of {lost} of the session's {len(kernel)} launches "
                    f"(no activity, or under 1/{STREAM_SPREAD:g} of their stream time)",
                )
            for block, base in self._pending:
                for j in range(len(block.kernel_ms)):
                    # a launch the profiler lost is no sample (None), never its stream time
                    ms = kernel[base + j]
                    block.kernel_ms[j] = ms if ms is not None or on_gpu else block.stream_ms[j]
        finally:
            self._pending, self._profiler = None, None

    @contextlib.contextmanager
    def _unrecorded(self):
        """Pause the open session's collection: settling sub-blocks inside a session run as if
        unprofiled (no per-call overhead, nothing recorded). Recording them would be costly:
        the profiler's events() takes about 50 us per event (2-core VM), and a 20 ms sub-block of
        a 10 us kernel records some 1,000. Yields the host factor the blocks run at."""
        toggle = getattr(self._profiler, "toggle_collection_dynamic", None)
        if toggle is None:  # torch without dynamic toggling: record them, queue at profiled speed
            yield PROFILED_HOST_FACTOR
            return
        # CPU, CUDA and XPU together: torch 2.x logs a warning on every toggle of any other set
        activities = [a for a in ("CPU", "CUDA", "XPU") if hasattr(torch.profiler.ProfilerActivity, a)]
        activities = [getattr(torch.profiler.ProfilerActivity, a) for a in activities]
        with calling(PROFILER):
            toggle(False, activities)
        try:
            yield 1.0
        except BaseException:  # the blocks' error, not a toggle's that may follow it
            with contextlib.suppress(Exception):
                toggle(True, activities)
            raise
        with calling(PROFILER):
            toggle(True, activities)

    @contextlib.contextmanager
    def metered(self):
        """One energy reading over a span of blocks: NVML's energy counter and power limit read
        once at each end; the blocks run inside it read neither, and sample the SM clock once
        while they run and once after (`_run`). Yields the span's Readings, filled when it closes.

        Why: a round of the interleaved regime is tens of launches of 20 us - 1 ms kernels, and a
        block's own readings cost it about 10 ms besides its GPU work when it read the counter at
        its two ends (3.2-4.4 ms a read; other NVML reads 0.01-0.04 ms) and up to 2 ms of polling
        step (H200). And the counter moves in steps of about 100 ms (docs/design.md, "Energy"), too
        coarse for a round: 44 of 136 blocks of 20 ms and less read 0 J in one sweep
        (farm.energy.span_joules)."""
        span = Readings(0.0)
        self._in_span = True
        energy0, t0 = self.meter.energy_mj(), time.perf_counter()
        try:
            yield span
        finally:
            span.seconds = time.perf_counter() - t0
            span.joules = span_joules(energy0, self.meter.energy_mj())
            span.power_limit_w = self.meter.power_limit_w()
            self._in_span = False

    def run(
        self, launches: Sequence[Launch], host_s: Sequence[float], *, profile: bool, gpu_s: float = 0.0
    ) -> Block:
        """Time `launches` back to back; gpu_s: GPU seconds per launch if known (a shorter head start)."""
        if not profile:
            if self._pending is None:
                return self._run(launches, host_s, 1.0, gpu_s, label_base=None)
            with self._unrecorded() as factor:
                return self._run(launches, host_s, factor, gpu_s, label_base=None)
        if self._pending is None:
            with self.profiled():
                return self.run(launches, host_s, profile=True, gpu_s=gpu_s)
        block = self._run(launches, host_s, PROFILED_HOST_FACTOR, gpu_s, label_base=self._labels)
        self._pending.append((block, self._labels))
        self._labels += len(launches)
        return block

    def energy_window(self, launch: Launch, host_s: float, seconds: float, gpu_s: float = 0.0) -> Readings:
        """NVML's energy over back-to-back launches of one launcher for at least `seconds` of wall
        time: unprofiled blocks, each behind its head start, under one EnergyPoller (the energy
        between the first and the last counter update seen, over the time between them). Its
        launches are no timing samples; it exists because a block of a config's samples is too
        short for the counter's ~100 ms steps, or shared with other configs
        (farm.energy.ENERGY_WINDOW_S). A window's joules are None where the counter showed fewer than
        farm.energy.MIN_ENERGY_UPDATES; on a GPU without the counter (NVML missing, or older than
        Volta) it runs nothing."""
        if self.meter.energy_mj() is None:
            return Readings(0.0)
        most = max_block_launches(host_s, 1.0, gpu_s)
        clock_s, mhz_s, state = 0.0, 0.0, None  # seconds with a clock reading, MHz x seconds
        paused = self._unrecorded() if self._pending is not None else contextlib.nullcontext(1.0)
        with paused as factor, EnergyPoller(self.meter) as energy:
            t0 = time.perf_counter()
            while (left_s := seconds - (time.perf_counter() - t0)) > 0:
                n = min(most, math.ceil(left_s / gpu_s)) if gpu_s > 0 else most
                block = self._run(
                    [launch] * n, [host_s] * n, factor, gpu_s, label_base=None, poll_energy=False
                )
                r = block.readings
                if r.sm_clock_mhz is not None:
                    clock_s, mhz_s = clock_s + r.seconds, mhz_s + r.seconds * r.sm_clock_mhz
                state = r.state if state is None else state.merge(r.state)
            seconds = time.perf_counter() - t0
            joules, energy_s = energy.stop() or (None, None)
        return Readings(
            seconds,
            joules,
            mhz_s / clock_s if clock_s > 0 else None,
            self.meter.power_limit_w(),
            state or GpuState(),
            energy_s,
        )

    def host_times(self, launch: Launch, n: int = HOST_LAUNCHES) -> list[float]:
        """Host ms of each of `n` calls of one launcher, back to back, outside any profiler session, with
        no energy poller running and the worker's compiles held back (`QuietHost`): what an eager
        caller's host pays a call. Taken beside a compiling thread, cuBLAS at 1000^3 stored 29-30 us a
        call where do_bench's whole eager call in a fresh process took 11.2 (docs/design.md, "What an
        eager caller waits for")."""
        if self._pending is not None:
            raise RuntimeError("host_times runs outside the profiler session: its samples would be inflated")
        with self.quiet.quiet():
            torch.cuda.synchronize(self.device)
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                launch()
                times.append((time.perf_counter() - t0) * 1e3)
            torch.cuda.synchronize(self.device)
        return times

    def _run(
        self,
        launches,
        host_s,
        factor: float,
        gpu_s: float,
        *,
        label_base: int | None,
        poll_energy: bool = True,
    ) -> Block:
        """One block; `poll_energy`: poll NVML's energy counter while it runs (not inside a metered span,
        nor inside an energy window, which polls across its blocks)."""
        meter, in_span = self.meter, self._in_span
        # a launch that raises leaves the block: the poller stops with it, not at the next block
        with contextlib.nullcontext() if in_span or not poll_energy else EnergyPoller(meter) as energy:
            t0 = time.perf_counter()
            events, host_ms = self._queue(launches, host_s, factor, gpu_s, label_base)
            clocks, state = self._watch(events[-1][1], in_span)
            seconds = time.perf_counter() - t0
            joules, energy_s = (energy.stop() if energy is not None else None) or (None, None)
        end_state = meter.state()
        state = state.merge(end_state) if clocks else end_state
        if end_state.sm_clock_mhz is not None and not clocks:
            clocks.append(end_state.sm_clock_mhz)
        stream = [start.elapsed_time(end) for start, end in events]
        readings = Readings(
            seconds,
            joules,
            statistics.fmean(clocks) if clocks else None,
            None if in_span else meter.power_limit_w(),  # the span reads it once
            state,
            energy_s,
        )
        return Block(list(stream), stream, host_ms, readings)

    def _queue(self, launches, host_s, factor: float, gpu_s: float, label_base: int | None):
        """Queue the block behind its head start: (start, end) events and host ms per launch."""
        from torch.profiler import record_function

        torch.cuda._sleep(int(head_start_us(host_s, factor, gpu_s) * SLEEP_CYCLES_PER_US))
        events, host_ms = [], []
        for i, launch in enumerate(launches):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.flush_buffer.zero_()
            start.record()
            h0 = time.perf_counter()
            if label_base is not None:
                with Around(PROFILER, record_function(f"{LAUNCH_LABEL}{label_base + i}")):
                    launch()
            else:
                launch()
            host_ms.append((time.perf_counter() - h0) * 1e3)
            end.record()
            events.append((start, end))
        return events, host_ms

    def _watch(self, last, in_span: bool) -> tuple[list[float], GpuState]:
        """Sample the SM clock and throttle reasons until the block's `last` event, then sync."""
        clocks: list[float] = []
        state = GpuState()

        def sample() -> None:
            nonlocal state
            s = self.meter.state()
            state = state.merge(s) if clocks else s
            if s.sm_clock_mhz is not None:
                clocks.append(s.sm_clock_mhz)

        if in_span:
            # One sample while it runs: a round's clock only joins a mean over many rounds, and a
            # 2 ms polling step would lengthen a round of a few ms by up to 2 ms.
            sample()
        else:
            while not last.query():
                sample()
                time.sleep(POLL_S)
        torch.cuda.synchronize(self.device)
        return clocks, state


def _reset_profiler() -> None:
    """Leave no profiler running after one failed to start or stop, so that the worker's next session
    (its one retry of the batch) can start: Kineto disables the profiler before it processes what it
    collected, but a failure before that would leave it on. Best effort: the retry says if it failed."""
    with contextlib.suppress(Exception):
        if torch._C._autograd._profiler_enabled():
            torch._C._autograd._disable_profiler()


class HostClock:
    """Interpreter backend: wall-clock time of each call on the CPU; kernel = stream = host time.
    No power limiter to wait for: the steady regime measures at once."""

    power_limited = False
    flush_ms = 0.0

    def profiled(self):
        return contextlib.nullcontext()

    def run(
        self, launches: Sequence[Launch], host_s: Sequence[float], *, profile: bool, gpu_s: float = 0.0
    ) -> Block:
        times = []
        t0 = time.perf_counter()
        for launch in launches:
            start = time.perf_counter()
            launch()
            times.append((time.perf_counter() - start) * 1e3)
        return Block(times, list(times), list(times), Readings(time.perf_counter() - t0))


def profiler_session(clock):
    """The clock's profiler session; a clock without one (fakes in tests) runs its blocks unprofiled."""
    profiled = getattr(clock, "profiled", None)
    return profiled() if profiled is not None else contextlib.nullcontext()


def metered_span(clock):
    """The clock's metered span; a clock without one (the interpreter's, fakes in tests) yields
    a span with no energy reading, and its blocks keep their own."""
    metered = getattr(clock, "metered", None)
    return metered() if metered is not None else contextlib.nullcontext(Readings(0.0))
