"""Accuracy against an fp64 reference: relative Frobenius error and a per-dtype tolerance.

The reference multiplies the same (already rounded) inputs in fp64, so a correct kernel's error
comes from two places only: rounding the fp32 accumulator to the output dtype (at most one unit
roundoff u per element; the Frobenius norm of it averages about 0.4 u) and the fp32 accumulation
itself, which grows like sqrt(K) * 2^-24 for random data. TF32 also rounds each input to 10
mantissa bits (2^-11). The tolerance is u_out + 2 u_in + 16 sqrt(K) 2^-24: for bf16 at K=200
about 3.9e-3, against about 1.5e-3 measured, while a dropped 16x16 tile of a 100x100 output is
an error of 0.16 and a missing K mask at K=200, BLOCK_K=32 is about 0.3. NaN never passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# Unit roundoff of the output dtype: fp32 outputs are the accumulator itself.
OUTPUT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float32: 0.0}
# Rounding of the inputs inside the dot: only TF32 (10 mantissa bits) rounds them.
INPUT_ROUNDOFF = {"ieee": 0.0, "tf32": 2.0**-11, "tf32x3": 0.0}
FP32_ROUNDOFF = 2.0**-24
ACCUMULATION_SAFETY = 16


def tolerance(dtype: torch.dtype, k: int, input_precision: str = "ieee") -> float:
    """Largest relative Frobenius error a correct C = A @ B in `dtype` may have."""
    u_in = INPUT_ROUNDOFF[input_precision] if dtype == torch.float32 else 0.0
    return OUTPUT_ROUNDOFF[dtype] + 2 * u_in + ACCUMULATION_SAFETY * math.sqrt(k) * FP32_ROUNDOFF


def reference_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.double() @ b.double()


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref||_F / ||ref||_F in fp64; inf if out has a NaN or Inf (an unwritten tile)."""
    if out.shape != ref.shape:
        raise ValueError(f"output shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    out = out.double()
    if not torch.isfinite(out).all():
        return math.inf
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item()


@dataclass(frozen=True)
class Accuracy:
    rel_err: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.rel_err <= self.tolerance


def check_accuracy(
    out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, k: int, input_precision: str = "ieee"
) -> Accuracy:
    return Accuracy(relative_error(out, ref), tolerance(dtype, k, input_precision))
