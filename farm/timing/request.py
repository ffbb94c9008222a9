"""What a regime is asked to time: one batch's launchers and what they are timed with, passed whole to
`farm.timing.time_points` and to each regime (farm.timing.steady, .interleaved, .rest)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from farm.clock import Launch
from farm.timing.policy import TimingPolicy


@dataclass(frozen=True)
class TimingRequest:
    launches: Sequence[Launch]
    host_s: Sequence[float]  # each launcher's host time a call, as its check measured it
    clock: object  # farm.clock.CudaClock on a GPU, farm.clock.HostClock under the interpreter (or a fake)
    policy: TimingPolicy
    rng: random.Random  # the order of rounds and passes; seeded per batch, so a batch replays alike
    # The batch's early cut (farm.timing.samples): a point reading slower than this stops at min_reps;
    # None for none.
    cut_ms: float | None = None
