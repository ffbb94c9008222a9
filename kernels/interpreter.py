"""Running the kernels under TRITON_INTERPRET=1 (on a machine without a GPU).

Triton's interpreter stores bfloat16 as uint16 and gets two things wrong that the GPU does right:
- its `tl.dot` multiplies the uint16 bit patterns (triton-lang/triton#11584, closed unfixed:
  "we just don't support it yet"), so a bf16 matmul returns values near 1e10;
- its fp32 -> bf16 cast truncates, where the GPU rounds to nearest even: the output error
  doubles (3.2e-3 against 1.7e-3 for a 100x70x200 product), eating the accuracy margin.
`fix_bf16()` makes both match the GPU; it changes nothing on a GPU and nothing for fp16/fp32.
Every launcher applies it at its first launch of an interpreted kernel (`fix_bf16_for`, from
kernels.launching.DirectCalls), so a library call such as `kernels.matmul` is right without the
caller knowing; nothing is patched at import time.
"""

from __future__ import annotations

import numpy as np


def _bf16_to_fp32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)  # bf16 is the top half of an fp32


def _fp32_to_bf16_rtne(values: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)


def fix_bf16_for(kernel) -> None:
    """fix_bf16() when `kernel` is one Triton's interpreter runs (TRITON_INTERPRET=1 was set when it
    was defined); nothing for a compiled kernel."""
    from triton.runtime.interpreter import InterpretedFunction

    if isinstance(kernel, InterpretedFunction):
        fix_bf16()


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
