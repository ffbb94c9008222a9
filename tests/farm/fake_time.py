"""One fake time for CudaClock's blocks on the CPU: the clock's waits, its CUDA events, the energy
poller's stamps and NVML's stepped energy counter all read it, and only the clock's wait between two
polls of a block (farm.clock's `time.sleep(POLL_S)`) moves it. Nothing depends on wall time, so a
loaded machine cannot move a reading: the poller thread reads the counter at every tick of the fake
time (the clock's wait holds the tick until it has), and each reading is the counter at the instant
the poller stamped it (farm.energy's `time.perf_counter()`), however late its thread ran.

Use: `install(monkeypatch)` patches farm.clock's and farm.energy's `time`, farm.clock's EnergyPoller
(`LockstepPoller`, the real poller whose thread the fake time waits for) and torch.cuda.Event
(`TickEvent`), and returns the FakeTime; `SteppedMeter(fake_time, ...)` is the NVML to give the clock.
"""

from __future__ import annotations

import threading
import time

import farm.clock
import farm.energy
from farm.energy import EnergyPoller
from farm.gpu import GpuState

# How long a thread waits for another (real seconds) before the test fails: a handoff takes
# microseconds; minutes of it is a deadlock, not load.
HANDOFF_TIMEOUT_S = 120.0
NS = 1_000_000_000


class FakeTime:
    """Seconds as integer nanoseconds, from 100 s (a perf_counter-like origin); `sleep` moves them.

    The thread that made it drives it (the test's). Each other thread's last `perf_counter()` is
    remembered: a meter read from that thread is taken at that stamp, as a real read's fixed latency
    cancels out. `sleep` moves the time, then waits until every followed poller thread has read
    the meter at the new time (or has stopped).
    """

    def __init__(self, start_s: float = 100.0):
        self.now_ns = round(start_s * NS)
        self.driver = threading.get_ident()
        self.cv = threading.Condition()
        self.stamps: dict[int, int] = {}  # thread -> its last perf_counter(), ns
        self.read_ns: dict[int, int] = {}  # followed poller thread -> the time of its last read
        self.threads: dict[int, threading.Thread] = {}
        self.pollers: list[LockstepPoller] = []  # every poller made, in order

    # -- the `time` module farm.clock and farm.energy see --

    def perf_counter(self) -> float:
        with self.cv:
            now = self.now_ns
            if threading.get_ident() != self.driver:
                self.stamps[threading.get_ident()] = now
        return now / NS

    def sleep(self, seconds: float) -> None:
        with self.cv:
            self.now_ns += round(seconds * NS)
            self.cv.notify_all()
            self._wait(lambda: all(t >= self.now_ns for t in self.read_ns.values()))

    # -- the poller's side --

    def follow(self, thread: threading.Thread) -> None:
        with self.cv:
            self.threads[thread.ident] = thread
            self.read_ns[thread.ident] = -1

    def unfollow(self, thread: threading.Thread) -> None:
        with self.cv:
            self.read_ns.pop(thread.ident, None)
            self.cv.notify_all()

    def read_at(self) -> int:
        """The time a meter read from this thread is taken at: its stamp, the driver's now."""
        with self.cv:
            ident = threading.get_ident()
            return self.now_ns if ident == self.driver else self.stamps.get(ident, self.now_ns)

    def done_reading(self, at_ns: int) -> None:
        """A followed poller read the meter at `at_ns`: the read lasts until the time moves past it
        (the thread waits with the GIL released, as during NVML's read), or the poller stops."""
        ident = threading.get_ident()
        with self.cv:
            if ident not in self.read_ns:
                return
            self.read_ns[ident] = max(self.read_ns[ident], at_ns)
            self.cv.notify_all()
            self._wait(lambda: self.now_ns > at_ns or ident not in self.read_ns)

    def _wait(self, ready) -> None:
        deadline = time.monotonic() + HANDOFF_TIMEOUT_S
        while not ready():
            # a followed thread that died without unfollowing is not waited for
            for ident in [i for i, t in self.threads.items() if not t.is_alive()]:
                self.read_ns.pop(ident, None)
                del self.threads[ident]
            if ready():
                return
            if time.monotonic() > deadline:
                raise AssertionError("fake time: a thread never took its turn")
            self.cv.wait(0.05)


class LockstepPoller(EnergyPoller):
    """farm.energy.EnergyPoller, its thread followed by the meter's FakeTime from before it can
    read, and let go when the poller stops (its reads after that are not the block's)."""

    def __init__(self, meter):
        self._time: FakeTime = meter.time
        super().__init__(meter)
        self._time.follow(self._thread)
        self._time.pollers.append(self)

    def stop(self):
        reading = super().stop()
        self._time.unfollow(self._thread)
        return reading

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        self._time.unfollow(self._thread)

    @property
    def thread(self) -> threading.Thread:
        return self._thread


class SteppedMeter:
    """NVML of a GPU drawing `watts` whose energy counter moves every `period_s` of the fake time,
    the first step `phase_s` after the meter was made (an H200's: about every 0.1 s); a clock at
    1500 MHz held by the power cap."""

    def __init__(
        self, fake_time: FakeTime, period_s: float = 0.1, phase_s: float = 0.0, watts: float = 700.0
    ):
        self.time, self.watts = fake_time, watts
        self.t0_ns = fake_time.now_ns + round(phase_s * NS)
        self.period_ns = round(period_s * NS)
        self.reads = 0

    def counter_mj(self, t_ns: int) -> int:
        steps = (t_ns - self.t0_ns) // self.period_ns + 1 if t_ns >= self.t0_ns else 0
        return 10_000 + round(steps * self.period_ns / NS * self.watts * 1e3)

    def energy_mj(self) -> int:
        self.reads += 1
        at = self.time.read_at()
        mj = self.counter_mj(at)
        self.time.done_reading(at)
        return mj

    def state(self) -> GpuState:
        return GpuState(1500, 61, 0x4)

    def power_limit_w(self) -> float:
        return 700.0


class TickEvent:
    """A CUDA event recorded at the fake time; the fake GPU reaches it `busy_s` later."""

    time: FakeTime
    busy_s = 0.0

    def __init__(self, enable_timing=False):
        self.ns = None

    def record(self):
        self.ns = self.time.now_ns

    def query(self):
        return self.time.now_ns >= self.ns + round(self.busy_s * NS)

    def elapsed_time(self, end):
        return (end.ns - self.ns) / 1e6


def install(monkeypatch) -> FakeTime:
    """The fake time in farm.clock and farm.energy, the lockstep poller, fake CUDA events, sleep and
    sync; returns the FakeTime (TickEvent.busy_s is 0 until a test sets it)."""
    import torch

    fake = FakeTime()
    monkeypatch.setattr(farm.clock, "time", fake)
    monkeypatch.setattr(farm.energy, "time", fake)
    monkeypatch.setattr(farm.clock, "EnergyPoller", LockstepPoller)
    monkeypatch.setattr(TickEvent, "time", fake, raising=False)
    monkeypatch.setattr(TickEvent, "busy_s", 0.0)
    monkeypatch.setattr(torch.cuda, "Event", TickEvent)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    return fake
