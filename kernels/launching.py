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
import copy
from collections.abc import Callable
from typing import Any

import torch
from triton import knobs
from triton.compiler.compiler import CompiledKernel
from triton.runtime import driver

from kernels import registry, route_key
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
            values = tuple(constexprs[name] for name in self.kernel.arg_names[len(args) :])
            runner = below_triton(compiled, (*grid, 1, 1)[:3], (*args, *values))
            bounded_put(self.table, key, (runner, values), self.max_keys)


def below_triton(compiled: CompiledKernel, grid: tuple[int, int, int], kernel_args: tuple) -> Callable:
    """A compiled kernel's runner for `grid` that calls Triton's C launcher itself, for arguments like
    `kernel_args`; Triton's own runner (`compiled[grid]`) wherever that cannot be shown to be the same.

    Triton's runner, on every launch, asks for the device, builds launch metadata for its launch hooks
    and goes through its launcher's Python `__call__` (two scratch checks), whose C launch then calls
    the two hook chains, empty unless a profiler added to them: about a dozen Python calls around one C
    call. Below it, a launch is the C call with the current stream and the arguments Triton passes,
    its metadata and hooks None: one split-K launch took 7.7-10.1 us of host time against 14.7-16.0
    through Triton's runner, every built-in's kernels 0.63-0.92x (H100 host, benchmarks/
    launch_overhead.py's `direct_floor_us` and `triton_floor_us`). What Triton passes is not guessed:
    its runner is called once over a zero grid (which launches nothing) with its launcher's `launch`
    replaced by a recorder on copies of the compiled kernel and launcher (nothing shared is touched),
    and the recorded call is the template: where it has the grid, the stream, the hook chains, the
    metadata and `kernel_args`, those are put in; any other layout (another Triton, a kernel needing
    scratch memory, a sanitizer's extra arguments) keeps Triton's runner. A hook added later sends each
    launch through Triton's runner, so a profiler sees every launch."""
    triton_runner = compiled[grid]
    launcher = getattr(compiled, "_run", None)  # CompiledKernel.run's store (3.4 through 3.9)
    if (
        launcher is None
        or "launch" not in getattr(launcher, "__dict__", ())
        or getattr(launcher, "global_scratch_size", 1)
        or getattr(launcher, "profile_scratch_size", 1)
    ):
        return triton_runner
    runtime = knobs.runtime

    def hooked() -> bool:  # read at each launch too: a profiler may add a hook, or replace a chain
        enter_now, leave_now = runtime.launch_enter_hook, runtime.launch_exit_hook
        return getattr(enter_now, "calls", True) or getattr(leave_now, "calls", True)

    if hooked():  # a hook now, or a hook that is not a chain
        return triton_runner
    enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
    current_device, current_stream = driver.active.get_current_device, driver.active.get_current_stream
    recorded = []
    spy, dry = copy.copy(launcher), copy.copy(compiled)
    spy.launch, dry._run = lambda *call: recorded.append(call), spy
    try:
        dry[(0, 0, 0)](*kernel_args)
    finally:
        dry.module = None  # the copy shares the kernel's module: its __del__ (3.9) must not unload it
    stream = current_stream(current_device())
    template = _launch_template(recorded, kernel_args, stream, enter, leave)
    if template is None:
        return triton_runner
    fixed, packed = template
    launch, (gx, gy, gz) = launcher.launch, grid

    if packed:  # the kernel's arguments as one tuple (Triton 3.9)

        def direct(*args):
            if hooked():
                return triton_runner(*args)
            return launch(gx, gy, gz, current_stream(current_device()), *fixed, args)

    else:  # flat after the fixed ones (Triton 3.4-3.6)

        def direct(*args):
            if hooked():
                return triton_runner(*args)
            return launch(gx, gy, gz, current_stream(current_device()), *fixed, *args)

    direct.triton_runner = triton_runner  # the same launch through Triton (benchmarks' floor)
    return direct


def _launch_template(recorded: list[tuple], kernel_args: tuple, stream, enter, leave) -> tuple | None:
    """From the one call Triton's runner made to its C launcher over a zero grid: the arguments between
    the stream and the kernel's own, with the launch metadata and hooks made None, and whether the
    kernel's arguments went as one tuple; None for a call of any other layout."""
    if len(recorded) != 1:
        return None
    call, n = recorded[0], len(kernel_args)

    def same(given) -> bool:  # the very objects passed, not equal ones
        return len(given) == n and all(x is y for x, y in zip(given, kernel_args))

    if len(call) > n and same(call[len(call) - n :]):
        head, packed = call[: len(call) - n], False
    elif isinstance(call[-1], tuple) and same(call[-1]):
        head, packed = call[:-1], True
    else:
        return None
    hooks = [i for i in range(5, len(head) - 1) if head[i] is enter and head[i + 1] is leave]
    if tuple(head[:4]) != (0, 0, 0, stream) or len(hooks) != 1:
        return None
    at = hooks[0]  # the launch metadata sits just before the hooks in every layout that has them
    return (*head[4 : at - 1], None, None, None, *head[at + 2 :]), packed


# variant name -> bind(a, b, cfg, fallback): a callable (a, b) -> a @ b for operands like a and b, or None
_BINDERS: dict[str, Callable] = {}


def binds(variant: str) -> Callable[[Callable], Callable]:
    """Decorator: the function that binds `variant`'s launch to one problem (`bound_launch`); from then on
    the registered variant launches through `KeptBindings`. It follows the variant's registration."""

    def register(bind: Callable) -> Callable:
        _BINDERS[variant] = bind
        registry.wrap_launcher(variant, lambda launch: KeptBindings(variant, launch))
        return bind

    return register


# What tells repeated calls apart: the operands' sizes, strides, dtypes and devices (kernels/route_key.py)
_tensors_key = route_key.key_function()


class KeptBindings:
    """A variant's launcher (`get_variant(name).launch`) that serves a call like one it served before
    (the operands' sizes, strides, dtypes and devices, and the config) through its launch bound to that
    problem (`bound_launch`), kept per such key, at most `max_keys`, the oldest dropped first.

    A launcher makes its kernel's key from the operands on every call (the checks, strides, alignments
    and the key's hash): 16.5 us a call for `tiled` at 512x512x32768 against 11.5 for the same kernel
    through kernels.matmul's bound route, and 7.1 for the compiled kernel alone (H100 host); kept, with
    launches below Triton's runner, 11.7-12.6 against 8.8-9.5 through Triton's runner (another). The bound
    launch allocates C, checks the operands' 16-byte starts and calls the runner; a call whose starts
    differ, one made while the farm compiles ahead, or operands the key cannot tell (a tensor
    subclass, a gradient to record) takes the launcher itself. Where binding fails (nothing compiled:
    the interpreter), the key keeps the launcher."""

    __slots__ = ("__wrapped__", "bound", "max_keys", "variant")

    def __init__(self, variant: str, launch: Callable, max_keys: int = 1024) -> None:
        self.variant, self.__wrapped__, self.max_keys = variant, launch, max_keys
        self.bound: dict[tuple, Callable | bool] = {}  # (tensors, cfg) -> bound launch, or False

    def __reduce__(self):  # pickled (sent to a Ray worker) without its bindings: their runners stay here
        return KeptBindings, (self.variant, self.__wrapped__, self.max_keys)

    def __call__(self, a: torch.Tensor, b: torch.Tensor, cfg) -> torch.Tensor:
        tensors = _tensors_key(a, b)
        if tensors is None:
            return self.__wrapped__(a, b, cfg)
        key = (tensors, cfg)
        bound = self.bound.get(key)
        if bound:
            return bound(a, b)
        c = self.__wrapped__(a, b, cfg)  # checks the operands; compiles the key's kernels once
        if bound is None and not COMPILE_ONLY.get():  # compiled ahead, nothing is kept: bind when run
            launch = self.__wrapped__
            bound = bound_launch(self.variant, a, b, cfg, lambda a, b: launch(a, b, cfg))
            bounded_put(self.bound, key, bound or False, self.max_keys)
        return c


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
