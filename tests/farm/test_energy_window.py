"""Every point's own energy window: its launches alone, back to back, read by NVML's energy counter
after the point's samples were taken. CudaClock on the CPU (test_interleaved_timing's fake events,
the real torch.profiler) and an NVML whose power follows the config that launched last."""

import math
import random
import sys
import threading
import time

import pytest
from test_interleaved_timing import FakeEvent

import farm.clock
from farm.clock import CudaClock, Readings
from farm.energy import ENERGY_WINDOW_S
from farm.gpu import GpuState
from farm.spec import SpecError, parse_spec
from farm.spec import Timing as SpecTiming
from farm.timing import estimate_seconds, time_points
from farm.timing.own_blocks import energy_windows
from farm.timing.policy import TimingPolicy
from farm.timing.request import TimingRequest
from farm.timing.samples import PointSamples

pytestmark = pytest.mark.filterwarnings("ignore:CUDA is not available, disabling CUDA profiling")

# The fake counter's step (an H200's: about 0.1 s): longer than the 20 ms screen, so that no
# block of samples reads power (a short block's stray reading could put a config at the limit).
STEP_S = 0.03
# Windows of 10 steps (ENERGY_WINDOW_S: 3.5 steps of an H200's), stored from min_metered_s's 0.15 s
# of readings: 5 steps, which the 1-2 ms blocks of the rest regime do not reach even where a loaded
# machine stretches one past 3 steps.
WINDOW_S = 0.3
# A step's time is known to a poll: 0.2 ms a read here, but 10-20 ms where other work on a
# loaded 2-core test machine holds the poller thread back (0.3 s windows read 8% off at a load
# of 5.5): far from mixing configs 1.5-3x apart.
TOLERANCE = 0.1
LIMIT_W = 700.0


class ConfigPowerMeter:
    """NVML on a GPU below its 700 W limit at 1500 MHz, drawing the power of the config that
    launched last (`draw`). Its energy counter moves every STEP_S to the energy at that moment (an
    H200's every 0.1 s), so a reading's time is known to a poll; a read takes 0.2 ms with the GIL
    released, as NVML's does (3.5-4.3 ms on an H200)."""

    def __init__(self):
        self.frozen = False  # a counter that never moves
        self._lock = threading.Lock()
        self.watts, self.mj = 0.0, 10_000.0
        self.t = time.perf_counter()
        self.step = self.t // STEP_S  # the last step the counter shows
        self.shown = 10_000

    def _advance(self) -> None:
        now = time.perf_counter()
        step = now // STEP_S
        if step > self.step and not self.frozen:  # the energy at the last step's boundary
            self.shown = int(self.mj + self.watts * (step * STEP_S - self.t) * 1e3)
        self.step = step
        self.mj += self.watts * (now - self.t) * 1e3
        self.t = now

    def draw(self, watts: float) -> None:
        with self._lock:
            self._advance()
            self.watts = watts

    def energy_mj(self) -> int:
        with self._lock:
            self._advance()
            shown = self.shown
        time.sleep(0.0002)
        return shown

    def state(self) -> GpuState:
        return GpuState(1500, 55, 0)

    def power_limit_w(self) -> float:
        return LIMIT_W


@pytest.fixture
def clock(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(farm.clock, "MIN_FLUSH_BYTES", 2**20)  # a CPU zero_ of 256 MiB per launch: slow
    monkeypatch.setattr(FakeEvent, "busy", 0)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # the poller thread waits 0.1 ms for the GIL, not 5 ms
    yield CudaClock(torch.device("cpu"), l2_bytes=2**19, meter=ConfigPowerMeter())
    sys.setswitchinterval(interval)


class Config:
    """A launcher of `ms` drawing `watts` (`window_watts` inside an energy window); logs each
    launch as (the config whose window is open or None, itself)."""

    def __init__(self, index, meter, log, ms: float, watts: float, window_watts: float | None = None):
        self.index, self.meter, self.log, self.ms, self.watts = index, meter, log, ms, watts
        self.window_watts = watts if window_watts is None else window_watts
        self.window: list[int | None] = [None]  # shared by a batch's configs

    def __call__(self):
        in_window = self.window[0] is not None
        self.meter.draw(self.window_watts if in_window else self.watts)
        self.log.append((self.window[0], self.index))
        time.sleep(self.ms / 1e3)


def _configs(clock, watts, ms=(1.0, 2.0, 1.5), window_watts=None):
    """The batch's configs, the launch log and the windows run: (config, Readings)."""
    log, open_window = [], [None]
    configs = [
        Config(i, clock.meter, log, m, w, window_watts)
        for i, (m, w) in enumerate(zip(ms, watts, strict=True))
    ]
    for c in configs:
        c.window = open_window
    window, windows = clock.energy_window, []

    def spied(launch, host_s, seconds, gpu_s=0.0):
        open_window[0] = launch.index
        try:
            readings = window(launch, host_s, seconds, gpu_s)
        finally:
            open_window[0] = None
        windows.append((launch.index, readings))
        return readings

    clock.energy_window = spied
    return configs, log, windows


def _policy(regime="steady", energy_window_s=WINDOW_S, reps=6):
    return TimingPolicy(
        min_reps=reps,
        max_reps=reps,
        regime=regime,
        rest_s=0.001,
        # Below the limit whatever a short block's energy reads (a poller held back on a loaded
        # machine can read a 20 ms block at kilowatts): the fake's throttle bits decide. And one
        # launch of 1 ms is long enough to judge by: on a loaded 2-core machine a 0.2 ms sleep can
        # take 15 ms once, and the screen sized by it came out under the 10 ms it needs.
        power_headroom=math.inf,
        first_sub_block_s=0.001,
        energy_window_s=energy_window_s,
    )


@pytest.mark.parametrize("regime", ["steady", "interleaved", "rest"])
def test_every_point_reads_its_own_power_from_its_own_window(clock, regime):
    """Three configs below the limit drawing 200, 400 and 600 W: once every point is timed, each
    takes a window of its launches alone (so its power is its own: blocks shared with the others
    would mix them), filling the window's time; the window's power is the point's avg_watts, and
    joules_per_launch that power over its kernel time. No window launch is a sample."""
    watts = [200.0, 400.0, 600.0]
    configs, log, windows = _configs(clock, watts)
    timings = time_points(TimingRequest(configs, [1e-4] * 3, clock, _policy(regime), random.Random(0)))
    assert [i for i, _ in windows] == [0, 1, 2]
    # samples, then the windows (each point's launches alone), then each point's host-time block
    first = next(j for j, (window, _) in enumerate(log) if window is not None)
    last = max(j for j, (window, _) in enumerate(log) if window is not None)
    assert log[first : last + 1] == [(i, i) for i in (0, 1, 2) for window, c in log if window == i]
    assert {c for window, c in log[last + 1 :]} == {0, 1, 2} and {w for w, _ in log[last + 1 :]} == {None}
    timed = [c for window, c in log[:first]]
    for (i, readings), t, w in zip(windows, timings, watts, strict=True):
        assert readings.seconds >= WINDOW_S and readings.energy_s >= TimingPolicy().min_metered_s
        assert readings.watts == pytest.approx(w, rel=TOLERANCE)
        assert t.avg_watts == pytest.approx(readings.watts)
        assert t.joules_per_launch == pytest.approx(t.avg_watts * t.ms / 1e3)
        assert t.power_limit_w == LIMIT_W and t.regime == regime
        assert t.reps == 6 and timed.count(i) >= 6  # samples (and sizing, screen), no window launch


@pytest.mark.parametrize(
    ("energy_window_s", "frozen", "window_watts"),
    [
        pytest.param(0.0, False, 450.0, id="window-off"),
        pytest.param(WINDOW_S, True, 450.0, id="counter-did-not-move"),
        pytest.param(WINDOW_S, False, 1000.0, id="above-the-limit-misread"),
    ],
)
def test_no_window_reading_stores_no_energy(clock, energy_window_s, frozen, window_watts):
    """Below the limit the shared blocks give no reading of a point's own: with windows off, a
    counter that did not move in its window, or a window past 1.1x the limit (770 W), none is
    stored (None, not 0). The samples are the same as with a window."""
    clock.meter.frozen = frozen
    configs, log, windows = _configs(clock, [450.0, 450.0], ms=(1.0, 2.0), window_watts=window_watts)
    timings = time_points(
        TimingRequest(configs, [1e-4] * 2, clock, _policy(energy_window_s=energy_window_s), random.Random(0))
    )
    assert [i for i, _ in windows] == ([] if energy_window_s == 0 else [0, 1])
    assert sorted({window for window, _ in log} - {None}) == [i for i, _ in windows]
    for t in timings:
        assert t.avg_watts is None and t.joules_per_launch is None
        assert t.reps == 6 and t.power_limit_w == LIMIT_W


def test_a_gpu_without_an_energy_counter_runs_no_window(clock):
    """NVML missing or a GPU older than Volta: a window would cost its 0.3 s for no reading."""
    clock.meter.energy_mj = lambda: None
    configs, log, windows = _configs(clock, [450.0, 450.0], ms=(1.0, 2.0))
    timings = time_points(TimingRequest(configs, [1e-4] * 2, clock, _policy(), random.Random(0)))
    assert [(i, r.seconds, r.joules) for i, r in windows] == [(0, 0.0, None), (1, 0.0, None)]
    assert all(window is None for window, _ in log)
    assert [(t.avg_watts, t.joules_per_launch, t.reps) for t in timings] == [(None, None, 6)] * 2


class WindowClock:
    """A clock whose windows read `watts` over 0.3 s, recording which launchers took one."""

    flush_ms = 0.07

    def __init__(self, watts):
        self.watts, self.windows = watts, []

    def energy_window(self, launch, host_s, seconds, gpu_s=0.0):
        self.windows.append((launch, seconds, gpu_s))
        return Readings(0.31, joules=self.watts * 0.3, power_limit_w=LIMIT_W, energy_s=0.3)


def _metered(joules, seconds, share=1.0, launch_s=None):
    p = PointSamples(launch_s=launch_s)
    p.stream = [1.0, 1.2, 1.1]
    p.meter(Readings(seconds, joules), share=share)
    return p


def test_a_point_with_its_own_long_reading_takes_no_window():
    """A config at the limit has its own 300 ms block: it keeps it. One that shared a block with
    another config, or whose own reading is under min_metered_s, takes a window, whose energy
    replaces what it had; a window's blocks are sized by the GPU time of a launch."""
    points = [
        _metered(207.0, 0.3),  # its own block at the limit: 690 W
        _metered(300.0, 0.6, share=0.5, launch_s=0.4e-3),  # half of a block it shared: 500 W
        _metered(5.0, 0.01),  # 10 ms of its own: too short
    ]
    clock = WindowClock(watts=420.0)
    energy_windows(points, ["own", "shared", "short"], [1e-4] * 3, clock, TimingPolicy())
    assert clock.windows == [
        ("shared", ENERGY_WINDOW_S, 0.4e-3),
        ("short", ENERGY_WINDOW_S, pytest.approx(1.17e-3)),
    ]
    assert [p.joules / p.metered_s for p in points] == pytest.approx([690.0, 420.0, 420.0])
    assert [p.own_energy(0.15) for p in points] == [True, True, True]
    assert [p.power_limit_w for p in points] == [None, LIMIT_W, LIMIT_W]


def test_the_window_is_a_timing_knob():
    spec = "name: t\ndtypes: [bfloat16]\nvariants: [tiled]\nshapes: [{m: 8, n: 8, k: 8}]\n"
    assert SpecTiming().energy_window_s == ENERGY_WINDOW_S == TimingPolicy().energy_window_s
    assert parse_spec(spec + "timing: {energy_window_s: 0}\n").timing.energy_window_s == 0
    assert TimingPolicy.from_spec(SpecTiming(energy_window_s=0.5)).energy_window_s == 0.5
    with pytest.raises(
        SpecError, match=r"<spec>:5: timing.energy_window_s: Input should be greater than or equal to 0"
    ):
        parse_spec(spec + "timing: {energy_window_s: -0.1}\n")


@pytest.mark.parametrize("regime", ["steady", "interleaved", "rest"])
def test_a_points_estimate_holds_its_window(regime):
    with_window, without = TimingPolicy(regime=regime), TimingPolicy(regime=regime, energy_window_s=0)
    assert estimate_seconds(with_window, 1e-4) - estimate_seconds(without, 1e-4) == pytest.approx(
        ENERGY_WINDOW_S
    )
