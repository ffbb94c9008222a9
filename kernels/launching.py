"""How launchers queue their Triton kernels: the compile-only switch, and compiled kernels called directly.

The farm compiles every point's kernels ahead of timing by calling its launcher while Triton's
launches are turned into compile-only warm-ups (farm/compile.py sets `COMPILE_ONLY`). A launcher
that calls a compiled kernel directly (`DirectCalls`) must take Triton's path instead while it is
set: a direct call would run the kernel, and the farm would not see which kernels the launcher
uses. The switch lives here, at the bottom, so launchers read it without importing the farm.

Programmatic dependent launch (Hopper's griddepcontrol) lets a kernel queued after another start
before that one ends: the Hopper launchers use it between kernels they queue back to back
(`dependent_launch`), each kernel saying in its code when its dependent may start and when it
waits for the kernel before it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import torch
from triton.compiler.compiler import CompiledKernel

from kernels.interpreter import prepare_for

COMPILE_ONLY = contextvars.ContextVar("kernels_compile_only", default=False)


def dependent_launch(device: torch.device) -> bool:
    """Whether the Hopper launchers' kernels take part in programmatic dependent launch on `device`:
    on CUDA (their TMA already needs compute capability 9.0, as griddepcontrol does), never under
    Triton's interpreter, which cannot run griddepcontrol's inline PTX. Measured on the H200 in CUDA
    graphs with L2 flushed: split-K's reduce resident and waiting as the product ends,
    256x256x65536 30.4 -> 29.9 us, 512x512x32768 34.9 -> 34.5; the bands' split tail taking SMs as
    the main band's programs exit, 3072^3 84.1 -> 83.0 (bf16; fp16 alike)."""
    return device.type == "cuda"


class DirectCalls:
    """One kernel's compiled runners, called directly after a key's first launch through Triton.

    Triton's JIT path binds and specialises every argument on each call: 37 us of host time at
    2000x3000x1500 against 19.5 for the compiled kernel called directly (H200 host), where
    the whole call is host-bound. The launcher makes the key from what it already has, and the key
    must fix all Triton specialised on: every int argument's value (its ==1, %16 and int32 range),
    each pointer's 16-byte alignment, the dtypes, the grid and the constexprs. (A key built argument
    by argument for any kernel cost more than it saved: 25.6 us a launch against 21.9 for Triton's
    path.) At most `max_keys` keys, the oldest dropped first: a process that sees a new M every call
    (decoding) keeps a bounded table.

    `plan` keeps, under the same keys and bound, what a launcher prepares for a key whatever the
    operands' addresses (checks passed, descriptor templates, the grid, the constexprs): building
    and checking them on every call had persistent_tma spend 41.5 us of Python before each launch on
    the CPU VM, 17.2 with the plan kept; on the H200's host the kept plan's lookup and rebased
    descriptors take 7 us of a 40 us call (docs/design.md, "Launching: compiled kernels called
    directly").
    """

    def __init__(self, kernel, max_keys: int = 1024) -> None:
        self.kernel = kernel
        self.max_keys = max_keys
        # key -> (the compiled kernel's runner for its grid, the constexprs in the kernel's order)
        self.table: dict[tuple, tuple[Callable, tuple]] = {}
        self.plans: dict[tuple, Any] = {}
        self.interpreter_checked = False  # prepare_for at the first launch, not at import

    def plan(self, key: tuple, build: Callable[[], Any]) -> Any:
        """The launcher's plan for key: `build()` on the key's first call, kept after."""
        plan = self.plans.get(key)
        if plan is None:
            plan = build()  # may raise (a check that fails): then nothing is kept
            bounded_put(self.plans, key, plan, self.max_keys)
        return plan

    def compiled(self, key: tuple) -> tuple[Callable, tuple] | None:
        """(the compiled runner for its grid, the constexprs in order) kept for key, or None: not
        launched yet, or never compiled (the interpreter), or the farm compiling ahead."""
        return None if COMPILE_ONLY.get() else self.table.get(key)

    def launch(self, key: tuple, grid: tuple[int, ...], args: tuple, constexprs: dict, **options) -> None:
        """Queue kernel[grid](*args, **constexprs, **options): directly when the key is known."""
        known = self.table.get(key)
        if known is not None and not COMPILE_ONLY.get():  # compiling ahead launches nothing
            runner, values = known
            runner(*args, *values)
            return
        if not self.interpreter_checked:
            prepare_for(self.kernel)  # the interpreter made right for bf16, and faster (kernels.interpreter)
            self.interpreter_checked = True
        compiled = self.kernel[grid](*args, **constexprs, **options)
        # Kept once per key (a known key compiled again ahead of timing is already there), and only
        # when compiled: the interpreter has nothing to call directly.
        if known is None and isinstance(compiled, CompiledKernel):
            order = self.kernel.arg_names[len(args) :]
            runner = compiled[(*grid, 1, 1)[:3]], tuple(constexprs[name] for name in order)
            bounded_put(self.table, key, runner, self.max_keys)


# variant name -> bind(a, b, cfg, fallback): a callable (a, b) -> a @ b for operands like a and b, or None
_BINDERS: dict[str, Callable] = {}


def binds(variant: str) -> Callable[[Callable], Callable]:
    """Decorator: the function that binds `variant`'s launch to one problem (`bound_launch`)."""

    def register(bind: Callable) -> Callable:
        _BINDERS[variant] = bind
        return bind

    return register


def bound_launch(variant: str, a: torch.Tensor, b: torch.Tensor, cfg, fallback: Callable) -> Callable | None:
    """`variant`'s launch at cfg bound to operands of a's and b's device, dtype, sizes and strides, called
    with the next such pair: its compiled kernel, grid, sizes, strides and constexprs held, so a call
    allocates C, checks the operands' 16-byte starts (Triton specialised on them) and calls the runner.
    `fallback(a, b)` serves a call whose starts differ. None where the variant binds nothing (its
    launcher serves every call) or its kernel was not compiled for this key (the interpreter, or a
    launch yet to come). `kernels.dispatch` holds one per decided problem (docs/design.md, "The
    dispatcher")."""
    binder = _BINDERS.get(variant)
    if binder is None or COMPILE_ONLY.get():
        return None
    return binder(a, b, cfg, fallback)


class BoundCall:
    """One kernel's launch with all but the operands fixed: `runner(*operands(a, b, c), *tail)` into a
    fresh C of `shape`. `operands` makes the kernel's leading arguments (the tensors themselves for a
    pointer kernel, descriptors over them for a TMA one); a call whose a, b or C starts off 16 bytes,
    or one made while the farm compiles ahead, goes to `fallback` (the variant's launcher)."""

    __slots__ = ("device", "dtype", "fallback", "operands", "runner", "shape", "tail")

    def __init__(self, runner, operands, tail, shape, device, dtype, fallback) -> None:
        self.runner, self.operands, self.tail = runner, operands, tail
        self.shape, self.device, self.dtype, self.fallback = shape, device, dtype, fallback

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = torch.empty(self.shape, device=self.device, dtype=self.dtype)
        if (a.data_ptr() | b.data_ptr() | c.data_ptr()) % 16 or COMPILE_ONLY.get():
            return self.fallback(a, b)
        self.runner(*self.operands(a, b, c), *self.tail)
        return c


def pointer_operands(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple:
    """A pointer kernel's leading arguments: the tensors."""
    return a, b, c


def bounded_put(table: dict, key: tuple, value: Any, max_keys: int) -> None:
    """table[key] = value, the oldest key dropped first once the table holds max_keys."""
    if len(table) >= max_keys:
        del table[next(iter(table))]  # dicts keep insertion order: the oldest key
    table[key] = value
