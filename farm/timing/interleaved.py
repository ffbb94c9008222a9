"""The "interleaved" regime: rounds that launch every unfinished config once in random order (the
farm's protocol before "steady"; the configs share one power state, so ratios shrink where the
limiter acts: docs/design.md, "The power limiter")."""

from __future__ import annotations

from collections.abc import Sequence

from farm.clock import Readings, metered_span, profiler_session
from farm.timing.own_blocks import energy_windows, host_times
from farm.timing.policy import TimingPolicy
from farm.timing.request import TimingRequest
from farm.timing.samples import PointSamples, PointTiming


def estimate_s(policy: TimingPolicy, host_s: float) -> float:
    """The longest one point's rounds should take: a profiled round costs about 20 ms of host work
    besides the launches."""
    return min(policy.max_seconds_per_point, policy.max_reps * host_s * 2) + 0.02 * policy.max_reps


def time_interleaved(request: TimingRequest) -> list[PointTiming]:
    """Rounds that launch every unfinished launcher once, in a fresh random order, all in one
    profiler session (no profiler start and stop between rounds: the GPU would idle for them).
    The rounds run in one metered span: the energy counter is read at its two ends, not around
    every round (two reads cost 6.4-8.8 ms on an H200, often more than a round's launches: a stream-K
    sweep that read them per round ran 3x slower). The span's energy and time are
    shared by the points in proportion to their summed stream time, as each round's were by its
    launches. A point the early cut stops (`cut_ms`) leaves the rounds at min_reps."""
    launches, host_s, clock, policy = request.launches, request.host_s, request.clock, request.policy

    points = [PointSamples() for _ in launches]
    active = list(range(len(launches)))
    with profiler_session(clock), metered_span(clock) as span:
        while active:
            order = request.rng.sample(active, len(active))
            block = clock.run([launches[i] for i in order], [host_s[i] for i in order], profile=True)
            total_ms = sum(block.stream_ms) or 1.0
            for j, i in enumerate(order):
                # the round's own energy, where a clock without a metered span reads one
                points[i].add(block, j, 1, share=block.stream_ms[j] / total_ms)
                points[i].spent_s += block.stream_ms[j] / 1e3 + host_s[i]
            active = [
                i
                for i in active
                if not (points[i].done(policy) or points[i].cut_short(policy, request.cut_ms))
            ]
    share_span(points, span)
    energy_windows(points, launches, host_s, clock, policy)
    host_times(points, launches, clock)
    return [p.timing("interleaved", policy.min_metered_s) for p in points]


def share_span(points: Sequence[PointSamples], span: Readings) -> None:
    """Each point's share of a span's energy and seconds, in proportion to its summed stream
    time: its metered seconds are its share of the span, so min_metered_s applies to them."""
    stream_ms = [sum(p.stream) for p in points]
    total_ms = sum(stream_ms) or 1.0
    for p, ms in zip(points, stream_ms, strict=True):
        p.meter(span, share=ms / total_ms)
        p.power_limit_w = span.power_limit_w or p.power_limit_w
