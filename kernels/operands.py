"""Checks every launcher runs before it launches: shapes, dtypes, devices."""

from __future__ import annotations

import torch

from kernels.config import MatmulConfig
from kernels.space import DTYPES


def check_operands(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> tuple[int, int, int]:
    """(M, N, K) of C = A @ B, or a clear error for operands no variant can multiply."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise TypeError(f"a and b must be tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"a and b must be 2-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    (m, k), (k_b, n) = a.shape, b.shape
    if k != k_b:
        raise ValueError(f"inner dimensions differ: a is {m}x{k}, b is {k_b}x{n}")
    if min(m, n, k) == 0:
        raise ValueError(f"empty matmul {m}x{n}x{k}")
    if a.dtype != b.dtype:
        raise TypeError(f"a and b must share a dtype, got {a.dtype} and {b.dtype}")
    if a.dtype not in DTYPES.values():
        raise TypeError(f"unsupported dtype {a.dtype}; supported: {', '.join(DTYPES)}")
    if a.device != b.device:
        raise ValueError(f"a and b are on different devices: {a.device} and {b.device}")
    if cfg.input_precision != "ieee" and a.dtype != torch.float32:
        raise ValueError(f"input_precision={cfg.input_precision!r} applies to float32 inputs, not {a.dtype}")
    return m, n, k
