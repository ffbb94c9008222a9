"""The measurement protocol's pure parts: regimes, settling, stopping rules, statistics, kernel-time
attribution from profiler events, derived metrics. No GPU: clocks are fakes, NVML readings simulated."""

import contextlib
import itertools
import math
import random
import time
from dataclasses import dataclass

import fake_time as fake_time_module
import pytest
from fake_time import SteppedMeter, TickEvent

from farm.clock import MAX_SLEEP_US, Block, CudaClock, HostClock, Readings, head_start_us, max_block_launches
from farm.cupti import LAUNCH_LABEL, Activity, activities, busy_ms, kernel_ms_per_launch
from farm.energy import EnergyUpdates, span_joules
from farm.gpu import GpuState
from farm.metrics import NOMINAL_GPU, KernelResources, derived, occupancy
from farm.spec import SpecError, parse_spec
from farm.spec import Timing as SpecTiming
from farm.timing import estimate_seconds, time_points
from farm.timing.interleaved import time_interleaved
from farm.timing.policy import TimingPolicy
from farm.timing.request import TimingRequest
from farm.timing.samples import median_ci_halfwidth, summarize
from farm.timing.steady import SubBlock, settled, time_steady
from kernels import LIBRARY_CONFIG, MatmulConfig


class FakeClock:
    """Returns preset times per launcher and records every block: which launchers, profiled or not."""

    def __init__(self, launches, watts=None):
        self.launches = launches
        self.blocks = []
        self.watts = watts

    def run(self, launches, host_s, *, profile, gpu_s=0.0):
        self.blocks.append(([self.launches.index(f) for f in launches], profile))
        times = [f() for f in launches]
        seconds = sum(times) / 1e3
        joules = None if self.watts is None else self.watts * seconds
        return Block(times, [t * 1.1 for t in times], [0.01] * len(times), Readings(seconds, joules))

    @property
    def rounds(self):
        return [ids for ids, _ in self.blocks]


def _constant(ms):
    return lambda: ms


# -- interleaved ---------------------------------------------------------------------------------


def test_rounds_interleave_in_a_fresh_random_order_until_stable():
    launches = [_constant(1.0), _constant(2.0), _constant(3.0)]
    clock = FakeClock(launches)
    policy = TimingPolicy(
        min_reps=5, max_reps=50, target_ci=0.005, max_seconds_per_point=10, regime="interleaved"
    )
    timings = time_points(TimingRequest(launches, [0.0] * 3, clock, policy, random.Random(0)))
    # Constant times are stable at once: every launcher stops at min_reps, one launch per round.
    assert [t.reps for t in timings] == [5, 5, 5]
    assert [t.ms for t in timings] == [1.0, 2.0, 3.0]
    assert [t.stream_ms for t in timings] == pytest.approx([1.1, 2.2, 3.3])
    assert {t.regime for t in timings} == {"interleaved"}
    assert all(sorted(r) == [0, 1, 2] for r in clock.rounds)
    assert len({tuple(r) for r in clock.rounds}) > 1  # the order changes from round to round


def test_noisy_points_run_longer_and_stop_at_max_reps():
    noise = random.Random(1)
    steady, noisy = _constant(1.0), lambda: 1.0 + noise.random()
    launches = [steady, noisy]
    policy = TimingPolicy(min_reps=5, max_reps=40, target_ci=0.005, max_seconds_per_point=10)
    timings = time_interleaved(
        TimingRequest(launches, [0.0, 0.0], FakeClock(launches), policy, random.Random(0))
    )
    assert timings[0].reps == 5
    assert timings[1].reps == 40
    assert timings[1].ms_p20 < timings[1].ms < timings[1].ms_p80


def test_time_cap_stops_a_slow_point():
    launches = [lambda: 300.0 + random.random()]  # 300 ms a launch, noisy
    policy = TimingPolicy(min_reps=3, max_reps=100, target_ci=1e-9, max_seconds_per_point=1.0)
    (timing,) = time_interleaved(
        TimingRequest(launches, [0.0], FakeClock(launches), policy, random.Random(0))
    )
    assert timing.reps == 4  # 4 x 0.33 s of stream time passes the 1 s cap


def test_energy_of_a_shared_round_goes_by_kernel_time():
    launches = [_constant(1.0), _constant(3.0)]
    policy = TimingPolicy(min_reps=4, max_reps=4, regime="interleaved", min_metered_s=0.0)
    timings = time_interleaved(
        TimingRequest(launches, [0.0] * 2, FakeClock(launches, watts=600.0), policy, random.Random(0))
    )
    assert [t.avg_watts for t in timings] == pytest.approx([600.0, 600.0])
    assert [t.joules_per_launch for t in timings] == pytest.approx([0.6, 1.8])


@pytest.mark.parametrize(
    ("launch_ms", "watts", "limit_w", "stored"),
    [
        (300.0, 600.0, None, True),  # 4 launches of 0.3 s: 1.2 s metered
        (30.0, 600.0, None, False),  # 0.12 s metered: under min_metered_s (two counter updates)
        (300.0, 1084.0, 700.0, False),  # above the enforced limit: a misread counter (visit 19)
        (300.0, 690.0, 700.0, True),
    ],
    ids=["long-enough", "too-short", "above-the-limit", "at-the-limit"],
)
def test_energy_is_stored_only_from_a_long_and_physical_reading(launch_ms, watts, limit_w, stored):
    launches = [_constant(launch_ms)]
    clock = FakeClock(launches, watts=watts)
    if limit_w is not None:
        run = clock.run

        def limited(*args, **kwargs):
            block = run(*args, **kwargs)
            block.readings.power_limit_w = limit_w
            return block

        clock.run = limited
    policy = TimingPolicy(min_reps=4, max_reps=4, regime="interleaved", max_seconds_per_point=10)
    (timing,) = time_interleaved(TimingRequest(launches, [0.0], clock, policy, random.Random(0)))
    assert (timing.avg_watts is not None) is stored
    assert (timing.joules_per_launch is not None) is stored


# -- a simulated GPU under a power limit ---------------------------------------------------------

MAX_MHZ, LIMIT_W = 1980.0, 700.0


@dataclass
class Kernel:
    """A compute-bound config: `ms` at the top clock, drawing `watts` there (power ~ clock)."""

    ms: float
    watts: float

    def target_mhz(self) -> float:
        return min(MAX_MHZ, MAX_MHZ * LIMIT_W / self.watts)


class PowerLimitedGpu:
    """One power limiter shared by whatever runs: the clock relaxes towards the running kernel's
    equilibrium with time constant tau_s. A clock, with NVML-like readings per block."""

    def __init__(self, kernels, tau_s=0.2, flush_ms=0.07):
        self.kernels, self.tau_s, self.flush_ms = kernels, tau_s, flush_ms
        self.mhz = MAX_MHZ
        self.blocks = []

    def run(self, launches, host_s, *, profile, gpu_s=0.0):
        times, joules, seconds, mhz_s, mask = [], 0.0, 0.0, 0.0, 0
        for launch in launches:
            kernel = self.kernels[launch()]
            ms = kernel.ms * MAX_MHZ / self.mhz
            dt = (ms + self.flush_ms) / 1e3
            joules += kernel.watts * self.mhz / MAX_MHZ * dt
            mhz_s += self.mhz * dt
            seconds += dt
            if kernel.target_mhz() < MAX_MHZ:
                mask |= 0x4  # sw_power_cap
            self.mhz += (kernel.target_mhz() - self.mhz) * (1 - math.exp(-dt / self.tau_s))
            times.append(ms)
        self.blocks.append((len(launches), profile))
        state = GpuState(round(self.mhz), 60, mask)
        return Block(
            times, times, [0.02] * len(times), Readings(seconds, joules, mhz_s / seconds, LIMIT_W, state)
        )


def _steady_ms(kernel: Kernel) -> float:
    return kernel.ms * MAX_MHZ / kernel.target_mhz()


def test_steady_regime_times_each_config_in_its_own_steady_state():
    """Two configs at the power limit: the one that draws more runs at a lower clock on its own.
    Interleaved launch by launch they share one clock and the gain shrinks; steady keeps it."""
    kernels = [Kernel(10.0, 900.0), Kernel(9.0, 1100.0)]  # like group_m 8 vs group_m 1, in reverse
    truth = _steady_ms(kernels[1]) / _steady_ms(kernels[0])
    launches = [lambda: 0, lambda: 1]
    steady = TimingPolicy(
        min_reps=10, max_reps=60, target_ci=0.002, max_seconds_per_point=5, max_settle_s=1.5
    )
    got = time_steady(TimingRequest(launches, [1e-4] * 2, PowerLimitedGpu(kernels), steady, random.Random(0)))
    mixed = time_interleaved(
        TimingRequest(
            launches,
            [1e-4] * 2,
            PowerLimitedGpu(kernels),
            TimingPolicy(min_reps=60, max_reps=60),
            random.Random(0),
        )
    )
    assert got[1].ms / got[0].ms == pytest.approx(truth, rel=0.01)
    assert abs(mixed[1].ms / mixed[0].ms - truth) > 3 * abs(got[1].ms / got[0].ms - truth)
    assert got[0].state.sm_clock_mhz == pytest.approx(kernels[0].target_mhz(), rel=0.02)
    assert got[0].avg_watts == pytest.approx(LIMIT_W, rel=0.03) and got[0].power_limit_w == LIMIT_W
    assert got[0].joules_per_launch == pytest.approx(got[0].avg_watts * got[0].ms / 1e3)
    assert got[0].state.reasons == "sw_power_cap" and {t.regime for t in got} == {"steady"}


class NoisyGpu(PowerLimitedGpu):
    """PowerLimitedGpu whose launches vary by up to 5%, so that no point meets a tight target_ci."""

    def __init__(self, kernels):
        super().__init__(kernels)
        self.noise = random.Random(7)

    def run(self, launches, host_s, *, profile, gpu_s=0.0):
        block = super().run(launches, host_s, profile=profile, gpu_s=gpu_s)
        block.kernel_ms[:] = [ms * (1 + 0.05 * self.noise.random()) for ms in block.kernel_ms]
        return block


@pytest.mark.parametrize("regime", ["steady", "interleaved", "rest"])
@pytest.mark.parametrize("cut_ms", [3.0, None], ids=["cut-at-3ms", "no-cut"])
def test_the_early_cut_stops_a_hopeless_point_at_min_reps_and_never_the_best(regime, cut_ms):
    """A batch below the power limit whose best stored time is 1 ms, cut at 3x: the 4 ms config stops
    at min_reps and says so in its regime; the best and a 2.5 ms config (slow against the batch, under
    the cut) take every sample the stop rule asks for. Without a cut, all of them do."""
    kernels = [Kernel(1.0, 200.0), Kernel(4.0, 250.0), Kernel(2.5, 220.0)]
    policy = TimingPolicy(
        min_reps=10, max_reps=60, target_ci=1e-9, max_seconds_per_point=100, regime=regime, rest_s=0.0
    )
    launches = [lambda: 0, lambda: 1, lambda: 2]
    best, slow, under = time_points(
        TimingRequest(launches, [1e-4] * 3, NoisyGpu(kernels), policy, random.Random(0), cut_ms)
    )
    assert (best.reps, best.regime) == (60, regime) and (under.reps, under.regime) == (60, regime)
    if cut_ms is None:  # steady's blocks fill 100 ms: 25 launches of 4 ms a pass, past max_reps in three
        assert slow.reps >= 60 and slow.regime == regime
    else:
        assert (slow.reps, slow.regime) == (10, f"{regime}+cut") and slow.ms > cut_ms
    assert best.ms == pytest.approx(1.0, rel=0.05) and slow.ms == pytest.approx(4.0, rel=0.05)


def test_below_the_power_limit_one_short_sub_block_settles():
    gpu = PowerLimitedGpu([Kernel(2.0, 300.0)])
    policy = TimingPolicy(min_reps=10, max_reps=20, target_ci=0.5)
    (timing,) = time_steady(TimingRequest([lambda: 0], [1e-4], gpu, policy, random.Random(0)))
    # one launch to size blocks; pass 1: one 20 ms sub-block, the measured block; pass 2: settled
    # below the limit in pass 1, so a measured block alone
    assert [p for _, p in gpu.blocks] == [False, False, True, True]
    assert [n for n, _ in gpu.blocks][1] == round(0.02 / 2.07e-3)
    assert timing.reps == 20 and timing.ms == pytest.approx(2.0)


def test_at_the_power_limit_settling_lasts_until_the_clock_stops_moving():
    gpu = PowerLimitedGpu([Kernel(5.0, 1000.0)], tau_s=0.2)
    policy = TimingPolicy(min_reps=10, max_reps=10, target_ci=0.5, min_passes=1, max_settle_s=1.5)
    (timing,) = time_steady(TimingRequest([lambda: 0], [1e-4], gpu, policy, random.Random(0)))
    settle_launches = sum(n for n, profiled in gpu.blocks if not profiled)
    # the clock falls from 1980 towards 1386 MHz with a 0.2 s time constant: several 100 ms sub-blocks
    assert 0.3 < settle_launches * 5.07e-3 * MAX_MHZ / 1386 < policy.max_settle_s + 0.2
    assert timing.ms == pytest.approx(_steady_ms(Kernel(5.0, 1000.0)), rel=0.01)


def test_below_the_limit_every_pass_shares_measured_blocks():
    """A batch below the limit: one block sizes, one screens (every config back to back, no limiter),
    then every pass shares measured blocks, each config's launches back to back, every sample to its
    own config; no config pays its own settling."""
    gpu = PowerLimitedGpu([Kernel(2.0, 300.0), Kernel(1.0, 200.0), Kernel(3.0, 400.0)])
    order = []
    run = gpu.run

    def recording(launches, host_s, *, profile, gpu_s=0.0):
        order.append(([f() for f in launches], profile))
        return run(launches, host_s, profile=profile, gpu_s=gpu_s)

    gpu.run = recording
    policy = TimingPolicy(min_reps=12, max_reps=12, target_ci=0.5, min_passes=3)
    launches = [lambda: 0, lambda: 1, lambda: 2]
    timings = time_steady(TimingRequest(launches, [1e-4] * 3, gpu, policy, random.Random(1)))
    assert order[0] == ([0, 1, 2], False)  # one launch each, to size blocks
    screen, profiled = order[1], [p for _, p in order[2:]]
    assert screen[1] is False and sorted(set(screen[0])) == [0, 1, 2] and all(profiled)
    shared = [ids for ids, profiled in order[2:] if len(set(ids)) > 1]
    assert len(shared) == 3  # passes one to three
    for ids in shared:
        runs = [ids[0]] + [b for a, b in itertools.pairwise(ids) if a != b]
        assert sorted(runs) == [0, 1, 2] and all(ids.count(i) == 4 for i in runs)
    assert [t.ms for t in timings] == pytest.approx([2.0, 1.0, 3.0])
    assert [t.reps for t in timings] == [12, 12, 12]


def test_a_batch_with_a_config_at_the_limit_settles_each_config_alone():
    """The screen saw the limiter act (one config draws over the limit): every config settles and
    is measured alone in pass one; the one below the limit then shares blocks, the other settles."""
    gpu = PowerLimitedGpu([Kernel(2.0, 300.0), Kernel(5.0, 1000.0)], tau_s=0.2)
    policy = TimingPolicy(
        min_reps=10, max_reps=10, target_ci=0.5, min_passes=2, max_seconds_per_point=10, max_settle_s=1.5
    )
    timings = time_steady(TimingRequest([lambda: 0, lambda: 1], [1e-4] * 2, gpu, policy, random.Random(0)))
    unprofiled = [n for n, p in gpu.blocks if not p]
    assert len(unprofiled) >= 2 + 1 + 3  # sizing, screen; 1 sub-block below the limit, >= 3 at it
    # (config 0's time is not asserted: this fake's clock climbs back from config 1's limit with
    # the same 0.2 s time constant it fell with, so config 0 first runs slow)
    assert timings[1].ms == pytest.approx(_steady_ms(Kernel(5.0, 1000.0)), rel=0.01)
    assert [t.state.reasons for t in timings] == ["", "sw_power_cap"]


def test_at_the_power_limit_every_pass_settles_again():
    """Another config ran in between and moved the shared clock: a config at the limit settles
    again in each pass, unlike one below it."""
    gpu = PowerLimitedGpu([Kernel(5.0, 1000.0)], tau_s=0.2)
    # a stop rule one block cannot meet (300 ms holds 42 launches of 7.2 ms at 1386 MHz): more passes
    policy = TimingPolicy(
        min_reps=10, max_reps=80, target_ci=1e-9, min_passes=2, max_seconds_per_point=10, max_settle_s=1.5
    )
    (timing,) = time_steady(TimingRequest([lambda: 0], [1e-4], gpu, policy, random.Random(0)))
    profiled = [p for _, p in gpu.blocks]
    assert profiled.count(True) == 2 and profiled[-1] and profiled[-2] is False
    assert [n for n, p in gpu.blocks if p] == [42, 42] and timing.reps == 84  # max_reps: done


def test_at_the_power_limit_one_pass_when_the_stop_rule_allows():
    """One long measured block at the limit, no second pass where its samples already meet the
    stop rule (min_passes is for configs below the limit)."""
    gpu = PowerLimitedGpu([Kernel(5.0, 1000.0)], tau_s=0.2)
    policy = TimingPolicy(
        min_reps=10, max_reps=100, target_ci=0.01, min_passes=2, max_seconds_per_point=10, max_settle_s=1.5
    )
    (timing,) = time_steady(TimingRequest([lambda: 0], [1e-4], gpu, policy, random.Random(0)))
    assert [n for n, p in gpu.blocks if p] == [42] and timing.reps == 42


def test_at_the_power_limit_by_default_nothing_settles_and_the_block_gives_every_sample():
    """The default at the limit (visits 28-29): one 20 ms sub-block finds the limit, then one
    300 ms measured block at once, every launch of it a sample, past max_reps (a 0.5 ms kernel:
    about 380 launches of 0.78 ms); the sub-block and the block are metered, so energy is stored
    (visit 22: blocks capped at 100 launches left 587 of 588 rows without it)."""
    kernel = Kernel(0.5, 1000.0)
    gpu = PowerLimitedGpu([kernel], tau_s=0.02)  # a limiter faster than the block: its clock is steady
    policy = TimingPolicy(min_reps=10, max_reps=100, target_ci=0.01, min_passes=2, max_seconds_per_point=10)
    (timing,) = time_steady(TimingRequest([lambda: 0], [1e-4], gpu, policy, random.Random(0)))
    sizing, screen, sub_block, measured = gpu.blocks
    assert [sizing[1], screen[1], sub_block[1], measured[1]] == [False, False, False, True]
    assert sub_block[0] == round(0.02 / ((kernel.ms + gpu.flush_ms) / 1e3))
    # sized from the sub-block's median launch, taken while the clock fell: about 300 ms
    assert measured[0] * (_steady_ms(kernel) + gpu.flush_ms) / 1e3 == pytest.approx(0.3, rel=0.1)
    assert timing.reps == measured[0] and timing.ms == pytest.approx(_steady_ms(kernel), rel=0.01)
    assert timing.avg_watts == pytest.approx(LIMIT_W, rel=0.03) and timing.joules_per_launch is not None


def test_limit_passes_sets_how_often_a_config_at_the_limit_is_measured():
    """A spec can ask for more passes at the limit (repeatability for sweep time): each pass settles
    again and adds a measured block, though one block already met the stop rule."""
    gpu = PowerLimitedGpu([Kernel(5.0, 1000.0)], tau_s=0.2)
    text = "name: t\ndtypes: [bfloat16]\nvariants: [tiled]\nshapes: [{m: 8, n: 8, k: 8}]\n"
    spec = parse_spec(text + "timing: {limit_passes: 3, max_settle_s: 1.5}\n")
    policy = TimingPolicy.from_spec(spec.timing).model_copy(
        update={"target_ci": 0.01, "max_seconds_per_point": 10}
    )
    assert policy.limit_passes == 3
    with pytest.raises(SpecError, match=r"timing.limit_passes: Input should be greater than 0"):
        parse_spec(text + "timing: {limit_passes: 0}\n")
    (timing,) = time_steady(TimingRequest([lambda: 0], [1e-4], gpu, policy, random.Random(0)))
    assert [n for n, p in gpu.blocks if p] == [42, 42, 42] and timing.reps == 126


def test_settling_stops_at_max_settle_s():
    gpu = PowerLimitedGpu([Kernel(5.0, 1000.0)], tau_s=1e6)  # a limiter that never acts
    gpu.run = _drifting(gpu.run)
    policy = TimingPolicy(min_reps=5, max_reps=5, min_passes=1, max_settle_s=0.5)
    time_steady(TimingRequest([lambda: 0], [1e-4], gpu, policy, random.Random(0)))
    settle_s = sum(n for n, profiled in gpu.blocks if not profiled) * 5.07e-3
    assert 0.5 <= settle_s < 0.5 + 0.11


def _drifting(run):
    """Each block's mean clock 5% below the last: never settled."""
    step = iter(range(1000))

    def wrapped(launches, host_s, *, profile, gpu_s=0.0):
        block = run(launches, host_s, profile=profile)
        block.readings.sm_clock_mhz = 1980 * 0.95 ** next(step)
        return block

    return wrapped


def _sub(seconds, mhz, watts=690.0, mask=0x4, median_ms=1.0):
    return SubBlock(Readings(seconds, watts * seconds, mhz, LIMIT_W, GpuState(int(mhz), 60, mask)), median_ms)


SETTLED = [
    pytest.param([_sub(0.02, 1980, watts=300, mask=0)], True, id="below-limit-one-block"),
    pytest.param([_sub(0.002, 1980, watts=300, mask=0)], False, id="too-short-to-judge"),
    pytest.param([_sub(0.02, 1700, watts=680, mask=0)], False, id="near-limit-by-power-alone"),
    pytest.param([_sub(0.1, 1600)], False, id="at-limit-one-block"),
    pytest.param([_sub(0.1, 1600), _sub(0.1, 1540)], False, id="at-limit-clock-falling"),
    pytest.param([_sub(0.3, 1540), _sub(0.1, 1534)], True, id="at-limit-clock-flat"),
    pytest.param([_sub(0.1, 1540), _sub(0.1, 1534)], False, id="at-limit-clock-flat-too-soon"),
    pytest.param([_sub(0.3, 1540), _sub(0.1, 1525)], False, id="at-limit-one-nvml-step"),
    pytest.param([_sub(0.002, 1531), _sub(0.1, 1531)], False, id="previous-too-short"),
    pytest.param(
        [
            SubBlock(Readings(0.1), 2.00),
            SubBlock(Readings(0.1), 2.005),
        ],
        True,
        id="no-nvml-times-agree",
    ),
    pytest.param(
        [SubBlock(Readings(0.1), 2.0), SubBlock(Readings(0.1), 2.1)], False, id="no-nvml-times-move"
    ),
]


@pytest.mark.parametrize(("history", "expected"), SETTLED)
def test_settled(history, expected):
    assert settled(history, TimingPolicy()) is expected


def test_rest_regime_launches_once_per_rest():
    launches = [_constant(1.5), _constant(0.5)]
    clock = FakeClock(launches)
    policy = TimingPolicy(
        min_reps=3, max_reps=50, target_ci=1e-9, max_seconds_per_point=0.1, regime="rest", rest_s=0.0
    )
    timings = time_points(TimingRequest(launches, [0.0] * 2, clock, policy, random.Random(0)))
    assert all(len(ids) == 1 and profiled for ids, profiled in clock.blocks)
    assert [t.reps for t in timings] == [3, 3] and {t.regime for t in timings} == {"rest"}


def test_policy_from_spec_and_unknown_regime():
    policy = TimingPolicy.from_spec(SpecTiming(regime="interleaved", max_settle_s=0.7, min_reps=4))
    assert (policy.regime, policy.max_settle_s, policy.min_reps) == ("interleaved", 0.7, 4)
    assert TimingPolicy.from_spec(SpecTiming()).regime == "steady"
    with pytest.raises(ValueError, match="not one of steady, interleaved, rest"):
        TimingPolicy(regime="burst")
    spec = "name: t\ndtypes: [bfloat16]\nvariants: [tiled]\nshapes: [{m: 8, n: 8, k: 8}]\n"
    spec += "timing: {regime: burst}\n"
    with pytest.raises(
        SpecError, match=r"<spec>:5: timing.regime: Input should be 'steady', 'interleaved' or 'rest'"
    ):
        parse_spec(spec)


@pytest.mark.parametrize("regime", ["steady", "interleaved", "rest"])
def test_estimate_bounds_a_point(regime):
    policy = TimingPolicy(regime=regime)
    assert estimate_seconds(policy, 1e-4) >= min(
        policy.max_seconds_per_point, policy.min_reps * policy.rest_s
    )


# -- blocks: head start and kernel time ----------------------------------------------------------


@pytest.mark.parametrize(
    ("host_us", "gpu_us"),
    [(3.0, 0.0), (76.0, 0.0), (950.0, 0.0), (76.0, 30.0), (60.0, 59.0)],
    ids=["tiny", "splitk-launcher", "slow-host", "splitk-gpu-known", "nearly-even"],
)
def test_the_longest_block_fits_its_head_start(host_us, gpu_us):
    host, gpu = host_us / 1e6, gpu_us / 1e6
    n = max_block_launches(host, 1.0, gpu)
    assert head_start_us([host] * n, 1.0, gpu) < MAX_SLEEP_US
    if n < 10_000:
        assert head_start_us([host] * (n + 1), 1.0, gpu) >= MAX_SLEEP_US * 0.99


def test_a_gpu_slower_than_the_host_needs_only_the_first_launch_ahead():
    # 1 ms kernels, 60 us of host time each: 100 launches sleep 1.5 x 80 us + 100 us, not 12 ms
    assert head_start_us([60e-6] * 100, 1.0, 1e-3) == pytest.approx(1.5 * 80 + 100)
    assert head_start_us([60e-6] * 100) == pytest.approx(1.5 * 100 * 80 + 100)
    assert max_block_launches(60e-6, 1.0, 1e-3) == 10_000


def Ev(name, corr, start, end, is_user_annotation=False):
    """A host-side profiler event."""
    return Activity(name, corr, start, end, cpu=True, annotation=is_user_annotation)


def _gpu(name, corr, start, dur):
    return Activity(name, corr, start, start + dur, cpu=False)


def test_kernel_time_sums_each_launchs_kernels_and_drops_flush_and_sleep():
    events = [
        Ev("cudaLaunchKernel", 1, 0.0, 2.0),  # the sleep, outside every launch
        Ev("cudaLaunchKernel", 2, 3.0, 4.0),  # flush of launch 0
        Ev("farm_launch_0", 900, 5.0, 60.0, is_user_annotation=True),
        Ev("cuLaunchKernelEx", 3, 10.0, 12.0),
        Ev("cudaLaunchKernel", 4, 40.0, 41.0),  # launch 0's cast
        Ev("cudaLaunchKernel", 5, 61.0, 62.0),  # flush of launch 1
        Ev("farm_launch_1", 901, 63.0, 150.0, is_user_annotation=True),
        Ev("cudaLaunchKernel", 6, 64.0, 65.0),  # zero
        Ev("cuLaunchKernelEx", 7, 80.0, 82.0),  # split kernel
        Ev("cudaLaunchKernel", 8, 120.0, 121.0),  # cast
        Ev("farm_launch_2", 902, 151.0, 160.0, is_user_annotation=True),  # nothing reached the GPU
        _gpu("spin_kernel", 1, 200.0, 900.0),
        _gpu("FillFunctor<int>", 2, 1100.0, 70.0),
        _gpu("matmul_kernel", 3, 1170.0, 12.5),
        _gpu("cast", 4, 1183.0, 1.5),
        _gpu("FillFunctor<int>", 5, 1185.0, 70.0),
        _gpu("FillFunctor<float>", 6, 1255.0, 2.0),
        _gpu("splitk_kernel", 7, 1258.0, 10.0),
        _gpu("cast", 8, 1270.0, 1.25),
        _gpu("farm_launch_1", 901, 1255.0, 17.0),  # the GPU-side span of an annotation
    ]
    assert kernel_ms_per_launch(events, 3) == pytest.approx([0.014, 0.01325, None])


def test_kernel_time_falls_back_on_the_gpu_side_span_without_runtime_events():
    events = [
        Ev("farm_launch_0", 900, 5.0, 60.0, is_user_annotation=True),
        Ev("farm_launch_1", 901, 63.0, 150.0, is_user_annotation=True),
        _gpu("FillFunctor<int>", 2, 1100.0, 70.0),  # flush: before any span
        _gpu("farm_launch_0", 900, 1170.0, 15.0),
        _gpu("matmul_kernel", 3, 1170.0, 12.5),
        _gpu("cast", 4, 1183.0, 2.0),
        _gpu("FillFunctor<int>", 5, 1186.0, 70.0),
        _gpu("farm_launch_1", 901, 1256.0, 14.0),
        _gpu("splitk_kernel", 7, 1256.0, 10.0),
    ]
    assert kernel_ms_per_launch(events, 2) == pytest.approx([0.0145, 0.010])


def test_kernel_time_counts_overlapping_kernels_once():
    """A kernel launched dependent on the one before it (split-K's reduce, programmatic dependent launch)
    starts while that one runs and waits: CUPTI's duration for it covers the wait. Launch 0: product
    1170-1195, reduce resident from 1171, done at 1199: 29 us of GPU, not 25 + 28. Launch 1 runs its
    kernels one after another, a gap between them: their durations add."""
    events = [
        Ev("farm_launch_0", 900, 5.0, 60.0, is_user_annotation=True),
        Ev("cuLaunchKernelEx", 3, 10.0, 12.0),  # the product
        Ev("cuLaunchKernelEx", 4, 20.0, 22.0),  # the reduce, launched dependent
        Ev("farm_launch_1", 901, 63.0, 150.0, is_user_annotation=True),
        Ev("cuLaunchKernelEx", 7, 80.0, 82.0),
        Ev("cuLaunchKernelEx", 8, 120.0, 121.0),
        _gpu("splitk_product", 3, 1170.0, 25.0),
        _gpu("reduce_splits", 4, 1171.0, 28.0),
        _gpu("splitk_product", 7, 1300.0, 25.0),
        _gpu("reduce_splits", 8, 1330.0, 4.0),
    ]
    assert kernel_ms_per_launch(events, 2) == pytest.approx([0.029, 0.029])
    assert busy_ms([(0.0, 10.0), (2.0, 5.0), (8.0, 12.0), (20.0, 21.0)]) == pytest.approx(0.013)


def test_raw_profiler_events_read_as_torchs_own_events():
    """`activities` reads Kineto's raw results (torch's events() took 3.4-4.0 s per interleaved
    batch on an H200); on a CPU session both readings give the same ranges and runtime calls."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(3):
            with record_function(f"{LAUNCH_LABEL}{i}"):
                (x @ x).sum()
    raw = activities(prof)

    class Parsed:  # the same session without raw results: the events() path
        def events(self):
            return prof.events()

    parsed = activities(Parsed())

    def ranges(events):
        return sorted((e.name, e.cpu, e.annotation) for e in events if e.name.startswith(LAUNCH_LABEL))

    assert ranges(raw) == ranges(parsed) == [(f"{LAUNCH_LABEL}{i}", True, True) for i in range(3)]
    durations = {e.name: e.end_us - e.start_us for e in raw if e.name.startswith(LAUNCH_LABEL)}
    for e in parsed:
        if e.name.startswith(LAUNCH_LABEL):
            assert durations[e.name] == pytest.approx(e.end_us - e.start_us, abs=1.0)
    assert {e.name for e in raw} >= {"aten::matmul", "aten::sum"}


# -- statistics and derived metrics --------------------------------------------------------------


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


def test_a_host_clock_measures_without_settling():
    """The interpreter has no power limiter: the steady regime goes straight to measured blocks."""

    calls = []
    policy = TimingPolicy(min_reps=4, max_reps=4)
    (timing,) = time_steady(
        TimingRequest([lambda: calls.append(1)], [0.0], HostClock(), policy, random.Random(0))
    )
    assert len(calls) == 4 and timing.reps == 4 and timing.ms == timing.stream_ms == timing.host_ms


# -- CudaClock's plumbing on the CPU: CUDA events, sleep and sync faked, the real torch.profiler -----


class FakeEvent:
    busy_s = 0.0  # how long after it is recorded the fake GPU reaches it

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def query(self):
        return time.perf_counter() >= self.t + self.busy_s

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


class FakeMeter:
    """A GPU drawing 700 W whose energy counter moves every `period_s` of wall time (an H200's:
    about 0.1 s), a clock at 1500 MHz held by the power cap. For tests that only need the counter to
    move; a test of a block's energy reading runs on fake_time.SteppedMeter, whose steps a loaded
    machine cannot shift against the poller's reads."""

    def __init__(self, period_s: float = 0.1):
        self.period_s, self.t0 = period_s, time.perf_counter()

    def state(self):
        return GpuState(1500, 61, 0x4)

    def energy_mj(self):
        time.sleep(0.002)  # a read takes 3.5-4.3 ms on an H200 (visit 38), the GIL released
        steps = (time.perf_counter() - self.t0) // self.period_s
        return 10_000 + round(steps * self.period_s * 700_000)

    def power_limit_w(self):
        return 700.0


NO_CUDA_PROFILING = pytest.mark.filterwarnings("ignore:CUDA is not available, disabling CUDA profiling")


@pytest.fixture
def cpu_cuda_clock(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    return CudaClock(torch.device("cpu"), l2_bytes=2**20, meter=FakeMeter(period_s=0.001))


@pytest.fixture
def fake_time(monkeypatch):
    """farm.clock and farm.energy on one fake time (tests/farm/fake_time.py): the clock's waits, the
    events, the poller's stamps and the counter's steps, none of them wall time."""
    return fake_time_module.install(monkeypatch)


def _stepped_clock(fake_time, phase_s: float) -> CudaClock:
    """A CudaClock whose NVML draws 700 W, its counter moving every 0.1 s from `phase_s` on."""
    import torch

    meter = SteppedMeter(fake_time, period_s=0.1, phase_s=phase_s)
    return CudaClock(torch.device("cpu"), l2_bytes=2**20, meter=meter)


@NO_CUDA_PROFILING
@pytest.mark.parametrize(
    ("phase_s", "energy_s"),
    [pytest.param(0.03, 0.3, id="four-updates-inside"), pytest.param(0.08, 0.2, id="three-updates-inside")],
)
def test_cuda_clock_blocks_read_the_meter(fake_time, phase_s, energy_s):
    """A 0.35 s block of a GPU at 700 W whose counter moves every 0.1 s: the energy of its whole
    updates seen inside the block, over the time between them (its two ends would read 4 or 3
    updates over 0.35 s: 800 or 600 W; the whole updates over the block's time, 600 or 400 W)."""
    import torch

    clock = _stepped_clock(fake_time, phase_s)
    TickEvent.busy_s = 0.35
    calls = []
    block = clock.run([lambda: calls.append(torch.ones(3))] * 4, [1e-5] * 4, profile=False)
    assert len(calls) == 4 and len(block.stream_ms) == len(block.kernel_ms) == len(block.host_ms) == 4
    r = block.readings
    assert r.seconds == pytest.approx(0.35)
    assert r.watts == pytest.approx(700.0, rel=0.03) and r.energy_s == pytest.approx(energy_s)
    assert r.sm_clock_mhz == 1500 and r.power_limit_w == 700.0
    assert r.at_power_limit(0.95) and r.state.reasons == "sw_power_cap"


@NO_CUDA_PROFILING
@pytest.mark.parametrize("phase_s", [0.03, 0.08], ids=["two-updates-inside", "one-update-inside"])
def test_a_block_shorter_than_two_counter_updates_has_no_energy(fake_time, phase_s):
    """A 0.15 s block sees one or two updates of the 0.1 s counter: one whole interval at most, and a
    split update would pass for a whole one (farm.energy.MIN_ENERGY_UPDATES)."""
    clock = _stepped_clock(fake_time, phase_s)
    TickEvent.busy_s = 0.15
    block = clock.run([lambda: None], [1e-5], profile=False)
    assert block.readings.seconds == pytest.approx(0.15)
    assert block.readings.joules is None and block.readings.watts is None


@NO_CUDA_PROFILING
def test_a_launch_that_raises_stops_the_energy_poller(fake_time):
    clock = _stepped_clock(fake_time, 0.03)

    def broken():
        raise RuntimeError("out of resources")

    with pytest.raises(RuntimeError):
        clock.run([broken], [1e-5], profile=False)
    (poller,) = fake_time.pollers
    poller.thread.join(timeout=10)  # a poller left running reads on: its thread never ends
    assert not poller.thread.is_alive()  # no thread reads the counter any more


def _poll_block(start_s: float, seconds: float, period_s: float = 0.1, poll_s: float = 0.0035):
    """A block of `seconds` at 700 W polled every poll_s, the counter stepping every period_s from
    0: (watts between whole updates, watts from the block's two ends)."""

    def counter(t: float) -> int:
        return round((t // period_s) * period_s * 700_000)

    updates = EnergyUpdates()
    t = start_s
    while t <= start_s + seconds:
        updates.see(t, counter(t))
        t += poll_s
    reading = updates.reading()
    ends = (counter(start_s + seconds) - counter(start_s)) / 1e3 / seconds
    return (reading[0] / reading[1] if reading else None), ends


def test_whole_counter_updates_measure_a_block_at_any_phase():
    """Visit 38 on an H200: one steady matmul's 0.33 s blocks read 623-806 W from their two ends
    (three or four updates of the 100 ms counter inside), 662-720 W between whole updates."""
    phases = [i * 0.01 for i in range(10)]
    whole, ends = zip(*(_poll_block(phase, 0.32) for phase in phases), strict=True)
    assert all(w == pytest.approx(700.0, rel=0.025) for w in whole)
    assert max(abs(e / 700.0 - 1) for e in ends) > 0.15  # what a block's two ends read
    assert _poll_block(0.05, 0.15)[0] is None  # one whole interval: a split update would pass


def test_energy_updates_ignore_a_meter_without_a_counter():
    updates = EnergyUpdates()
    for t in range(5):
        updates.see(t * 0.1, None)
    assert updates.reading() is None


@NO_CUDA_PROFILING
def test_cuda_clock_on_the_cpu_keeps_stream_times_as_kernel_times(cpu_cuda_clock):
    """No GPU here: the profiler records no kernels, so every launch keeps its stream time (on a GPU a
    session that lost launches is the instrument's fault: test_a_session_that_lost_launches_*)."""
    launches = [lambda: time.sleep(0.001), lambda: time.sleep(0.002)]
    with cpu_cuda_clock.profiled():
        first = cpu_cuda_clock.run(launches, [1e-3] * 2, profile=True)
        second = cpu_cuda_clock.run(launches[:1], [1e-3], profile=True)
    assert first.kernel_ms == first.stream_ms and second.kernel_ms == second.stream_ms
    assert first.stream_ms[0] >= 1.0 and first.stream_ms[1] >= 2.0  # a sleep lasts at least as asked
    policy = TimingPolicy(min_reps=4, max_reps=4, regime="interleaved", min_metered_s=0.0)
    timings = time_points(TimingRequest(launches, [1e-3] * 2, cpu_cuda_clock, policy, random.Random(0)))
    assert [t.reps for t in timings] == [4, 4] and timings[0].ms >= 1.0 and timings[1].ms >= 2.0
    assert timings[0].state.sm_clock_mhz == 1500 and timings[0].avg_watts > 0


@pytest.mark.parametrize(
    ("before", "after", "joules"),
    [
        pytest.param(1000, 1500, 0.5, id="ticked"),
        pytest.param(1000, 1000, None, id="did-not-tick"),
        pytest.param(None, 1500, None, id="no-counter"),
    ],
)
def test_block_energy_is_unknown_where_the_counter_did_not_tick(before, after, joules):

    assert span_joules(before, after) == joules


class SessionClock(FakeClock):
    """FakeClock with a profiler session and host-time blocks, which record whether a session was open."""

    def __init__(self, launches, host_ms):
        super().__init__(launches)
        self.in_session, self.host_calls, self.host_ms = False, [], host_ms

    @contextlib.contextmanager
    def profiled(self):
        self.in_session = True
        try:
            yield
        finally:
            self.in_session = False

    def host_times(self, launch, n=30):
        self.host_calls.append((self.launches.index(launch), self.in_session, n))
        return [self.host_ms[self.launches.index(launch)]] * n


@pytest.mark.parametrize(
    ("regime", "calls"),
    [("steady", [18, 9]), ("interleaved", [30, 30]), ("rest", [30, 30])],
    ids=["steady", "interleaved", "rest"],
)
def test_host_time_comes_from_a_block_outside_the_profiler_session(regime, calls):
    """The blocks' host times (0.01 ms in FakeClock) are replaced by each point's own host-time block,
    taken once the session has closed: what an eager caller's host pays, not the profiler's cost. The
    block holds 20 ms of GPU work where the launch time is known (FakeClock's stream times of 1.1 and
    2.2 ms: 18 and 9 calls), else 30 calls."""
    launches = [_constant(1.0), _constant(2.0)]
    clock = SessionClock(launches, host_ms=[0.04, 0.09])
    policy = TimingPolicy(min_reps=3, max_reps=3, regime=regime, rest_s=0.0, energy_window_s=0.0)
    timings = time_points(TimingRequest(launches, [0.0] * 2, clock, policy, random.Random(0)))
    assert [t.host_ms for t in timings] == pytest.approx([0.04, 0.09])
    assert sorted(clock.host_calls) == [(0, False, calls[0]), (1, False, calls[1])]  # no session open


def test_host_times_wait_for_running_compiles_and_hold_new_ones_back():
    """`QuietHost`: a compile that runs when host times are asked for ends first; one asked for while
    they are taken starts only after: no Python thread takes the GIL from the queueing thread."""
    import threading
    import time as clock_time

    from farm.quiet_host import QuietHost

    quiet, log = QuietHost(), []

    def compile_one(i):
        with quiet.compiling():
            log.append(("compile", i))
            clock_time.sleep(0.1)
            log.append(("compiled", i))

    running = threading.Thread(target=compile_one, args=(1,))
    running.start()
    while not log:
        clock_time.sleep(0.001)
    with quiet.quiet():
        log.append(("host times",))
        held = threading.Thread(target=compile_one, args=(2,))
        held.start()
        clock_time.sleep(0.05)
        log.append(("host times done",))
    running.join(), held.join()
    assert log == [
        ("compile", 1),
        ("compiled", 1),
        ("host times",),
        ("host times done",),
        ("compile", 2),
        ("compiled", 2),
    ]
