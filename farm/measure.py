"""The measurement protocol (DESIGN "Measuring one point"), as functions of tensors: no Ray here.

1. Inputs: seeded random normal data on the device, never zeros.
2. Poisoning: before a checked run, the memory the caching allocator hands out next is filled
   with NaN (allocate, fill, free), so an unwritten tile or an unzeroed split-K output shows up.
   Measured on an H200: a grid missing its last tile row left exactly those 44 rows NaN.
3. Accuracy against the fp64 reference (kernels.accuracy); atomic variants run again to record
   nondeterminism (max |c1 - c2|).
4. Timing, in one of three named regimes (stored on every row as `timing_regime`):
   - "steady" (default): each config in its own steady state under the power limit, which is
     what do_bench and Triton's autotuner see. A config runs in blocks of back-to-back launches,
     each behind an L2 flush. Settling sub-blocks run until NVML says the clock has settled: at
     once where the GPU is below its power limit, else until the mean SM clock of two successive
     sub-blocks agrees after at least min_settle_s (`settled`). Then one profiled block gives the
     samples. The configs of a batch take their blocks in a fresh random order each pass, so slow
     drift is spread.
     Why: on an H200 at 16384^3, interleaving every config launch by launch shared one power
     limiter state between them and shrank the group_m 8 gain from 1.13-1.17 (do_bench) to
     1.01-1.05; blocks of 20 back-to-back launches (260 ms) gave 1.14-1.17. At 8192 even 32 ms
     blocks stayed at 0.98-1.05 against 1.05-1.09: what counts is time on the limiter's scale
     (hundreds of ms), not a launch count. The GPU drew 684-692 W against its 700 W limit.
   - "interleaved": rounds that launch every unfinished config once in random order (the farm's
     protocol before; the power state is shared, ratios shrink where the limiter acts). One
     profiler session spans the rounds, so profiling adds no idle gaps between them.
   - "rest": single launches, each after the GPU rested `rest_s` (boost clock, cold limiter).
   A point stops once the 95% confidence interval of its median kernel time is within
   +-target_ci (after min_reps), at max_reps, or once it has used its time cap.
5. Three times per launch. `ms` (the main figure) is kernel time: the sum of the launcher's GPU
   kernel durations as CUPTI records them (torch.profiler), what Nsight and CUDA graphs see.
   `stream_ms`: CUDA events around the launcher, idle gaps between its kernels included (a split
   launcher's zero, kernel and cast: 18.8 us of events against 12.5 us of kernels at
   128x128x32768 on an H200). `host_ms`: host time of one launcher call. Blocks are queued behind
   a GPU sleep as long as the host needs to queue them, so host time stays out of the events.
6. Energy: NVML's total-energy counter around each block. avg_watts = joules / seconds over the
   point's blocks; joules_per_launch = avg_watts x kernel time (the block's mean power charged
   to the launcher's kernels; the flush and the head-start sleep are not the launcher's work).
"""

from __future__ import annotations

import bisect
import contextlib
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from farm.gpu import GpuState
from kernels import check_accuracy

Launch = Callable[[], torch.Tensor]

REGIMES = ("steady", "interleaved", "rest")

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
# Throttle-reason bits of the power limiter (nvml.h: SW power cap 0x4, HW power brake 0x80).
POWER_CAP_BITS = 0x4 | 0x80
# record_function label of one launcher call in a profiled block: farm_launch_<index>.
LAUNCH_LABEL = "farm_launch_"
# Host poll period while a block runs, to sample the SM clock through NVML (tens of us a read).
POLL_S = 0.002


class Meter:
    """NVML readings a clock takes around blocks; farm.gpu.Gpu implements them. This one reads
    nothing (CPU, or no NVML)."""

    def state(self) -> GpuState:
        return GpuState()

    def energy_mj(self) -> int | None:
        return None

    def power_limit_w(self) -> float | None:
        return None


def make_inputs(m: int, n: int, k: int, dtype: torch.dtype, device: torch.device, seed: int):
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn((m, k), generator=gen, device=device, dtype=torch.float32).to(dtype)
    b = torch.randn((k, n), generator=gen, device=device, dtype=torch.float32).to(dtype)
    return a, b


def poison_allocator(m: int, n: int, split_k: int, device: torch.device) -> None:
    """Fill with NaN the blocks a launcher's next allocations will get: an output in any dtype,
    an fp32 output, and an fp32 split-K workspace."""
    if device.type != "cuda":
        return  # the CPU allocator does not cache; interpreter tests plant faults directly
    for numel, dtype in ((m * n, torch.float16), (m * n, torch.float32), (split_k * m * n, torch.float32)):
        torch.full((numel,), math.nan, dtype=dtype, device=device)


@dataclass
class CheckResult:
    rel_err: float
    tolerance: float
    nondeterminism: float | None
    host_s: float  # host time of one launcher call, for sizing the head start of blocks

    @property
    def ok(self) -> bool:
        return self.rel_err <= self.tolerance


def check(
    launch: Launch,
    reference: torch.Tensor,
    dtype: torch.dtype,
    k: int,
    input_precision: str,
    *,
    device: torch.device,
    m: int,
    n: int,
    split_k: int,
    repeats: int,
) -> CheckResult:
    """Run once on poisoned memory and compare with fp64; repeat atomic variants (repeats > 1)."""
    poison_allocator(m, n, split_k, device)
    out = launch()
    _sync(device)
    acc = check_accuracy(out, reference, dtype, k, input_precision)
    nondet = None
    if repeats > 1:
        diffs = []
        for _ in range(repeats - 1):
            again = launch()
            diffs.append((again.double() - out.double()).abs().max().item())
        nondet = max(diffs)
    _sync(device)
    start = time.perf_counter()
    launch()
    host_s = time.perf_counter() - start
    _sync(device)
    return CheckResult(acc.rel_err, acc.tolerance, nondet, host_s)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- statistics ----------------------------------------------------------------------------------


def median_ci_halfwidth(samples: Sequence[float]) -> float:
    """Relative half-width of a 95% confidence interval of the median (order statistics)."""
    xs = sorted(samples)
    n = len(xs)
    half = 1.96 * math.sqrt(n) / 2
    lo, hi = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half) - 1)
    med = statistics.median(xs)
    return (xs[hi] - xs[lo]) / (2 * med) if med > 0 else math.inf


def _quantiles(samples: Sequence[float]) -> tuple[float, float]:
    if len(samples) < 2:
        return samples[0], samples[0]
    q = statistics.quantiles(samples, n=5, method="inclusive")
    return q[0], q[3]


@dataclass
class Timing:
    """One point's timing: kernel time (median, p20, p80) is the main figure."""

    ms: float
    ms_p20: float
    ms_p80: float
    reps: int
    stream_ms: float | None = None
    host_ms: float | None = None
    avg_watts: float | None = None
    joules_per_launch: float | None = None
    power_limit_w: float | None = None
    regime: str = "steady"
    state: GpuState = field(default_factory=GpuState)


def summarize(samples: Sequence[float]) -> Timing:
    p20, p80 = _quantiles(samples)
    return Timing(statistics.median(samples), p20, p80, len(samples))


# -- policy --------------------------------------------------------------------------------------


@dataclass
class TimingPolicy:
    min_reps: int = 10
    max_reps: int = 100
    target_ci: float = 0.005
    max_seconds_per_point: float = 1.0
    regime: str = "steady"
    # steady: a block's settling sub-blocks and its measured block, in seconds of GPU work.
    # 20 ms tells a GPU below its power limit (one sub-block, then measure); at the limit, sub-blocks
    # of 100 ms until the mean clock of two in a row agrees within clock_tol (the limiter's time
    # scale is hundreds of ms: H200, 16384^3, see the module docstring), 1.5 s at most. With a
    # clock relaxing exponentially (time constant 0.2 s, tests/farm/test_measure.py), 1% left the
    # ratio of two configs 1.1% off and 0.5% left it 0.5% off; NVML's clock moves in 15 MHz steps
    # (1% at 1500 MHz), so the mean of the ~20 samples per sub-block is what is compared.
    first_sub_block_s: float = 0.02
    sub_block_s: float = 0.1
    measure_block_s: float = 0.1
    # At the limit the measured block is longer, so that one pass can hold every sample: 300 ms is
    # the do_bench run (rep 300 ms) that visit 16's grouping fidelity matched within 0.03 at n>=8192.
    limit_block_s: float = 0.3
    max_settle_s: float = 1.5
    # At the limit, settle at least this long before the clocks may be compared. H200, 16384^3
    # (docs/perf-notes.md, visit 12): stopping at the first two agreeing 100 ms sub-blocks left
    # group_m 8 at 1582 MHz where 1 s blocks settle at 1422 MHz, and the gain at 1.20 against
    # do_bench's 1.13; blocks of 300 ms and more gave 1.11-1.12.
    min_settle_s: float = 0.4
    clock_tol: float = 0.005
    # At the limit when the power limiter's throttle bit is set or the block drew this share of it.
    power_headroom: float = 0.95
    min_passes: int = 2
    max_passes: int = 20
    # rest: host seconds the GPU idles before each single launch.
    rest_s: float = 1.0

    def __post_init__(self) -> None:
        if self.regime not in REGIMES:
            raise ValueError(f"timing regime {self.regime!r} is not one of {', '.join(REGIMES)}")

    @classmethod
    def from_spec(cls, timing) -> TimingPolicy:
        """From farm.spec.Timing (the spec's `timing:` mapping)."""
        return cls(
            min_reps=timing.min_reps,
            max_reps=timing.max_reps,
            target_ci=timing.target_ci,
            max_seconds_per_point=timing.max_seconds_per_point,
            regime=timing.regime,
            max_settle_s=timing.max_settle_s,
            rest_s=timing.rest_s,
        )


# -- one block of launches -----------------------------------------------------------------------


@dataclass
class Readings:
    """NVML over one block: wall seconds, energy, mean SM clock of the samples taken while it ran."""

    seconds: float
    joules: float | None = None
    sm_clock_mhz: float | None = None
    power_limit_w: float | None = None
    state: GpuState = field(default_factory=GpuState)

    @property
    def watts(self) -> float | None:
        return self.joules / self.seconds if self.joules is not None and self.seconds > 0 else None

    def at_power_limit(self, headroom: float) -> bool:
        """The power limiter held the clock, or the block drew `headroom` of the power allowed."""
        if self.state.throttle_mask & POWER_CAP_BITS:
            return True
        return bool(self.watts and self.power_limit_w and self.watts >= headroom * self.power_limit_w)


@dataclass
class Block:
    """Per launch of a block: kernel, stream and host milliseconds; and the block's readings."""

    kernel_ms: list[float]
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


def kernel_ms_per_launch(events, n_launches: int, label: str = LAUNCH_LABEL) -> list[float | None]:
    """Sum of GPU activity durations per launch, from torch.profiler FunctionEvents.

    Each launcher call ran inside record_function(f"{label}{i}"). A GPU activity (kernel, memset,
    memcpy) belongs to the launch whose host range holds the CUDA runtime/driver call that issued
    it (same correlation id); the flush and the head-start sleep were issued outside every range
    and drop out. None for a launch with no activity (the profiler lost it).
    """
    host_spans, gpu_spans, issued, device = [], [], {}, []
    for e in events:
        name, cpu = e.name, _is_cpu(e)
        if name.startswith(label):
            spans = host_spans if cpu else gpu_spans  # the GPU-side span covers the range's GPU work
            spans.append((e.time_range.start, e.time_range.end, int(name[len(label) :])))
        elif cpu and name.startswith("cu"):  # cudaLaunchKernel, cuLaunchKernelEx, cudaMemsetAsync...
            issued[e.id] = e.time_range.start
        elif not cpu and not getattr(e, "is_user_annotation", False):
            device.append(e)
    total: list[float | None] = [None] * n_launches
    for e in device:
        t = issued.get(e.id)
        # by the host call that issued it; else (no runtime event recorded) by the GPU-side span
        i = _span_of(host_spans, t) if t is not None else _span_of(gpu_spans, e.time_range.start)
        if i is not None and 0 <= i < n_launches:
            total[i] = (total[i] or 0.0) + (e.time_range.end - e.time_range.start) / 1e3
    return total


def _span_of(spans: list[tuple[float, float, int]], t: float) -> int | None:
    spans.sort()
    j = bisect.bisect_right(spans, (t, math.inf, 0)) - 1
    return spans[j][2] if j >= 0 and t <= spans[j][1] else None


def _is_cpu(event) -> bool:
    return str(getattr(event, "device_type", "CPU")).endswith("CPU")


class CudaClock:
    """Cold-L2 GPU timing: blocks of launches, each behind a flush, queued behind a sleep."""

    def __init__(self, device: torch.device, l2_bytes: int, meter: Meter | None = None):
        self.device = device
        self.meter = meter or Meter()
        nbytes = max(MIN_FLUSH_BYTES, 2 * l2_bytes)
        self.flush_buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=device)
        self.flush_ms = self._time_flush()
        self._pending: list[tuple[Block, int]] | None = None  # profiled blocks of the open session
        self._labels = 0
        self._profiler = None  # the open session's torch.profiler.profile
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
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                self._profiler = prof
                yield
            kernel = kernel_ms_per_launch(prof.events(), self._labels)
            for block, base in self._pending:
                for j in range(len(block.kernel_ms)):
                    # a launch the profiler lost keeps its stream time (never silently zero)
                    if kernel[base + j] is not None:
                        block.kernel_ms[j] = kernel[base + j]
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
        toggle(False, activities)
        try:
            yield 1.0
        finally:
            toggle(True, activities)

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

    def _run(self, launches, host_s, factor: float, gpu_s: float, *, label_base: int | None) -> Block:
        from torch.profiler import record_function

        meter = self.meter
        energy0, t0 = meter.energy_mj(), time.perf_counter()
        torch.cuda._sleep(int(head_start_us(host_s, factor, gpu_s) * SLEEP_CYCLES_PER_US))
        events, host_ms = [], []
        for i, launch in enumerate(launches):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.flush_buffer.zero_()
            start.record()
            h0 = time.perf_counter()
            if label_base is not None:
                with record_function(f"{LAUNCH_LABEL}{label_base + i}"):
                    launch()
            else:
                launch()
            host_ms.append((time.perf_counter() - h0) * 1e3)
            end.record()
            events.append((start, end))
        clocks, state = [], GpuState()
        last = events[-1][1]
        while not last.query():  # sample the clock while the block runs
            s = meter.state()
            state = state.merge(s) if clocks else s
            if s.sm_clock_mhz is not None:
                clocks.append(s.sm_clock_mhz)
            time.sleep(POLL_S)
        torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - t0
        energy1, end_state = meter.energy_mj(), meter.state()
        state = state.merge(end_state) if clocks else end_state
        if end_state.sm_clock_mhz is not None and not clocks:
            clocks.append(end_state.sm_clock_mhz)
        stream = [start.elapsed_time(end) for start, end in events]
        readings = Readings(
            seconds,
            _joules(energy0, energy1),
            statistics.fmean(clocks) if clocks else None,
            meter.power_limit_w(),
            state,
        )
        return Block(list(stream), stream, host_ms, readings)


def _joules(energy0_mj: int | None, energy1_mj: int | None) -> float | None:
    """Energy of a block from NVML's counter, None where it did not advance: the counter moves in
    steps (44 of 136 rows of visit 14's grouping sweep, blocks of 20 ms and less, read 0 J), and a
    block it did not tick in has an unknown energy, not none."""
    if energy0_mj is None or energy1_mj is None or energy1_mj <= energy0_mj:
        return None
    return (energy1_mj - energy0_mj) / 1e3


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


# -- per point bookkeeping -----------------------------------------------------------------------


@dataclass
class _Point:
    # (block, first, end): kernel times are read at the end, a session may fill them in later
    parts: list[tuple[Block, int, int]] = field(default_factory=list)
    stream: list[float] = field(default_factory=list)
    host: list[float] = field(default_factory=list)
    spent_s: float = 0.0  # GPU and host seconds this point used (settling included)
    joules: float = 0.0
    metered_s: float = 0.0  # seconds of blocks with an energy reading
    clock_sum: float = 0.0  # clock x seconds of measured blocks, for the mean clock
    clocked_s: float = 0.0
    power_limit_w: float | None = None
    state: GpuState | None = None
    launch_s: float | None = None  # wall seconds per launch (flush included), for sizing blocks
    below_limit: bool = False  # settled at once below the power limit: later passes skip settling
    at_limit: bool = False  # settled at the power limit: may stop after one pass

    def add(
        self, block: Block, first: int = 0, count: int | None = None, share: float = 1.0, host: bool = True
    ) -> None:
        """Take samples first..first+count of `block` and `share` of its energy and time."""
        end = len(block.kernel_ms) if count is None else first + count
        self.parts.append((block, first, end))
        self.stream += block.stream_ms[first:end]
        if host:
            self.host += block.host_ms[first:end]
        r = block.readings
        if r.joules is not None:
            self.joules += share * r.joules
            self.metered_s += share * r.seconds
        if r.sm_clock_mhz is not None:
            self.clock_sum += share * r.seconds * r.sm_clock_mhz
            self.clocked_s += share * r.seconds
        self.power_limit_w = r.power_limit_w or self.power_limit_w
        self.state = r.state if self.state is None else self.state.merge(r.state)

    @property
    def kernel(self) -> list[float]:
        return [ms for block, first, end in self.parts for ms in block.kernel_ms[first:end]]

    def done(self, policy: TimingPolicy) -> bool:
        """The stop rule, on the kernel times known so far (inside a profiler session: stream times)."""
        kernel = self.kernel
        if len(kernel) >= policy.max_reps:
            return True
        if len(kernel) < policy.min_reps:
            return False
        return self.spent_s >= policy.max_seconds_per_point or median_ci_halfwidth(kernel) <= policy.target_ci

    def timing(self, regime: str) -> Timing:
        t = summarize(self.kernel)
        watts = self.joules / self.metered_s if self.metered_s > 0 else None
        state = self.state or GpuState()
        if self.clocked_s > 0:  # the mean clock while measured, not one reading at an end
            state = GpuState(round(self.clock_sum / self.clocked_s), state.temperature_c, state.throttle_mask)
        t.stream_ms = statistics.median(self.stream)
        t.host_ms = statistics.median(self.host)
        t.avg_watts = watts
        t.joules_per_launch = watts * t.ms / 1e3 if watts is not None else None
        t.power_limit_w = self.power_limit_w
        t.regime = regime
        t.state = state
        return t


# -- the regimes ---------------------------------------------------------------------------------


def estimate_seconds(policy: TimingPolicy, host_s: float) -> float:
    """The longest one point's timing should take (the driver's deadline is a multiple of it)."""
    if policy.regime == "steady":
        one_pass = (
            policy.first_sub_block_s + policy.max_settle_s + policy.sub_block_s + policy.measure_block_s
        )
        return max(policy.max_seconds_per_point, policy.min_passes * one_pass) + one_pass
    if policy.regime == "rest":  # min_reps launches; each rest counts towards the cap
        return policy.min_reps * (policy.rest_s + 0.1)
    # interleaved: a profiled round costs about 20 ms of host work besides the launches
    return min(policy.max_seconds_per_point, policy.max_reps * host_s * 2) + 0.02 * policy.max_reps


def time_points(
    launches: Sequence[Launch], host_s: Sequence[float], clock, policy: TimingPolicy, rng: random.Random
) -> list[Timing]:
    """Time the launchers of one batch in the policy's regime."""
    if policy.regime == "steady":
        return time_steady(launches, host_s, clock, policy, rng)
    if policy.regime == "rest":
        return time_rested(launches, host_s, clock, policy, rng)
    return time_interleaved(launches, host_s, clock, policy, rng)


def time_interleaved(
    launches: Sequence[Launch], host_s: Sequence[float], clock, policy: TimingPolicy, rng: random.Random
) -> list[Timing]:
    """Rounds that launch every unfinished launcher once, in a fresh random order, all in one
    profiler session (no profiler start and stop between rounds: the GPU would idle for them).
    A round's energy and time are shared by its launches in proportion to their stream time."""
    points = [_Point() for _ in launches]
    active = list(range(len(launches)))
    with _session(clock):
        while active:
            order = rng.sample(active, len(active))
            block = clock.run([launches[i] for i in order], [host_s[i] for i in order], profile=True)
            total_ms = sum(block.stream_ms) or 1.0
            for j, i in enumerate(order):
                points[i].add(block, j, 1, share=block.stream_ms[j] / total_ms)
                points[i].spent_s += block.stream_ms[j] / 1e3 + host_s[i]
            active = [i for i in active if not points[i].done(policy)]
    return [p.timing("interleaved") for p in points]


def _session(clock):
    """The clock's profiler session (fakes in tests have none)."""
    profiled = getattr(clock, "profiled", None)
    return profiled() if profiled is not None else contextlib.nullcontext()


def time_rested(
    launches: Sequence[Launch], host_s: Sequence[float], clock, policy: TimingPolicy, rng: random.Random
) -> list[Timing]:
    """Single launches, each after the GPU rested `rest_s`; rounds in random order. The rest counts
    towards the time cap: with the defaults a point gets min_reps launches."""
    points = [_Point() for _ in launches]
    active = list(range(len(launches)))
    with _session(clock):
        while active:
            for i in rng.sample(active, len(active)):
                time.sleep(policy.rest_s)
                block = clock.run([launches[i]], [host_s[i]], profile=True)
                points[i].add(block)
                points[i].spent_s += policy.rest_s + block.readings.seconds
            active = [i for i in active if not points[i].done(policy)]
    return [p.timing("rest") for p in points]


@dataclass(frozen=True)
class SubBlock:
    """What settling looks at: a sub-block's readings and its median stream time."""

    readings: Readings
    median_ms: float


def settled(history: Sequence[SubBlock], policy: TimingPolicy) -> bool:
    """Has the config reached its steady state under the power limit?

    Below the limit after a sub-block long enough to judge (first_sub_block_s): yes, the clock
    is not held by power. At the limit: once it has run min_settle_s and the mean SM clock of the
    last two sub-blocks agrees within clock_tol. Without clock readings (no NVML), the median
    times must agree instead.
    """
    last = history[-1]
    if last.readings.seconds < 0.5 * policy.first_sub_block_s:
        return False  # too short to read power from (a one-launch estimate)
    if not last.readings.at_power_limit(policy.power_headroom) and last.readings.sm_clock_mhz is not None:
        return True
    if len(history) < 2:
        return False
    prev = history[-2]
    if prev.readings.seconds < 0.5 * policy.first_sub_block_s:
        return False
    a, b = prev.readings.sm_clock_mhz, last.readings.sm_clock_mhz
    if a is not None and b is not None:
        long_enough = sum(h.readings.seconds for h in history) >= policy.min_settle_s
        return long_enough and abs(b - a) <= policy.clock_tol * a
    return abs(last.median_ms - prev.median_ms) <= policy.clock_tol * prev.median_ms


def launches_in(seconds: float, launch_s: float | None, cap: int) -> int:
    """Back-to-back launches that fill `seconds` (1 while the launch time is unknown)."""
    if launch_s is None or launch_s <= 0:
        return 1
    return max(1, min(cap, round(seconds / launch_s)))


def time_steady(
    launches: Sequence[Launch], host_s: Sequence[float], clock, policy: TimingPolicy, rng: random.Random
) -> list[Timing]:
    """Each config in its own steady state, in passes over the configs in random order.

    One block launches every config once, to size blocks in time. In pass one each config takes
    settling sub-blocks and one profiled, measured block. A config that settled at once below the
    power limit has a clock power does not hold: in later passes such configs share measured
    blocks, each config's launches back to back in a fresh random order, instead of paying a
    block's fixed cost each (about 30 ms on an H200: two NVML energy reads of 4.4 ms, the
    head-start sleep, the sync; visit 17). A config at the limit settles again in every pass:
    whatever ran in between moved the limiter.
    """
    points = [_Point() for _ in launches]
    active = list(range(len(launches)))
    per_block = max(1, math.ceil(policy.min_reps / policy.min_passes))
    most_per_block = max(per_block, math.ceil(policy.max_reps / policy.min_passes))
    passes = 0
    # One profiler session for the batch: a session per measured block cost about 150 ms of idle
    # GPU each (visit 14: 0.5 s per point below the power limit, the splitk preset unfinished in
    # 420 s); settling sub-blocks run in it unrecorded.
    with _session(clock):
        if getattr(clock, "power_limited", True):  # the interpreter's clock needs no sizing
            _size_blocks(points, launches, host_s, clock)
        while active:
            order = rng.sample(active, len(active))
            _shared_blocks(
                [i for i in order if points[i].below_limit],
                points,
                launches,
                host_s,
                clock,
                policy,
                per_block,
                most_per_block,
            )
            for i in order:
                if not points[i].below_limit:
                    _steady_block(points[i], launches[i], host_s[i], clock, policy, per_block, most_per_block)
            passes += 1
            active = [
                i
                for i in active
                if passes < policy.max_passes
                and not (points[i].done(policy) and (passes >= policy.min_passes or points[i].at_limit))
            ]
    return [p.timing("steady") for p in points]


def _size_blocks(points: list[_Point], launches, host_s, clock) -> None:
    """One unprofiled launch of each config: GPU seconds per launch (flush included), to size blocks."""
    block = clock.run(list(launches), list(host_s), profile=False)
    flush_ms = getattr(clock, "flush_ms", 0.0)
    for p, ms, seconds in zip(points, block.stream_ms, host_s, strict=True):
        p.launch_s = (ms + flush_ms) / 1e3
        p.spent_s += seconds + p.launch_s


def _block_size(p: _Point, policy: TimingPolicy, fewest: int, most: int) -> int:
    return min(max(launches_in(policy.measure_block_s, p.launch_s, most), fewest), most)


def _shared_blocks(free, points, launches, host_s, clock, policy, fewest: int, most: int) -> None:
    """Measured blocks shared by configs below the power limit: each config's launches back to back,
    configs packed into a block while the host can still queue it behind one head start. A block's
    energy and time are shared by its configs in proportion to their stream time."""
    chunks = [(i, _block_size(points[i], policy, fewest, most)) for i in free]
    while chunks:
        block_chunks, calls, gpu_s = [], [], math.inf
        while chunks:
            i, n = chunks[0]
            trial_gpu_s = min(gpu_s, points[i].launch_s or 0.0)
            trial = calls + [host_s[i]] * n
            if block_chunks and head_start_us(trial, PROFILED_HOST_FACTOR, trial_gpu_s) >= MAX_SLEEP_US:
                break
            block_chunks.append(chunks.pop(0))
            calls, gpu_s = trial, trial_gpu_s
        block = clock.run(
            [launches[i] for i, n in block_chunks for _ in range(n)], calls, profile=True, gpu_s=gpu_s
        )
        total_ms = sum(block.stream_ms) or 1.0
        first = 0
        for i, n in block_chunks:
            share = sum(block.stream_ms[first : first + n]) / total_ms
            points[i].add(block, first, n, share=share, host=False)  # profiled host times
            points[i].spent_s += share * block.readings.seconds
            first += n


def _steady_block(p: _Point, launch: Launch, host_s: float, clock, policy, fewest: int, most: int) -> None:
    history: list[SubBlock] = []
    settle_s = 0.0
    while getattr(clock, "power_limited", True):
        limited = any(h.readings.at_power_limit(policy.power_headroom) for h in history)
        length = policy.sub_block_s if limited else policy.first_sub_block_s
        gpu_s = p.launch_s or 0.0
        n = launches_in(length, p.launch_s, max_block_launches(host_s, 1.0, gpu_s))
        block = clock.run([launch] * n, [host_s] * n, profile=False, gpu_s=gpu_s)
        r = block.readings
        # GPU seconds per launch: the wall time of a short block is mostly sleep, sync and polling
        p.launch_s = (statistics.median(block.stream_ms) + getattr(clock, "flush_ms", 0.0)) / 1e3
        p.spent_s += r.seconds
        settle_s += r.seconds
        history.append(SubBlock(r, statistics.median(block.stream_ms)))
        p.host += block.host_ms  # host time without the profiler's own per-call cost
        if settled(history, policy) or settle_s >= policy.max_settle_s:
            # settled at once below the limit, judged by NVML: later passes share blocks
            p.below_limit = (
                len(history) == 1
                and r.sm_clock_mhz is not None
                and not r.at_power_limit(policy.power_headroom)
            )
            break
    gpu_s = p.launch_s or 0.0
    p.at_limit = bool(history) and not p.below_limit
    if p.at_limit:
        # A settled config at the limit takes all its samples at once (a pass costs it min_settle_s
        # of settling or more): one pass where the stop rule allows, as do_bench's one run does.
        n = min(max(launches_in(policy.limit_block_s, p.launch_s, policy.max_reps), fewest), policy.max_reps)
    else:
        n = _block_size(p, policy, fewest, most)
    n = min(n, max_block_launches(host_s, PROFILED_HOST_FACTOR, gpu_s))
    block = clock.run([launch] * n, [host_s] * n, profile=True, gpu_s=gpu_s)
    p.spent_s += block.readings.seconds
    p.add(block, host=not history)


def warm_up(device: torch.device, seconds: float) -> None:
    """Keep the GPU busy with bf16 matmuls so it leaves its idle clock (345 MHz seen on an H200)."""
    if device.type != "cuda":
        return
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize(device)
