"""Errors the farm tells apart. `UserError` and `WriteFailed` reach the command line (exit 2, exit 3);
`InstrumentError` stays in the worker, which stores the points it hit as `instrument_error`."""


class UserError(Exception):
    """Bad input: a spec, a plugin, a variant name, an option."""


class WriteFailed(Exception):
    """A write to the results database failed mid-sweep (a full disk, an I/O error, a read-only file or
    server). The message is one line naming the database and, for a file, the free space needed; the
    sweep is left `interrupted` with its claims released where the database still takes that much.
    The CLI prints it and exits 3: some points were not measured, and the same command resumes."""


class InstrumentError(Exception):
    """A measuring instrument failed while a batch was timed: torch.profiler (Kineto and the CUPTI it
    drives) or NVML, not the kernels it measured. farm.instrument raises it around every call the
    clock makes into them, with the instrument's own message; the worker times the batch again
    once, then has the driver restart its process for the batch (once a point), then stores its
    points `instrument_error`, never `launch_error`."""

    def __init__(self, instrument: str, cause: BaseException | str):
        # args hold plain strings: the error pickles (Ray) and is rebuilt from them
        detail = cause if isinstance(cause, str) else f"{type(cause).__name__}: {str(cause).strip()}"
        super().__init__(instrument, detail)
        self.instrument = instrument

    def __str__(self) -> str:
        return f"{self.args[0]}: {self.args[1]}"
