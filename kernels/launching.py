"""How launchers queue their Triton kernels: the compile-only switch, and compiled kernels called directly.

The farm compiles every point's kernels ahead of timing by calling its launcher while Triton's
launches are turned into compile-only warm-ups (farm/compile.py sets `COMPILE_ONLY`). A launcher
that calls a compiled kernel directly (`DirectCalls`) must take Triton's path instead while it is
set: a direct call would run the kernel, and the farm would not see which kernels the launcher
uses. The switch lives here, at the bottom, so launchers read it without importing the farm.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

from triton.compiler.compiler import CompiledKernel

COMPILE_ONLY = contextvars.ContextVar("kernels_compile_only", default=False)


class DirectCalls:
    """One kernel's compiled runners, called directly after a key's first launch through Triton.

    Triton's JIT path binds and specialises every argument on each call: 37 us of host time at
    2000x3000x1500 against 19.5 for the compiled kernel called directly (H200 host, visit 56), where
    the whole call is host-bound. The launcher makes the key from what it already has, and the key
    must fix all Triton specialised on: every int argument's value (its ==1, %16 and int32 range),
    each pointer's 16-byte alignment, the dtypes, the grid and the constexprs. (A key built argument
    by argument for any kernel cost more than it saved: visit 50.) At most `max_keys` keys, the
    oldest dropped first: a process that sees a new M every call (decoding) keeps a bounded table.
    """

    def __init__(self, kernel, max_keys: int = 1024) -> None:
        self.kernel = kernel
        self.max_keys = max_keys
        # key -> (the compiled kernel's runner for its grid, the constexprs in the kernel's order)
        self.table: dict[tuple, tuple[Callable, tuple]] = {}

    def launch(self, key: tuple, grid: tuple[int, ...], args: tuple, constexprs: dict, **options) -> None:
        """Queue kernel[grid](*args, **constexprs, **options): directly when the key is known."""
        known = self.table.get(key)
        if known is not None and not COMPILE_ONLY.get():  # compiling ahead launches nothing
            runner, values = known
            runner(*args, *values)
            return
        compiled = self.kernel[grid](*args, **constexprs, **options)
        # Kept once per key (a known key compiled again ahead of timing is already there), and only
        # when compiled: the interpreter has nothing to call directly.
        if known is None and isinstance(compiled, CompiledKernel):
            if len(self.table) >= self.max_keys:
                del self.table[next(iter(self.table))]  # dicts keep insertion order: the oldest key
            order = self.kernel.arg_names[len(args) :]
            self.table[key] = compiled[(*grid, 1, 1)[:3]], tuple(constexprs[name] for name in order)
