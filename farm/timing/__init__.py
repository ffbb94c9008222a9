"""The timing regimes (stored on every row as `timing_regime`) over farm.clock's blocks: which blocks
of launches run when, and when a point stops. One module per job:

- farm.timing.policy: `TimingPolicy`, the spec's `timing:` knobs and the protocol's own constants;
- farm.timing.request: `TimingRequest`, one batch's launchers and what they are timed with;
- farm.timing.samples: one point's samples, the stop rule and the early cut, its `PointTiming`;
- farm.timing.steady, .interleaved, .rest: the regimes (docs/design.md, "Timing regimes");
- farm.timing.own_blocks: what each point runs alone after every point's samples (an energy window,
  its host times).

This module picks the regime and estimates how long a point should take (the driver's deadline).
"""

from __future__ import annotations

from farm.timing import interleaved, rest, steady
from farm.timing.interleaved import time_interleaved
from farm.timing.policy import TimingPolicy
from farm.timing.request import TimingRequest
from farm.timing.rest import time_rested
from farm.timing.samples import PointTiming
from farm.timing.steady import time_steady

# Each regime (farm.timing.policy.REGIMES): its timer and its estimate of one point's seconds.
BY_REGIME = {
    "steady": (time_steady, steady.estimate_s),
    "interleaved": (time_interleaved, interleaved.estimate_s),
    "rest": (time_rested, rest.estimate_s),
}


def estimate_seconds(policy: TimingPolicy, host_s: float) -> float:
    """The longest one point's timing should take (the driver's deadline is a multiple of it),
    its energy window included."""
    return policy.energy_window_s + BY_REGIME[policy.regime][1](policy, host_s)


def time_points(request: TimingRequest) -> list[PointTiming]:
    """Time the launchers of one batch in its policy's regime."""
    return BY_REGIME[request.policy.regime][0](request)
