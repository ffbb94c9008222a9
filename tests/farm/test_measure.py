"""The measurement protocol's pure parts: stopping rules, interleaving, statistics, derived metrics."""

import random

import pytest

from farm.measure import TimingPolicy, median_ci_halfwidth, summarize, time_interleaved
from farm.metrics import NOMINAL_GPU, KernelResources, derived, occupancy
from kernels import LIBRARY_CONFIG, MatmulConfig


class FakeClock:
    """Returns preset times per launcher and records the order of every round."""

    def __init__(self, times):
        self.times = times
        self.rounds = []

    def round(self, launches, host_s):
        self.rounds.append([self.times.index(f) for f in launches])
        return [f() for f in launches]


def _constant(ms):
    return lambda: ms


def test_rounds_interleave_in_a_fresh_random_order_until_stable():
    launches = [_constant(1.0), _constant(2.0), _constant(3.0)]
    clock = FakeClock(launches)
    policy = TimingPolicy(min_reps=5, max_reps=50, target_ci=0.005, max_seconds_per_point=10)
    timings = time_interleaved(launches, [0.0] * 3, clock, policy, random.Random(0))
    # Constant times are stable at once: every launcher stops at min_reps, one launch per round.
    assert [t.reps for t in timings] == [5, 5, 5]
    assert [t.ms for t in timings] == [1.0, 2.0, 3.0]
    assert all(sorted(r) == [0, 1, 2] for r in clock.rounds)
    assert len({tuple(r) for r in clock.rounds}) > 1  # the order changes from round to round


def test_noisy_points_run_longer_and_stop_at_max_reps():
    noise = random.Random(1)
    steady, noisy = _constant(1.0), lambda: 1.0 + noise.random()
    launches = [steady, noisy]
    policy = TimingPolicy(min_reps=5, max_reps=40, target_ci=0.005, max_seconds_per_point=10)
    timings = time_interleaved(launches, [0.0, 0.0], FakeClock(launches), policy, random.Random(0))
    assert timings[0].reps == 5
    assert timings[1].reps == 40
    assert timings[1].ms_p20 < timings[1].ms < timings[1].ms_p80


def test_time_cap_stops_a_slow_point():
    launches = [lambda: 300.0 + random.random()]  # 300 ms a launch, noisy
    policy = TimingPolicy(min_reps=3, max_reps=100, target_ci=1e-9, max_seconds_per_point=1.0)
    (timing,) = time_interleaved(launches, [0.0], FakeClock(launches), policy, random.Random(0))
    assert timing.reps == 4  # 4 x 0.3 s passes the 1 s cap


@pytest.mark.parametrize(
    ("samples", "halfwidth"),
    [
        pytest.param([1.0] * 20, 0.0, id="constant"),
        pytest.param([1.0, 2.0, 3.0, 4.0, 5.0], (5.0 - 1.0) / (2 * 3.0), id="five"),
    ],
)
def test_median_confidence_interval(samples, halfwidth):
    assert median_ci_halfwidth(samples) == pytest.approx(halfwidth)


def test_summary_quantiles():
    t = summarize([float(x) for x in range(1, 11)])
    assert (t.ms, t.reps) == (5.5, 10)
    assert t.ms_p20 == pytest.approx(2.8) and t.ms_p80 == pytest.approx(8.2)


OCCUPANCY = [
    # 122 registers x 256 threads: 8 warps x ceil(122*32/256)*256 = 31232 regs -> 2 CTAs by registers;
    # 98304 B of shared memory (+1 KiB reserved) -> 2 CTAs by smem (H200, measured kernel)
    pytest.param(KernelResources(122, 98_304, 8), 2, id="128x128x64-w8-s3"),
    # 32 registers x 128 threads: 16 CTAs by registers and by threads; 16 KiB (+1 KiB) of smem: 13
    pytest.param(KernelResources(32, 16_384, 4), 13, id="small-tile-smem-bound"),
    pytest.param(KernelResources(255, 0, 8), 1, id="register-bound"),
    pytest.param(KernelResources(32, 0, 1), 32, id="cta-limit"),
]


@pytest.mark.parametrize(("resources", "expected"), OCCUPANCY)
def test_occupancy(resources, expected):
    assert occupancy(resources, NOMINAL_GPU) == expected


def test_derived_metrics_of_one_point():
    cfg = MatmulConfig(128, 128, 64, split_k=8, num_warps=8, num_stages=3)
    out = derived(512, 512, 32768, "bfloat16", cfg, NOMINAL_GPU, KernelResources(122, 98_304, 8), ms=0.05)
    assert out["tiles"] == 16 and out["programs"] == 128
    assert out["tiles_per_sm"] == pytest.approx(16 / 132)
    assert out["waves"] == pytest.approx(128 / (132 * 2))
    assert out["tflops"] == pytest.approx(2 * 512 * 512 * 32768 / 0.05e-3 / 1e12)
    assert out["operand_bytes"] == (512 * 32768 + 32768 * 512 + 512 * 512) * 2
    library = derived(512, 512, 32768, "bfloat16", LIBRARY_CONFIG, NOMINAL_GPU, None, ms=0.05)
    assert "tiles" not in library and library["tflops"] == out["tflops"]
