"""A worker's records carry the timing regime and the three times (in process, interpreter, no Ray)."""

import pytest

from db.records import Status
from farm.plan import Batch, Point
from farm.timing.policy import TimingPolicy
from kernels import MatmulConfig


@pytest.mark.parametrize("regime", ["steady", "interleaved"])
def test_records_carry_regime_and_three_times(worker, regime):
    # 40x24x48: a ragged grid of 16x16 tiles (3x2), one point of each of two variants
    points = [
        Point("tiled", "float32", 40, 24, 48, MatmulConfig(16, 16, 16, num_warps=4, num_stages=2)),
        Point(
            "splitk", "float32", 40, 24, 48, MatmulConfig(16, 16, 16, split_k=2, num_warps=4, num_stages=2)
        ),
    ]
    policy = TimingPolicy(min_reps=3, max_reps=3, regime=regime)
    out = list(worker.run_batch(Batch("float32", 40, 24, 48, points, seed=1), policy, repeats=2))
    records = [r for r in out if hasattr(r, "status")]
    timing = [p for p in out if getattr(p, "phase", "") == "timing"]
    assert [r.status for r in records] == [Status.OK, Status.OK]
    assert timing and timing[0].estimate_s > 0
    for r in records:
        assert r.timing_regime == regime and r.reps == 3
        assert r.ms > 0 and r.stream_ms > 0 and r.host_ms > 0  # one CPU wall time each, medians of 3
        assert r.ms_p20 <= r.ms <= r.ms_p80
        assert r.joules_per_launch is None and r.avg_watts is None  # no energy counter on the CPU


def test_a_batch_with_an_early_cut_stores_its_points_as_cut(worker):
    """The batch's cut_ms reaches the stop rule: under a cut no point can pass (1e-9 ms), every point
    stops once it has min_reps samples (two passes of two launches) and its regime says so."""
    points = [Point("tiled", "float32", 40, 24, 48, MatmulConfig(16, 16, 16, num_warps=4, num_stages=2))]
    policy = TimingPolicy(min_reps=4, max_reps=40, target_ci=1e-9, max_seconds_per_point=100)
    batch = Batch("float32", 40, 24, 48, points, seed=1, cut_ms=1e-9)
    (record,) = [r for r in worker.run_batch(batch, policy, repeats=2) if hasattr(r, "status")]
    assert record.status == Status.OK and record.timing_regime == "steady+cut" and record.reps == 4
