"""One point's samples while its regime runs, the stop rule over them, and the point's timing
(`PointTiming`) once they are in.

The stop rule: a point stops once the 95% confidence interval of its median kernel time is within
+-target_ci (after min_reps), at max_reps, or once it has used its time cap (docs/design.md, "The
stop rule and what a point costs"). The early cut (docs/design.md, "The early cut"): a point whose
median at min_reps is slower than its batch's `cut_ms` (the driver's threshold: several times the
best stored for the shape) stops there, and its regime says so (`CUT_SUFFIX`).

Energy: avg_watts = joules / seconds over the point's metered blocks; joules_per_launch = avg_watts x
kernel time (the block's mean power charged to the launcher's kernels; the flush and the head-start
sleep are not the launcher's work).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from db.records import CUT_SUFFIX, POWER_LIMIT_EXCESS
from farm.clock import Block, Readings
from farm.errors import InstrumentError
from farm.gpu import GpuState
from farm.instrument import PROFILER
from farm.timing.policy import TimingPolicy


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
class PointTiming:
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

    def columns(self) -> dict:
        """The measurement row's columns this timing fills (db.records.MeasurementRecord)."""
        return {
            "ms": self.ms,
            "ms_p20": self.ms_p20,
            "ms_p80": self.ms_p80,
            "reps": self.reps,
            "stream_ms": self.stream_ms,
            "host_ms": self.host_ms,
            "timing_regime": self.regime,
            "joules_per_launch": self.joules_per_launch,
            "avg_watts": self.avg_watts,
            "power_limit_w": self.power_limit_w,
            "sm_clock_mhz": self.state.sm_clock_mhz,
            "temperature_c": self.state.temperature_c,
            "throttled": self.state.throttled,
            "throttle_reasons": self.state.reasons,
        }


def summarize(samples: Sequence[float]) -> PointTiming:
    p20, p80 = _quantiles(samples)
    return PointTiming(statistics.median(samples), p20, p80, len(samples))


@dataclass
class PointSamples:
    """What one point gathered so far in its batch's regime: samples, energy, clock, and where it stands."""

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
    probe_ms: float | None = None  # median stream ms of its latest unprofiled launches (screen, sub-block)
    below_limit: bool = False  # settled at once below the power limit: later passes skip settling
    at_limit: bool = False  # settled at the power limit: may stop after one pass
    cut: bool = False  # the early cut stopped it at min_reps

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
        """Kernel times so far: stream times inside a profiler session; after it, CUPTI's, without the
        launches whose activity the profile lost (farm.clock.MAX_LOST_SHARE)."""
        return [ms for block, first, end in self.parts for ms in block.kernel_ms[first:end] if ms is not None]

    def done(self, policy: TimingPolicy) -> bool:
        """The stop rule, on the kernel times known so far (inside a profiler session: stream times)."""
        kernel = self.kernel
        if len(kernel) >= policy.max_reps:
            return True
        if len(kernel) < policy.min_reps:
            return False
        return self.spent_s >= policy.max_seconds_per_point or median_ci_halfwidth(kernel) <= policy.target_ci

    def cut_short(self, policy: TimingPolicy, cut_ms: float | None) -> bool:
        """The early cut, for a point the stop rule keeps going: at min_reps or more, a median slower
        than `cut_ms` stops it (and marks it `cut`). It reads the times known so far, stream times
        inside a profiler session, which is why the driver leaves a wide margin over the best."""
        kernel = self.kernel
        if cut_ms is not None and len(kernel) >= policy.min_reps and statistics.median(kernel) > cut_ms:
            self.cut = True
        return self.cut

    def hopeless(self, cut_ms: float | None) -> bool:
        """Do its unprofiled launches so far read slower than `cut_ms`? Then its measured block holds
        min_reps launches, enough for the cut to judge (a wrong guess costs one more pass, not a cut)."""
        return cut_ms is not None and self.probe_ms is not None and self.probe_ms > cut_ms

    def timing(self, regime: str, min_metered_s: float = 0.0) -> PointTiming:
        kernel = self.kernel
        if not kernel:  # every launch of it lost from a session that kept the rest
            raise InstrumentError(
                PROFILER, f"the profile lost the GPU work of all {len(self.stream)} of the point's launches"
            )
        t = summarize(kernel)
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
        t.regime = regime + CUT_SUFFIX if self.cut else regime
        t.state = state
        return t
