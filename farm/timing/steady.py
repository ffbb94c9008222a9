"""The "steady" regime (the default): each config in its own blocks of back-to-back launches, not
interleaved with others, which is what do_bench and Triton's autotuner see (docs/design.md, "The
steady regime"; why blocks on the power limiter's scale: "The power limiter"). A first 20 ms
sub-block tells whether the config holds the GPU below its power limit (NVML's throttle bits and
power); below it, later passes share measured blocks (`time_steady`); at it, one profiled 300 ms
block gives all the point's samples. Configs take their blocks in a fresh random order each pass.
No settling at the limit by default (docs/design.md, "No settling at the power limit");
`max_settle_s` above 20 ms brings it back (`settled`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from farm.clock import (
    MAX_SLEEP_US,
    PROFILED_HOST_FACTOR,
    Block,
    Readings,
    head_start_us,
    max_block_launches,
    profiler_session,
)
from farm.timing.own_blocks import energy_windows, host_times
from farm.timing.policy import TimingPolicy
from farm.timing.request import TimingRequest
from farm.timing.samples import PointSamples, PointTiming

# A measured block at the power limit holds at most this many launches (300 ms of 0.1 ms kernels
# and their 70 us flushes: about 1,800); the host's head start caps it too (max_block_launches).
MAX_LIMIT_BLOCK_LAUNCHES = 10_000


def estimate_s(policy: TimingPolicy, host_s: float) -> float:
    """The longest one point's passes should take."""
    one_pass = (
        policy.first_sub_block_s
        + policy.max_settle_s
        + policy.sub_block_s
        + max(policy.measure_block_s, policy.limit_block_s)
    )
    passes = max(policy.min_passes, policy.limit_passes)
    return max(policy.max_seconds_per_point, passes * one_pass) + one_pass


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


def time_steady(request: TimingRequest) -> list[PointTiming]:
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

    The early cut (`cut_ms`): a config whose screen or first sub-block already read slower than
    cut_ms takes min_reps launches in its first measured block, and a config whose samples read
    slower at min_reps leaves the passes then (farm.timing.samples).
    """
    launches, host_s, clock, policy = request.launches, request.host_s, request.clock, request.policy

    points = [PointSamples() for _ in launches]
    active = list(range(len(launches)))
    per_block = max(1, math.ceil(policy.min_reps / policy.min_passes))
    most_per_block = max(per_block, math.ceil(policy.max_reps / policy.min_passes))
    passes = 0
    # One profiler session for the batch: a session per measured block cost about 150 ms of idle
    # GPU each (H200: 0.5 s per point below the power limit, the splitk preset unfinished in
    # 420 s); settling sub-blocks run in it unrecorded.
    with profiler_session(clock):
        if getattr(clock, "power_limited", True):  # the interpreter's clock needs no sizing
            _size_blocks(points, launches, host_s, clock)
            _screen(points, launches, host_s, clock, policy)
        while active:
            order = request.rng.sample(active, len(active))
            free = [i for i in order if points[i].below_limit]
            _shared_blocks(request, free, points, per_block, most_per_block)
            for i in order:
                if not points[i].below_limit:
                    _steady_block(request, i, points[i], per_block, most_per_block)
            passes += 1
            active = [
                i
                for i in active
                if passes < policy.max_passes and not _stops(points[i], passes, policy, request.cut_ms)
            ]
    energy_windows(points, launches, host_s, clock, policy)
    host_times(points, launches, clock)
    return [p.timing("steady", policy.min_metered_s) for p in points]


def _stops(p: PointSamples, passes: int, policy: TimingPolicy, cut_ms: float | None) -> bool:
    """After `passes`: the stop rule met in enough of them (limit_passes at the limit, min_passes
    below it), or the early cut."""
    enough = passes >= (policy.limit_passes if p.at_limit else policy.min_passes)
    return (enough and p.done(policy)) or p.cut_short(policy, cut_ms)


def _size_blocks(points: list[PointSamples], launches, host_s, clock) -> None:
    """One unprofiled launch of each config: GPU seconds per launch (flush included), to size blocks."""
    block = clock.run(list(launches), list(host_s), profile=False)
    flush_ms = getattr(clock, "flush_ms", 0.0)
    for p, ms, seconds in zip(points, block.stream_ms, host_s, strict=True):
        p.launch_s = (ms + flush_ms) / 1e3
        p.spent_s += seconds + p.launch_s


def _block_size(p: PointSamples, policy: TimingPolicy, fewest: int, most: int, cut_ms: float | None) -> int:
    """Launches of a measured block below the limit: measure_block_s of them within [fewest, most];
    min_reps for a config that already read slower than the early cut's `cut_ms` in its first pass."""
    if not p.parts and p.hopeless(cut_ms):
        return max(fewest, policy.min_reps)
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


def _screen(points: list[PointSamples], launches, host_s, clock, policy: TimingPolicy) -> bool:
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
            p.probe_ms = statistics.median(block.stream_ms[first : first + n])
            p.spent_s += block.readings.seconds * n / sum(c for _, c in block_chunks)
            first += n
    return True


def _shared_blocks(
    request: TimingRequest, free: list[int], points: list[PointSamples], fewest: int, most: int
) -> None:
    """Measured blocks shared by the configs `free` (below the power limit): each config's launches back
    to back, configs packed into a block while the host can still queue it behind one head start. A
    block's energy and time are shared by its configs in proportion to their stream time."""
    chunks = [(i, _block_size(points[i], request.policy, fewest, most, request.cut_ms)) for i in free]
    packed = _packed(
        chunks, points, request.launches, request.host_s, request.clock, PROFILED_HOST_FACTOR, True
    )
    for block_chunks, block in packed:
        total_ms = sum(block.stream_ms) or 1.0
        first = 0
        for i, n in block_chunks:
            share = sum(block.stream_ms[first : first + n]) / total_ms
            points[i].add(block, first, n, share=share, host=False)  # profiled host times
            points[i].spent_s += share * block.readings.seconds
            first += n


def _steady_block(request: TimingRequest, i: int, p: PointSamples, fewest: int, most: int) -> None:
    """Config i's settling sub-blocks (at the limit, where max_settle_s allows) and its measured block."""
    launch, host_s, clock = request.launches[i], request.host_s[i], request.clock
    policy, cut_ms = request.policy, request.cut_ms
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
        p.probe_ms = statistics.median(block.stream_ms)
        history.append(SubBlock(r, p.probe_ms))
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
        if not p.parts and p.hopeless(cut_ms):  # its sub-block read slower than the early cut
            n = max(fewest, policy.min_reps)
    else:
        n = _block_size(p, policy, fewest, most, cut_ms)
    n = min(n, max_block_launches(host_s, PROFILED_HOST_FACTOR, gpu_s))
    block = clock.run([launch] * n, [host_s] * n, profile=True, gpu_s=gpu_s)
    p.spent_s += block.readings.seconds
    p.add(block, first=0 if p.at_limit else max(0, n - policy.max_reps), host=not history)
