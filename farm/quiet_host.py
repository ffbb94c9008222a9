"""The host-time lock between a worker's compiles and the clock taking host times."""

from __future__ import annotations

import contextlib
import os
import threading

# A measurement switch, not a setting: "0" in a worker's environment when it starts gives it a
# `QuietHost` that holds nothing back (`LoudHost`), so that benchmarks/quiet_host_cost.py can measure
# what holding compiles back costs a sweep and what it buys its host times. Read where the worker
# starts (farm.worker), in the worker's process: a local Ray's workers inherit the sweep's environment;
# workers of a Ray the sweep joins, kept ones included, run as they started.
SWITCH_ENV = "FARM_QUIET_HOST"


class QuietHost:
    """Keeps the worker's compiles off the host while host times are taken. The worker compiles the
    next batch on its pool's threads while the GPU times this one, and a Python thread running beside
    the queueing thread takes the GIL from it: cuBLAS at 1000^3 queued in 15 us a call alone, 10 ms
    (wall; 0.3 ms of its thread's CPU) with one busy Python thread beside it (H200 host). Compiles run
    inside `compiling()`; `quiet()` lets those running finish, holds new ones back, and yields."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._compiling = 0
        self._quiet = False

    @contextlib.contextmanager
    def compiling(self):
        with self._cv:
            self._cv.wait_for(lambda: not self._quiet)
            self._compiling += 1
        try:
            yield
        finally:
            with self._cv:
                self._compiling -= 1
                self._cv.notify_all()

    @contextlib.contextmanager
    def quiet(self):
        with self._cv:
            self._quiet = True
            self._cv.wait_for(lambda: self._compiling == 0)
        try:
            yield
        finally:
            with self._cv:
                self._quiet = False
                self._cv.notify_all()


class LoudHost(QuietHost):
    """Holds nothing back: compiles run while host times are taken (the switch's "0")."""

    @contextlib.contextmanager
    def compiling(self):
        yield

    @contextlib.contextmanager
    def quiet(self):
        yield


def worker_quiet_host(environ=os.environ) -> QuietHost:
    """A worker's QuietHost: the shipped one, or `LoudHost` where SWITCH_ENV is "0"."""
    return LoudHost() if environ.get(SWITCH_ENV) == "0" else QuietHost()
