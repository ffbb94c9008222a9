"""The interleaved regime's energy: one reading over the batch's rounds, shared by stream time
(energy windows off: tests/farm/test_energy_window.py has them).
CudaClock on the CPU: CUDA events, sleep and sync faked, the real torch.profiler, NVML simulated."""

import random
import time

import pytest

import farm.clock
from farm.clock import POLL_S, CudaClock, Readings
from farm.gpu import GpuState
from farm.timing import time_points
from farm.timing.interleaved import share_span
from farm.timing.policy import TimingPolicy
from farm.timing.request import TimingRequest
from farm.timing.samples import PointSamples

WATTS = 600.0

pytestmark = pytest.mark.filterwarnings("ignore:CUDA is not available, disabling CUDA profiling")


class FakeEvent:
    """A CUDA event at the host's time; the first `busy` queries of a block say it still runs."""

    busy = 0

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def query(self):
        if FakeEvent.busy > 0:
            FakeEvent.busy -= 1
            return False
        return True

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


class CountingMeter:
    """NVML that counts its reads: an energy counter drawing WATTS since it was made, a GPU below
    its 700 W limit at 1500 MHz."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.reads = {"energy": 0, "state": 0, "power_limit": 0}

    def state(self):
        self.reads["state"] += 1
        return GpuState(1500, 55, 0)

    def energy_mj(self):
        self.reads["energy"] += 1
        return 10_000 + int(WATTS * (time.perf_counter() - self.t0) * 1e3)

    def power_limit_w(self):
        self.reads["power_limit"] += 1
        return 700.0


class SteppedMeter(CountingMeter):
    """Its counter moves in steps, every 10 ms here (an H200's: about 100 ms, visit 38), and a
    read takes a while with the GIL released, as NVML's does (3.5-4.3 ms on an H200)."""

    def energy_mj(self):
        self.reads["energy"] += 1
        mj = 10_000 + int(WATTS * ((time.perf_counter() - self.t0) // 0.01 * 0.01) * 1e3)
        time.sleep(0.0002)
        return mj


@pytest.fixture
def clock(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(farm.clock, "MIN_FLUSH_BYTES", 2**20)  # a CPU zero_ of 256 MiB per launch: slow
    monkeypatch.setattr(FakeEvent, "busy", 0)
    return CudaClock(torch.device("cpu"), l2_bytes=2**19, meter=CountingMeter())


def _sleeping(*ms):
    return [lambda s=s: time.sleep(s / 1e3) for s in ms]


@pytest.mark.parametrize(
    ("launch_ms", "reps"),
    [
        pytest.param((0.3,), 3, id="one-config-3-rounds"),
        pytest.param((0.2, 0.5, 0.3), 7, id="three-configs-7-rounds"),
    ],
)
def test_interleaved_reads_energy_twice_per_batch_whatever_the_rounds(clock, launch_ms, reps):
    policy = TimingPolicy(
        min_reps=reps, max_reps=reps, regime="interleaved", min_metered_s=0.0, energy_window_s=0.0
    )
    timings = time_points(
        TimingRequest(_sleeping(*launch_ms), [1e-4] * len(launch_ms), clock, policy, random.Random(0))
    )
    assert [t.reps for t in timings] == [reps] * len(launch_ms)
    # the span's two ends: energy and the power limit; each round samples the clock twice
    assert clock.meter.reads == {"energy": 2, "state": 2 * reps, "power_limit": 1}
    assert all(t.power_limit_w == 700.0 and t.state.sm_clock_mhz == 1500 for t in timings)


def test_every_point_of_a_batch_gets_the_span_power(clock):
    launches = _sleeping(0.4, 1.2)
    policy = TimingPolicy(
        min_reps=5, max_reps=5, regime="interleaved", min_metered_s=0.0, energy_window_s=0.0
    )
    timings = time_points(TimingRequest(launches, [1e-4] * 2, clock, policy, random.Random(1)))
    # counter and span are timed around the same rounds, microseconds apart
    assert [t.avg_watts for t in timings] == pytest.approx([WATTS, WATTS], rel=0.05)
    for t in timings:
        assert t.joules_per_launch == pytest.approx(t.avg_watts * t.ms / 1e3)


@pytest.mark.parametrize(
    ("min_metered_s", "stored"),
    [pytest.param(0.5, False, id="session-under-min_metered_s"), pytest.param(0.0, True, id="any-session")],
)
def test_energy_needs_a_long_enough_share_of_the_session(clock, min_metered_s, stored):
    # 2 configs x 4 rounds of 0.3-0.6 ms launches: a session of milliseconds
    policy = TimingPolicy(
        min_reps=4, max_reps=4, regime="interleaved", min_metered_s=min_metered_s, energy_window_s=0.0
    )
    timings = time_points(TimingRequest(_sleeping(0.3, 0.6), [1e-4] * 2, clock, policy, random.Random(0)))
    assert [t.avg_watts is not None for t in timings] == [stored, stored]
    assert [t.joules_per_launch is not None for t in timings] == [stored, stored]


def _point(*stream_ms):
    p = PointSamples()
    p.stream = list(stream_ms)
    return p


@pytest.mark.parametrize(
    "streams",
    [
        pytest.param([[1.0, 1.2, 0.9], [3.1, 2.9, 3.0], [0.05] * 7], id="ragged-reps"),
        pytest.param([[0.02] * 100], id="one-point"),
    ],
)
def test_span_shares_add_up_to_the_span_and_go_by_stream_time(streams):
    points = [_point(*s) for s in streams]
    span = Readings(2.5, joules=1750.0, power_limit_w=700.0)
    share_span(points, span)
    assert sum(p.joules for p in points) == pytest.approx(span.joules)
    assert sum(p.metered_s for p in points) == pytest.approx(span.seconds)
    total_ms = sum(map(sum, streams))
    for p, s in zip(points, streams, strict=True):
        assert p.joules == pytest.approx(span.joules * sum(s) / total_ms)
        assert p.power_limit_w == 700.0


def test_a_span_without_energy_leaves_the_rounds_own():
    """A clock without a metered span (the interpreter's, test fakes): blocks keep their readings."""
    p = _point(1.0)
    p.joules, p.metered_s = 0.6, 0.001
    share_span([p], Readings(0.5))
    assert (p.joules, p.metered_s, p.power_limit_w) == (0.6, 0.001, None)


def test_a_block_outside_a_span_keeps_its_own_readings(clock):
    """The steady regime's blocks: the energy counter read by a thread while the block is queued
    and runs (farm.clock.EnergyPoller), the clock polled every POLL_S, the power limit once."""
    clock.meter = SteppedMeter()
    FakeEvent.busy = 50
    t0 = time.perf_counter()
    block = clock.run(_sleeping(0.2, 0.2), [1e-4] * 2, profile=False)
    assert time.perf_counter() - t0 >= 50 * POLL_S
    reads = dict(clock.meter.reads)
    assert reads["state"] == 51 and reads["power_limit"] == 1 and reads["energy"] >= 3
    r = block.readings
    # whole 10 ms steps over 0.1 s or more, each step's time known to a read (0.2 ms here)
    assert r.watts == pytest.approx(WATTS, rel=0.1) and r.energy_s >= 0.05
    assert r.power_limit_w == 700.0


@pytest.mark.parametrize("busy_polls", [0, 3], ids=["done-at-once", "would-poll-three-times"])
def test_a_round_of_a_span_samples_the_clock_twice(clock, busy_polls):
    FakeEvent.busy = busy_polls
    with clock.metered() as span:
        block = clock.run(_sleeping(0.2, 0.2, 0.2), [1e-4] * 3, profile=False)
        assert clock.meter.reads == {"energy": 1, "state": 2, "power_limit": 0}
    assert clock.meter.reads == {"energy": 2, "state": 2, "power_limit": 1}
    r = block.readings
    assert r.joules is None and r.power_limit_w is None and r.sm_clock_mhz == 1500
    assert len(block.stream_ms) == len(block.host_ms) == 3 and min(block.stream_ms) >= 0.2
    assert span.seconds >= r.seconds and span.power_limit_w == 700.0
    # the next block outside the span reads its own energy again
    FakeEvent.busy = 10
    assert clock.run(_sleeping(0.2), [1e-4], profile=False).readings.joules is not None
