"""NVML's energy counter: read over and over in a thread while blocks run (`EnergyPoller`), and the
energy of the whole updates it showed (`EnergyUpdates`). farm.clock runs the blocks; this module only
reads the counter.

The counter moves in steps of about 100 ms of energy (docs/design.md, "Energy"), so only whole
steps measure power: a block's two end readings are off by up to one step.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

# Counter updates a block's energy needs: two whole intervals. NVML's energy counter moves about
# every 100 ms on an H200 (median 98.6 ms, some 14 ms apart), so a block's two end
# readings are off by up to one update: 0.33 s blocks of one steady matmul read 623-806 W (CV
# 10.7%), high with four updates inside, low with three. Between the first and the last update
# seen, the counter holds whole updates only: 662-720 W (CV 2.2%) over the same blocks.
MIN_ENERGY_UPDATES = 3
# A point's own energy window (`CudaClock.energy_window`): back-to-back launches of one config for
# at least this long. Three updates of a counter that moves every ~100 ms (98.6 ms median on an
# H200, `benchmarks/energy_probe.py`) fall inside 0.3 s at any phase; 50 ms more covers updates that
# come late and the poll that sees them (one read: 3.5-4.3 ms). Between its first and last update
# such a window holds 0.2 s or more of whole updates: 0.33 s blocks of one matmul read 662-720 W
# that way (CV 2.2%) where their two ends read 623-806 W. Cost: 0.35 s of GPU per point.
ENERGY_WINDOW_S = 0.35


class EnergyCounter(Protocol):
    """What the poller reads: NVML's total energy in mJ, None without the counter (farm.clock.Meter)."""

    def energy_mj(self) -> int | None: ...


class EnergyPoller:
    """NVML's energy counter read over and over in a thread from before a block is queued until it
    ends: queueing a block of short kernels under the profiler takes most of its 300 ms (when
    polled from the host's wait alone, 10 of 221 at-limit points saw two whole updates), and an
    energy read takes 3.5-4.3 ms (docs/results/energy_probe.csv) that the queueing thread cannot
    spare. NVML calls release the GIL. Each reading is stamped when it starts: a read's fixed
    latency cancels in the differences that EnergyUpdates takes."""

    def __init__(self, meter: EnergyCounter):
        self.updates = EnergyUpdates()
        self._meter = meter
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            t = time.perf_counter()
            mj = self._meter.energy_mj()
            if mj is None:  # no counter on this GPU
                return
            if not self._stop.is_set():  # a read that ends after the block is not the block's
                self.updates.see(t, mj)

    def __enter__(self) -> EnergyPoller:
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def stop(self) -> tuple[float, float] | None:
        """(joules, seconds) of the whole updates seen so far; the thread ends after its read in
        flight, without the caller waiting for it (the GPU would idle for that read)."""
        self._stop.set()
        return self.updates.reading()


class EnergyUpdates:
    """The updates of NVML's energy counter seen while polling it during a block: the energy
    between the first and the last one, over the time between them. The counter moves in steps of
    about 100 ms of energy, so only whole steps measure power; a step's time is known to a poll
    (3.5 ms: the read itself)."""

    def __init__(self, min_updates: int = MIN_ENERGY_UPDATES):
        self.min_updates = min_updates
        self.updates: list[tuple[float, int]] = []  # (seconds, mJ) where the counter had moved
        self._last: tuple[float, int] | None = None  # the previous reading

    def see(self, t: float, mj: int | None) -> None:
        """A reading `mj` stamped `t` on the host (a fixed offset within the read cancels)."""
        if mj is None:
            return
        if self._last is not None and mj != self._last[1]:
            # it moved between the previous reading and this one: midway, to within half a poll
            self.updates.append(((self._last[0] + t) / 2, mj))
        self._last = (t, mj)

    def reading(self) -> tuple[float, float] | None:
        """(joules, seconds) between the first and the last update, or None with too few."""
        if len(self.updates) < self.min_updates:
            return None
        (t0, e0), (t1, e1) = self.updates[0], self.updates[-1]
        if e1 <= e0 or t1 <= t0:
            return None
        return (e1 - e0) / 1e3, t1 - t0


def span_joules(energy0_mj: int | None, energy1_mj: int | None) -> float | None:
    """Energy of a span from NVML's counter read at its two ends, None where it did not advance: the
    counter moves in steps (44 of 136 rows of one grouping sweep on an H200, blocks of 20 ms and less,
    read 0 J), and a span it did not tick in has an unknown energy, not none."""
    if energy0_mj is None or energy1_mj is None or energy1_mj <= energy0_mj:
        return None
    return (energy1_mj - energy0_mj) / 1e3
