"""The "rest" regime: single launches, each after the GPU rested `rest_s` (boost clock, cold
limiter: the upper bound of what a short burst sees)."""

from __future__ import annotations

import time

from farm.clock import profiler_session
from farm.timing.own_blocks import energy_windows, host_times
from farm.timing.policy import TimingPolicy
from farm.timing.request import TimingRequest
from farm.timing.samples import PointSamples, PointTiming


def estimate_s(policy: TimingPolicy, host_s: float) -> float:
    """The longest one point's launches should take: min_reps of them, each rest counting towards the cap."""
    return policy.min_reps * (policy.rest_s + 0.1)


def time_rested(request: TimingRequest) -> list[PointTiming]:
    """Single launches, each after the GPU rested `rest_s`; rounds in random order. The rest counts
    towards the time cap: with the defaults a point gets min_reps launches, and the early cut
    (`cut_ms`) stops only a point that a longer cap would keep going."""
    launches, host_s, clock, policy = request.launches, request.host_s, request.clock, request.policy

    points = [PointSamples() for _ in launches]
    active = list(range(len(launches)))
    with profiler_session(clock):
        while active:
            for i in request.rng.sample(active, len(active)):
                time.sleep(policy.rest_s)
                block = clock.run([launches[i]], [host_s[i]], profile=True)
                points[i].add(block)
                points[i].spent_s += policy.rest_s + block.readings.seconds
            active = [
                i
                for i in active
                if not (points[i].done(policy) or points[i].cut_short(policy, request.cut_ms))
            ]
    energy_windows(points, launches, host_s, clock, policy)
    host_times(points, launches, clock)
    return [p.timing("rest", policy.min_metered_s) for p in points]
