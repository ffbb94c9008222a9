"""The measuring instruments' calls, guarded: what torch.profiler (Kineto, and the CUPTI it drives) or
NVML raises comes out as one `farm.errors.InstrumentError` carrying the instrument's message, so the
worker tells an instrument's failure from a kernel's by type, not by reading messages
(docs/design.md, "Instrument faults").

Why: the first sweep on a fresh H100 stored 95 of its 359 points `launch_error` with "inserted.second
INTERNAL ASSERT FAILED at torch/csrc/profiler/collection.cpp:1152" (Kineto found a CUPTI flow id twice
while the profiler stopped); the same command again had none. The kernels had passed their checks.

The guard sits where the farm calls an instrument (farm.clock: the profiler session, its collection
toggle, the labels around each launch, the reading of its results; farm.gpu: NVML's state reads), and
around the instrument alone: a launch inside a labelled range or a profiler session raises as itself.
"""

from __future__ import annotations

import contextlib

from farm.errors import InstrumentError

PROFILER = "torch.profiler"
NVML = "NVML"

# Text only the profiler's own failures carry, for one that reaches the worker by a path not guarded
# here (a torch op inside a launcher recording into the session): its C++ asserts name their source file.
PROFILER_SOURCES = ("torch/csrc/profiler/", "torch/csrc/autograd/profiler", "libkineto", "CUPTI_ERROR")


@contextlib.contextmanager
def calling(instrument: str, errors: type[BaseException] | tuple[type[BaseException], ...] = Exception):
    """Run the instrument's own calls: `errors` they raise become InstrumentError."""
    try:
        yield
    except InstrumentError:
        raise
    except errors as exc:
        raise InstrumentError(instrument, exc) from exc


class Around:
    """An instrument's context manager (a profiler session, a record_function range) around code that
    is not the instrument's (launches). Entering or leaving it raises InstrumentError where the
    instrument fails; what the body raises passes as it is, and a failure to leave after it is dropped
    (the body's came first). A class, not a generator: it wraps every profiled launch, and adds 0.45 us
    to one on the 2-core VM where a @contextmanager adds 2.1 us."""

    __slots__ = ("inner", "instrument")

    def __init__(self, instrument: str, inner):
        self.instrument, self.inner = instrument, inner

    def __enter__(self):
        try:
            return self.inner.__enter__()
        except Exception as exc:
            raise InstrumentError(self.instrument, exc) from exc

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            with contextlib.suppress(Exception):
                self.inner.__exit__(exc_type, exc, tb)
            return False
        try:
            self.inner.__exit__(None, None, None)
        except Exception as error:
            raise InstrumentError(self.instrument, error) from error
        return False


def instrument_fault(exc: BaseException) -> InstrumentError | None:
    """The instrument's failure behind `exc`, or None where it is not an instrument's: an
    InstrumentError (or one it was raised from), an NVML error, or an error in the profiler's own
    sources that reached the worker unguarded."""
    seen = exc
    while seen is not None:
        if isinstance(seen, InstrumentError):
            return seen
        seen = seen.__cause__
    try:
        from pynvml import NVMLError
    except ImportError:  # no NVML on this host: no NVML error either
        NVMLError = ()
    if isinstance(exc, NVMLError):
        return InstrumentError(NVML, exc)
    if any(source in str(exc) for source in PROFILER_SOURCES):
        return InstrumentError(PROFILER, exc)
    return None
