"""The timing regimes (stored on every row as `timing_regime`) and the stop rule, over farm.clock.

- "steady" (default): each config in its own blocks of back-to-back launches, not interleaved
  with others, which is what do_bench and Triton's autotuner see. A first 20 ms sub-block tells
  whether the config holds the GPU below its power limit (NVML's throttle bits and power); below
  it, later passes share measured blocks (`time_steady`); at it, one profiled 300 ms block gives
  all the point's samples. Configs take their blocks in a fresh random order each pass.
  Why blocks: on an H200 at 16384^3, interleaving every config launch by launch shared one power
  limiter state between them and shrank the group_m 8 gain from 1.13-1.17 (do_bench) to
  1.01-1.05; blocks of 20 back-to-back launches (260 ms) gave 1.14-1.17. At 8192 even 32 ms
  blocks stayed at 0.98-1.05 against 1.05-1.09: what counts is time on the limiter's scale
  (hundreds of ms), not a launch count. The GPU drew 684-692 W against its 700 W limit.
  Why no settling by default (docs/design.md, "No settling at the power limit"): settling
  at the limit until NVML's mean clock stopped moving (0.4-1.5 s) cost 1.9 s a config and made
  times and gains no steadier: over 6 alternating rounds at 8192-16384, settled 300 ms blocks
  repeated to 1.14% a config and 0.022 a gain, unsettled ones to 0.99% and 0.017 in 0.5 s a
  config; the unsettled gains were within 0.03 of do_bench's (rep 300 ms) on every shape, the
  settled ones 0.047 over at 16384^3. `max_settle_s` above 20 ms brings the settling back
  (`settled`).
- "interleaved": rounds that launch every unfinished config once in random order (the farm's
  protocol before; the power state is shared, ratios shrink where the limiter acts). One
  profiler session spans the rounds, so profiling adds no idle gaps between them, and one
  energy reading spans them too, shared by the configs in proportion to their stream time.
- "rest": single launches, each after the GPU rested `rest_s` (boost clock, cold limiter).

A point stops once the 95% confidence interval of its median kernel time is within +-target_ci
(after min_reps), at max_reps, or once it has used its time cap. Energy: avg_watts = joules /
seconds over the point's metered blocks; joules_per_launch = avg_watts x kernel time (the block's
mean power charged to the launcher's kernels; the flush and the head-start sleep are not the
launcher's work). A point whose samples gave it no energy reading of its own (it shared blocks
or a span with other configs, or its blocks were shorter than the counter's steps: every point
below the power limit) takes an energy window once timed (`_energy_windows`): its launches alone,
back to back for `energy_window_s` (farm.clock.ENERGY_WINDOW_S, 0.35 s), metered, not sampled.
"""

from __future__ import annotations

import contextlib
import math
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from db.records import POWER_LIMIT_EXCESS
from farm.clock import (
    ENERGY_WINDOW_S,
    HOST_BLOCK_S,
    HOST_LAUNCHES,
    MAX_SLEEP_US,
    MIN_HOST_LAUNCHES,
    PROFILED_HOST_FACTOR,
    Block,
    Launch,
    Readings,
    head_start_us,
    max_block_launches,
)
from farm.gpu import GpuState

REGIMES = ("steady", "interleaved", "rest")
# A measured block at the power limit holds at most this many launches (300 ms of 0.1 ms kernels
# and their 70 us flushes: about 1,800); the host's head start caps it too (max_block_launches).
MAX_LIMIT_BLOCK_LAUNCHES = 10_000


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
    # steady: a block's sub-blocks and its measured block, in seconds of GPU work. 20 ms tells a
    # GPU below its power limit (one sub-block, then measure).
    first_sub_block_s: float = 0.02
    # The batch's screen (`_screen`): each config this long back to back in one unprofiled block.
    screen_s: float = 0.005
    sub_block_s: float = 0.1
    measure_block_s: float = 0.1
    # At the limit the measured block is longer, so that one pass holds every sample: 300 ms, as
    # the do_bench run (rep 300 ms) benchmarks/fidelity.py takes for its reference. All its launches
    # are samples: its last 100 alone (90-180 ms of a 300 ms block at 8192) repeated to 4.75% a
    # config across rounds, all of them to 3.44% (H200, docs/results/limit_window.csv).
    limit_block_s: float = 0.3
    # Settling at the limit: sub-blocks until this much has run. The default, one first sub-block,
    # settles nothing (see the module docstring: settling cost 1.9 s a config and steadied
    # nothing). Above it, sub-blocks of sub_block_s run until the mean SM clock of two in a row
    # agrees within clock_tol after at least min_settle_s (H200, 16384^3: stopping at
    # the first two agreeing 100 ms sub-blocks left group_m 8 at 1582 MHz where 1 s blocks settled
    # at 1422 MHz); NVML's clock moves in 15 MHz steps (1% at 1500 MHz), so the mean of the ~20
    # samples per sub-block is compared.
    max_settle_s: float = 0.02
    min_settle_s: float = 0.4
    clock_tol: float = 0.005
    # At the limit when the power limiter's throttle bit is set or the block drew this share of it.
    power_headroom: float = 0.95
    min_passes: int = 2
    # Passes at least for a config at the limit. One by default: two settled 300 ms passes per
    # round repeated no better than one (gain sd 0.053 against 0.030 over 5 rounds, H200).
    limit_passes: int = 1
    max_passes: int = 20
    # rest: host seconds the GPU idles before each single launch.
    rest_s: float = 1.0
    # Energy is stored only for a point metered this long. NVML's energy counter moves about every
    # 100 ms (docs/design.md, "Energy"), integrating power it samples 25 ms out of every 100 ms on
    # A100/H100-class GPUs (arXiv 2312.02741). A block reads it between the first and the last update
    # seen while it runs (farm.clock.EnergyUpdates: two whole updates at least, 0.15-0.3 s of a config's
    # 300 ms block at the limit); a metered span of rounds (interleaved) reads it at its two ends,
    # off by up to one update over the whole span (0.1 s in a batch's 1-5 s). Two sweeps that read
    # each block's two ends over 0.3 s or more: 12 points in both sweeps differed by a median 9%.
    min_metered_s: float = 0.15
    # Seconds of each point's own energy window, for a point without an energy reading of its
    # own; 0: none (a point below the power limit then has no energy, as before the window).
    energy_window_s: float = ENERGY_WINDOW_S

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
            limit_passes=timing.limit_passes,
            rest_s=timing.rest_s,
            energy_window_s=timing.energy_window_s,
        )


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
    shared_energy: bool = False  # some of it is a share of a block or span other configs ran in
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
        self.meter(r, share)
        if r.sm_clock_mhz is not None:
            self.clock_sum += share * r.seconds * r.sm_clock_mhz
            self.clocked_s += share * r.seconds
        self.power_limit_w = r.power_limit_w or self.power_limit_w
        self.state = r.state if self.state is None else self.state.merge(r.state)

    def meter(self, readings: Readings, share: float = 1.0) -> None:
        """Count `share` of a block's energy and seconds towards the point's average power."""
        if readings.joules is not None:
            self.joules += share * readings.joules
            self.metered_s += share * readings.metered_s
            self.shared_energy |= share != 1.0

    def own_energy(self, min_metered_s: float) -> bool:
        """Has the point an energy reading from blocks of its own, long enough to be stored?"""
        return not self.shared_energy and self.metered_s > 0 and self.metered_s >= min_metered_s

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

    def timing(self, regime: str, min_metered_s: float = 0.0) -> Timing:
        t = summarize(self.kernel)
        metered = self.metered_s > 0 and self.metered_s >= min_metered_s
        watts = self.joules / self.metered_s if metered else None
        if watts is not None and self.power_limit_w and watts > POWER_LIMIT_EXCESS * self.power_limit_w:
            watts = None  # no board holds that above its limit over a block: a misread counter
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
    """The longest one point's timing should take (the driver's deadline is a multiple of it),
    its energy window included."""
    return policy.energy_window_s + _estimate_timing_s(policy, host_s)


def _estimate_timing_s(policy: TimingPolicy, host_s: float) -> float:
    if policy.regime == "steady":
        one_pass = (
            policy.first_sub_block_s
            + policy.max_settle_s
            + policy.sub_block_s
            + max(policy.measure_block_s, policy.limit_block_s)
        )
        passes = max(policy.min_passes, policy.limit_passes)
        return max(policy.max_seconds_per_point, passes * one_pass) + one_pass
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
    The rounds run in one metered span: the energy counter is read at its two ends, not around
    every round (two reads cost 6.4-8.8 ms on an H200, often more than a round's launches: a stream-K
    sweep that read them per round ran 3x slower). The span's energy and time are
    shared by the points in proportion to their summed stream time, as each round's were by its
    launches."""
    points = [_Point() for _ in launches]
    active = list(range(len(launches)))
    with _session(clock), _metered(clock) as span:
        while active:
            order = rng.sample(active, len(active))
            block = clock.run([launches[i] for i in order], [host_s[i] for i in order], profile=True)
            total_ms = sum(block.stream_ms) or 1.0
            for j, i in enumerate(order):
                # the round's own energy, where a clock without a metered span reads one
                points[i].add(block, j, 1, share=block.stream_ms[j] / total_ms)
                points[i].spent_s += block.stream_ms[j] / 1e3 + host_s[i]
            active = [i for i in active if not points[i].done(policy)]
    _share_span(points, span)
    _energy_windows(points, launches, host_s, clock, policy)
    _host_times(points, launches, clock)
    return [p.timing("interleaved", policy.min_metered_s) for p in points]


def _energy_windows(points: Sequence[_Point], launches, host_s, clock, policy: TimingPolicy) -> None:
    """An energy window for each point without an energy reading of its own: its launches alone,
    back to back for energy_window_s, outside the profiler session, after every point's samples
    (so no window sits between a config's settling and its measured block). The window's energy
    replaces the point's share of others' blocks; a window whose counter did not move leaves the
    point with no energy (None, never 0). A clock without windows (the interpreter's: no NVML,
    fakes in tests) and energy_window_s 0 leave every point as it was."""
    window = getattr(clock, "energy_window", None)
    if window is None or policy.energy_window_s <= 0:
        return
    flush_ms = getattr(clock, "flush_ms", 0.0)
    for p, launch, seconds in zip(points, launches, host_s, strict=True):
        if p.own_energy(policy.min_metered_s):  # a config at the limit: its 300 ms block
            continue
        # GPU seconds a launch, flush included, to size the window's blocks
        gpu_s = p.launch_s or (statistics.median(p.stream) + flush_ms) / 1e3
        readings = window(launch, seconds, policy.energy_window_s, gpu_s)
        p.joules, p.metered_s, p.shared_energy = 0.0, 0.0, False
        p.meter(readings)
        p.power_limit_w = readings.power_limit_w or p.power_limit_w


def _host_times(points: Sequence[_Point], launches, clock) -> None:
    """Each point's host time from its own block outside the profiler session (`CudaClock.host_times`),
    in place of what its sample blocks read while the session was open. A clock without such blocks
    (the interpreter's wall clock, fakes in tests) leaves the blocks' host times."""
    host_times = getattr(clock, "host_times", None)
    if host_times is None:
        return
    for p, launch in zip(points, launches, strict=True):
        gpu_s = p.launch_s or 0.0
        n = HOST_LAUNCHES if gpu_s <= 0 else round(HOST_BLOCK_S / gpu_s)
        p.host = host_times(launch, max(MIN_HOST_LAUNCHES, min(HOST_LAUNCHES, n)))


def _share_span(points: Sequence[_Point], span: Readings) -> None:
    """Each point's share of a span's energy and seconds, in proportion to its summed stream
    time: its metered seconds are its share of the span, so min_metered_s applies to them."""
    stream_ms = [sum(p.stream) for p in points]
    total_ms = sum(stream_ms) or 1.0
    for p, ms in zip(points, stream_ms, strict=True):
        p.meter(span, share=ms / total_ms)
        p.power_limit_w = span.power_limit_w or p.power_limit_w


def _session(clock):
    """The clock's profiler session (fakes in tests have none)."""
    profiled = getattr(clock, "profiled", None)
    return profiled() if profiled is not None else contextlib.nullcontext()


def _metered(clock):
    """The clock's metered span; a clock without one (the interpreter's, fakes in tests) yields
    a span with no energy reading, and its blocks keep their own."""
    metered = getattr(clock, "metered", None)
    return metered() if metered is not None else contextlib.nullcontext(Readings(0.0))


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
    _energy_windows(points, launches, host_s, clock, policy)
    _host_times(points, launches, clock)
    return [p.timing("rest", policy.min_metered_s) for p in points]


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

    One block launches every config once, to size blocks in time; a second (`_screen`) runs every
    config for a few milliseconds back to back: where that whole block stayed below the power
    limit, the batch's clock is one power does not hold, and every config skips settling. Else, in
    pass one each config takes settling sub-blocks and one profiled, measured block. A config that
    settled at once below the power limit has a clock power does not hold: in later passes such
    configs share measured blocks, each config's launches back to back in a fresh random order,
    instead of paying a block's fixed cost each (about 30 ms on an H200: two NVML
    energy reads of 4.4 ms then, the head-start sleep, the sync). A config at the limit takes its
    first sub-block again in every pass it takes (whatever ran in between moved the limiter), and
    settles where max_settle_s allows: one long measured block, one pass where the stop rule
    allows, or `limit_passes` of them.
    """
    points = [_Point() for _ in launches]
    active = list(range(len(launches)))
    per_block = max(1, math.ceil(policy.min_reps / policy.min_passes))
    most_per_block = max(per_block, math.ceil(policy.max_reps / policy.min_passes))
    passes = 0
    # One profiler session for the batch: a session per measured block cost about 150 ms of idle
    # GPU each (H200: 0.5 s per point below the power limit, the splitk preset unfinished in
    # 420 s); settling sub-blocks run in it unrecorded.
    with _session(clock):
        if getattr(clock, "power_limited", True):  # the interpreter's clock needs no sizing
            _size_blocks(points, launches, host_s, clock)
            _screen(points, launches, host_s, clock, policy)
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
                and not (
                    points[i].done(policy)
                    and passes >= (policy.limit_passes if points[i].at_limit else policy.min_passes)
                )
            ]
    _energy_windows(points, launches, host_s, clock, policy)
    _host_times(points, launches, clock)
    return [p.timing("steady", policy.min_metered_s) for p in points]


def _size_blocks(points: list[_Point], launches, host_s, clock) -> None:
    """One unprofiled launch of each config: GPU seconds per launch (flush included), to size blocks."""
    block = clock.run(list(launches), list(host_s), profile=False)
    flush_ms = getattr(clock, "flush_ms", 0.0)
    for p, ms, seconds in zip(points, block.stream_ms, host_s, strict=True):
        p.launch_s = (ms + flush_ms) / 1e3
        p.spent_s += seconds + p.launch_s


def _block_size(p: _Point, policy: TimingPolicy, fewest: int, most: int) -> int:
    return min(max(launches_in(policy.measure_block_s, p.launch_s, most), fewest), most)


def _packed(chunks: list[tuple[int, int]], points, launches, host_s, clock, factor: float, profile: bool):
    """Blocks of (config, launches) chunks, each config's launches back to back, configs packed
    into a block while the host can still queue it behind one head start: (chunks, block) pairs."""
    chunks = list(chunks)
    while chunks:
        block_chunks, calls, gpu_s = [], [], math.inf
        while chunks:
            i, n = chunks[0]
            trial_gpu_s = min(gpu_s, points[i].launch_s or 0.0)
            trial = calls + [host_s[i]] * n
            if block_chunks and head_start_us(trial, factor, trial_gpu_s) >= MAX_SLEEP_US:
                break
            block_chunks.append(chunks.pop(0))
            calls, gpu_s = trial, trial_gpu_s
        batch = [launches[i] for i, n in block_chunks for _ in range(n)]
        yield block_chunks, clock.run(batch, calls, profile=profile, gpu_s=gpu_s)


def _screen(points: list[_Point], launches, host_s, clock, policy: TimingPolicy) -> bool:
    """Is the whole batch below the power limit? One unprofiled run of every config back to back,
    `screen_s` each (together at least first_sub_block_s, what one config's first sub-block needs
    to be judged): if no block of it met the limit, every config is marked below it and skips
    settling. Before it, the splitk preset's configs below the limit paid 0.33-0.4 s each, two
    thirds of it the fixed cost of their own settling and measured blocks (about 30 ms each)."""
    each_s = max(policy.screen_s, policy.first_sub_block_s / len(points))
    chunks = [
        (i, launches_in(each_s, p.launch_s, max_block_launches(host_s[i], 1.0, p.launch_s or 0.0)))
        for i, p in enumerate(points)
    ]
    ran: list[tuple[list[tuple[int, int]], Block]] = []
    for block_chunks, block in _packed(chunks, points, launches, host_s, clock, 1.0, profile=False):
        r = block.readings
        if r.sm_clock_mhz is None or r.at_power_limit(policy.power_headroom):
            return False  # no clock to judge by, or the limiter acted: each config settles alone
        ran.append((block_chunks, block))
    if sum(block.readings.seconds for _, block in ran) < 0.5 * policy.first_sub_block_s:
        return False  # too short to read power from
    for block_chunks, block in ran:
        first = 0
        for i, n in block_chunks:
            p = points[i]
            p.below_limit = True
            p.host += block.host_ms[first : first + n]  # unprofiled: the launcher's own host time
            p.spent_s += block.readings.seconds * n / sum(c for _, c in block_chunks)
            first += n
    return True


def _shared_blocks(free, points, launches, host_s, clock, policy, fewest: int, most: int) -> None:
    """Measured blocks shared by configs below the power limit: each config's launches back to back,
    configs packed into a block while the host can still queue it behind one head start. A block's
    energy and time are shared by its configs in proportion to their stream time."""
    chunks = [(i, _block_size(points[i], policy, fewest, most)) for i in free]
    for block_chunks, block in _packed(chunks, points, launches, host_s, clock, PROFILED_HOST_FACTOR, True):
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
        # The last sub-blocks ran the config as its measured block does, just before it: their
        # energy counts where they held whole steps of the counter (a settling sub-block of
        # 100 ms rarely does, the 20 ms first one never).
        for h in history[-2:]:
            p.meter(h.readings)
        # A config at the limit takes all its samples at once, in one block that fills
        # limit_block_s whatever max_reps (the splitk preset once capped 0.7 ms kernels at 100
        # launches, 73 ms: no config reached min_metered_s), one pass where the stop rule allows.
        n = max(launches_in(policy.limit_block_s, p.launch_s, MAX_LIMIT_BLOCK_LAUNCHES), fewest)
    else:
        n = _block_size(p, policy, fewest, most)
    n = min(n, max_block_launches(host_s, PROFILED_HOST_FACTOR, gpu_s))
    block = clock.run([launch] * n, [host_s] * n, profile=True, gpu_s=gpu_s)
    p.spent_s += block.readings.seconds
    p.add(block, first=0 if p.at_limit else max(0, n - policy.max_reps), host=not history)
