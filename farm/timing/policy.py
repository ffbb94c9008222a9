"""The timing policy: the spec's `timing:` knobs (farm.spec.Timing) and the protocol's own constants,
which a spec does not set but tests and studies may. Torch-free, like the spec."""

from __future__ import annotations

import typing

from pydantic import field_validator

from db.records import FIRST_SUB_BLOCK_S
from farm.spec import Timing

REGIMES: tuple[str, ...] = typing.get_args(Timing.model_fields["regime"].annotation)


class TimingPolicy(Timing):
    """How a batch's points are timed and when each stops: every field of farm.spec.Timing, plus the
    block lengths and thresholds of the regimes (farm/timing/steady.py and its siblings use them)."""

    # steady: a block's sub-blocks and its measured block, in seconds of GPU work. 20 ms tells a
    # GPU below its power limit (one sub-block, then measure); db.records holds the number, which the
    # dashboard reads stored specs with.
    first_sub_block_s: float = FIRST_SUB_BLOCK_S
    # The batch's screen (farm.timing.steady): each config this long back to back in one unprofiled block.
    screen_s: float = 0.005
    sub_block_s: float = 0.1
    measure_block_s: float = 0.1
    # At the limit the measured block is longer, so that one pass holds every sample: 300 ms, as
    # the do_bench run (rep 300 ms) benchmarks/fidelity.py takes for its reference; every launch of
    # it a sample (docs/design.md, "The steady regime").
    limit_block_s: float = 0.3
    # Settling at the limit, where the spec's max_settle_s allows it (off by default:
    # docs/design.md, "No settling at the power limit"): sub-blocks of sub_block_s until the mean SM
    # clock of two in a row agrees within clock_tol after at least min_settle_s (H200, 16384^3:
    # stopping at the first two agreeing 100 ms sub-blocks left group_m 8 at 1582 MHz where 1 s
    # blocks settled at 1422 MHz); NVML's clock moves in 15 MHz steps (1% at 1500 MHz), so the mean
    # of the ~20 samples per sub-block is compared.
    min_settle_s: float = 0.4
    clock_tol: float = 0.005
    # At the limit when the power limiter's throttle bit is set or the block drew this share of it.
    power_headroom: float = 0.95
    min_passes: int = 2
    max_passes: int = 20
    # Energy is stored only for a point metered this long. NVML's energy counter moves about every
    # 100 ms (docs/design.md, "Energy"), integrating power it samples 25 ms out of every 100 ms on
    # A100/H100-class GPUs (arXiv 2312.02741). A block reads it between the first and the last update
    # seen while it runs (farm.energy.EnergyUpdates: two whole updates at least, 0.15-0.3 s of a config's
    # 300 ms block at the limit); a metered span of rounds (interleaved) reads it at its two ends,
    # off by up to one update over the whole span (0.1 s in a batch's 1-5 s). Two sweeps that read
    # each block's two ends over 0.3 s or more: 12 points in both sweeps differed by a median 9%.
    min_metered_s: float = 0.15

    @field_validator("regime", mode="before")
    @classmethod
    def _known_regime(cls, regime: str) -> str:
        if regime not in REGIMES:  # the spec's own message names the YAML line; this one the value
            raise ValueError(f"timing regime {regime!r} is not one of {', '.join(REGIMES)}")
        return regime

    @classmethod
    def from_spec(cls, timing: Timing) -> TimingPolicy:
        """From farm.spec.Timing (the spec's `timing:` mapping); the protocol's own at their defaults."""
        return cls(**timing.model_dump())
