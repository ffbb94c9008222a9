"""What each point of a batch runs alone once every point's samples are in, whatever the regime: an
energy window where its samples gave it no energy reading of its own (farm.energy.ENERGY_WINDOW_S),
and a host-time block outside the profiler session (`CudaClock.host_times`). Both run after all the
samples, so none sits between a config's settling and its measured block."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from farm.clock import HOST_BLOCK_S, HOST_LAUNCHES, MIN_HOST_LAUNCHES
from farm.timing.policy import TimingPolicy
from farm.timing.samples import PointSamples


def energy_windows(points: Sequence[PointSamples], launches, host_s, clock, policy: TimingPolicy) -> None:
    """An energy window for each point without an energy reading of its own (it shared blocks or a
    span with other configs, or its blocks were shorter than the counter's steps: every point below
    the power limit): its launches alone, back to back for energy_window_s, metered, not sampled. The
    window's energy replaces the point's share of others' blocks; a window whose counter did not move
    leaves the point with no energy (None, never 0). A point the early cut stopped takes no window and
    keeps only a reading of its own. A clock without windows (the interpreter's: no NVML, fakes in
    tests) and energy_window_s 0 leave every point as it was."""
    window = getattr(clock, "energy_window", None)
    if window is None or policy.energy_window_s <= 0:
        return
    flush_ms = getattr(clock, "flush_ms", 0.0)
    for p, launch, seconds in zip(points, launches, host_s, strict=True):
        if p.own_energy(policy.min_metered_s):  # a config at the limit: its 300 ms block
            continue
        p.joules, p.metered_s, p.shared_energy = 0.0, 0.0, False
        if p.cut:  # 0.35 s of GPU for a config already known to be hopeless
            continue
        # GPU seconds a launch, flush included, to size the window's blocks
        gpu_s = p.launch_s or (statistics.median(p.stream) + flush_ms) / 1e3
        readings = window(launch, seconds, policy.energy_window_s, gpu_s)
        p.meter(readings)
        p.power_limit_w = readings.power_limit_w or p.power_limit_w


def host_times(points: Sequence[PointSamples], launches, clock) -> None:
    """Each point's host time from its own block outside the profiler session (`CudaClock.host_times`),
    in place of what its sample blocks read while the session was open. A clock without such blocks
    (the interpreter's wall clock, fakes in tests) leaves the blocks' host times."""
    take = getattr(clock, "host_times", None)
    if take is None:
        return
    for p, launch in zip(points, launches, strict=True):
        gpu_s = p.launch_s or 0.0
        n = HOST_LAUNCHES if gpu_s <= 0 else round(HOST_BLOCK_S / gpu_s)
        p.host = take(launch, max(MIN_HOST_LAUNCHES, min(HOST_LAUNCHES, n)))
