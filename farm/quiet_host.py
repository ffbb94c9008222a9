"""The host-time lock between a worker's compiles and the clock taking host times."""

from __future__ import annotations

import contextlib
import threading


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
