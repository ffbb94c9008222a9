"""Compiling ahead, so the GPU rarely waits on the compiler.

A launcher (built-in or a user's plugin) only knows how to launch. To compile it without running
it, the worker calls it under `compile_only()`: Triton's `kernel[grid](...)` then goes through
`JITFunction.run(..., warmup=True)`, which compiles into the same in-memory cache the real launch
reads, and launches nothing. Measured on an H200: 12 configs took 5.3 s one after another and
1.5 s on 8 threads (Triton's compiler releases the GIL); the first real launch afterwards took
0.4 ms. The same hook records the kernels each launch used, for registers and shared memory.

Under TRITON_INTERPRET there is nothing to compile: the hook is not installed and compiling is
a no-op.

Compiling ahead runs the launcher's own Python code too, so an exception that surfaces here is
not always the compiler's: `failure_status` tells the two apart (DESIGN "Status words").
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import triton
from triton.compiler.errors import CompilationError
from triton.runtime.errors import OutOfResources, PTXASError
from triton.runtime.jit import JITFunction

from db.records import Status
from farm.metrics import KernelResources
from kernels.launching import COMPILE_ONLY  # kernels' launchers read it too

_launched: contextvars.ContextVar[list | None] = contextvars.ContextVar("farm_launched", default=None)
_original_getitem = JITFunction.__getitem__


def _getitem(self, grid):
    warmup = COMPILE_ONLY.get()
    launched = _launched.get()

    def launch(*args, **kwargs):
        kernel = self.run(*args, grid=grid, warmup=warmup, **kwargs)
        if launched is not None and kernel is not None:
            launched.append(kernel)
        return kernel

    return launch


def install() -> None:
    """Route `kernel[grid](...)` through the hook (idempotent; the worker calls it once)."""
    JITFunction.__getitem__ = _getitem


@contextlib.contextmanager
def recording():
    """Collect the compiled kernels that launches inside the block used."""
    kernels: list = []
    token = _launched.set(kernels)
    try:
        yield kernels
    finally:
        _launched.reset(token)


def resources_of(kernels: list) -> KernelResources | None:
    """Registers and shared memory of a launcher's first Triton kernel (its main one)."""
    if not kernels:
        return None
    kernel = kernels[0]
    init = getattr(kernel, "_init_handles", None)
    if init is not None:
        init()  # loads the binary: sets n_regs, and raises OutOfResources if it cannot fit
    return KernelResources(getattr(kernel, "n_regs", None), kernel.metadata.shared, kernel.metadata.num_warps)


@dataclass
class Compiled:
    seconds: float
    resources: KernelResources | None


def compile_launcher(launch: Callable[[], object]) -> Compiled:
    """Compile everything `launch()` would launch, launching nothing; time it."""
    token = COMPILE_ONLY.set(True)
    try:
        start = time.perf_counter()
        with recording() as kernels:
            launch()
        resources = resources_of(kernels)
        return Compiled(time.perf_counter() - start, resources)
    finally:
        COMPILE_ONLY.reset(token)


# Where Triton's compiler lives: its front end and passes, the per-target backends (ptxas, the
# linker), and the build of the launcher's C stub. An exception raised from code in these folders
# is the compiler's, whatever its type (the MLIR pass manager raises a plain RuntimeError).
_TRITON_DIR = os.path.dirname(triton.__file__)
_COMPILER_CODE = tuple(
    os.path.join(_TRITON_DIR, part) for part in ("compiler" + os.sep, "backends" + os.sep, "runtime/build.py")
)


def failure_status(exc: BaseException) -> Status:
    """`compile_error` for a failure of Triton's compiler or of loading its binary (out of
    registers or shared memory); `launch_error` for anything else a launcher raised, its own
    code included, whether it surfaced while compiling ahead, checking or timing."""
    if isinstance(exc, (CompilationError, OutOfResources, PTXASError)):
        return Status.COMPILE_ERROR
    raised_in = _innermost_file(exc)
    if raised_in is not None and raised_in.startswith(_COMPILER_CODE):
        return Status.COMPILE_ERROR
    return Status.LAUNCH_ERROR


def _innermost_file(exc: BaseException) -> str | None:
    """The file of the frame that raised `exc` (its traceback's last entry)."""
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return os.path.abspath(tb.tb_frame.f_code.co_filename)
