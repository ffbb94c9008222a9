"""Running the kernels under TRITON_INTERPRET=1 (on a machine without a GPU).

Triton's interpreter stores bfloat16 as uint16 and gets two things wrong that the GPU does right:
- its `tl.dot` multiplies the uint16 bit patterns (triton-lang/triton#11584, closed unfixed:
  "we just don't support it yet"), so a bf16 matmul returns values near 1e10;
- its fp32 -> bf16 cast truncates, where the GPU rounds to nearest even: the output error
  doubles (3.2e-3 against 1.7e-3 for a 100x70x200 product), eating the accuracy margin.
`fix_bf16()` makes both match the GPU; it changes nothing on a GPU and nothing for fp16/fp32.
The interpreter also does work whose result is in place already or thrown away:
`skip_repatching_nested_calls()` and `skip_discarded_overflow_checks()` leave it out. Every launcher
applies all three (`prepare()`) at its first launch of an interpreted kernel (`prepare_for`, from
kernels.launching.DirectCalls), so a library call such as `kernels.matmul` is right without the
caller knowing, in any process (the farm's workers and `farm sweep` processes included); nothing is
patched at import time.
"""

from __future__ import annotations

import inspect
import threading

import numpy as np


def _bf16_to_fp32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)  # bf16 is the top half of an fp32


def _fp32_to_bf16_rtne(values: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)


def prepare_for(kernel) -> None:
    """prepare() when `kernel` is one Triton's interpreter runs (TRITON_INTERPRET=1 was set when it
    was defined); nothing for a compiled kernel."""
    from triton.runtime.interpreter import InterpretedFunction

    if isinstance(kernel, InterpretedFunction):
        prepare()


def prepare() -> None:
    """Triton's interpreter made right for bf16, and rid of its repeated and discarded work."""
    fix_bf16()
    skip_repatching_nested_calls()
    skip_discarded_overflow_checks()


def fix_bf16() -> None:
    from triton.runtime import interpreter

    builder, tl = interpreter.InterpreterBuilder, interpreter.tl
    if getattr(builder, "_farm_bf16_fixed", False):
        return
    dot, cast = builder.create_dot, builder.cast_impl

    def as_fp32(handle):
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        return interpreter.TensorHandle(_bf16_to_fp32(handle.data), tl.float32)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return dot(self, as_fp32(a), as_fp32(b), d, input_precision, max_num_imprecise_acc)

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return interpreter.TensorHandle(_fp32_to_bf16_rtne(src.data), tl.bfloat16)
        return cast(self, src, dst_type)

    builder.create_dot, builder.cast_impl = create_dot, cast_impl
    builder._farm_bf16_fixed = True


def skip_repatching_nested_calls() -> None:
    """Triton's interpreter patches triton.language (every builtin of tl, tl.core, tl.tensor and
    tl.math, found with inspect.getmembers) at each grid launch, and again at every call of a
    @triton.jit helper inside the kernel, in every program: kernels.tile's tile_accumulate and
    store_tile, and Triton's own tl.cdiv and tl.zeros (which see tl.core, where a kernel sees only
    tl). A helper's patches are not undone when it returns: those of attributes the launch set too
    go back when the launch ends, the rest stay. So a nested call whose function sees only language
    modules that this thread's running launch, or a helper before it in that launch, patched skips
    the repeat; the first call that sees another is patched as before, and so is a call outside a
    launch. What the kernels compute is unchanged, and nothing changes on a GPU (no interpreted
    kernel). Idempotent.

    Measured on the 2-core CPU VM (shared with other work; medians): 15 launches of tiled, grouped
    and split-K at 40x48x64 bf16 (blocks of 16) patched 2445 times, 30 with the repeats skipped, in
    4.2 -> 2.8 s of CPU; tests/farm's tiny spec swept by `farm sweep --workers 2` (27 points, its
    workers in Ray processes of their own) 31-36 -> 27-29 s."""
    from triton.runtime import interpreter

    executor, function = interpreter.GridExecutor, interpreter.InterpretedFunction
    if getattr(function, "_farm_nested_skip", False):
        return
    langs = (interpreter.tl, interpreter.tl.core)
    running = threading.local()  # .patched: the language modules each of this thread's launches patched

    def seen(fn) -> frozenset[int]:
        return frozenset(id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in langs)

    launch, call = executor.__call__, function.__call__

    def grid_call(self, *args, **kwargs):
        patched = running.__dict__.setdefault("patched", [])
        patched.append(seen(self.fn))
        try:
            return launch(self, *args, **kwargs)
        finally:
            patched.pop()

    def nested_call(self, *args, **kwargs):
        patched = getattr(running, "patched", None)
        if not patched:
            return call(self, *args, **kwargs)
        needs = seen(self.fn)
        if not needs <= patched[-1]:
            patched[-1] |= needs  # patched by this call, and left so until the launch ends
            return call(self, *args, **kwargs)
        fn = self.rewrite()  # Triton's InterpretedFunction.__call__ without its _patch_lang
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise interpreter.InterpreterError(repr(e)) from e

    executor.__call__, function.__call__ = grid_call, nested_call
    function._farm_nested_skip = True


def skip_discarded_overflow_checks() -> None:
    """Triton's interpreter checks every integer +, - and * on 32 bits or fewer for overflow
    (TritonSemantic.binary_op_sanitize_overflow_impl: both operands cast to int64, the operation
    again, two comparisons and an and), and hands the result to device_assert, which drops it: the
    interpreter's options have debug off (InterpreterOptions), and nothing in Triton turns it on.
    With debug off, the check is not computed (sanitize_overflow off in those options): the same
    values, asserts and errors as before, for half the CPU time of the kernels here (their offset
    and mask arithmetic is int32). Options with debug on keep their checks; nothing changes on a GPU.

    Measured on the 2-core CPU VM (medians of 3): 20 launches of tiled, grouped, split-K and
    stream-K at 40x48x64 bf16 (blocks of 16), nested calls already unpatched, 3.2 -> 1.6 s of CPU,
    bitwise the same products."""
    from dataclasses import replace

    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    if builder.options.sanitize_overflow and not builder.options.debug:
        builder.options = replace(builder.options, sanitize_overflow=False)
