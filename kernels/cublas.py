"""`cublas`: torch.matmul, the library baseline every variant is compared with; and `padded_matmul`,
the library over operands whose rows it pads to 16 bytes (what `kernels.matmul` serves where that
wins, as Inductor does; not a variant: the farm measures the library as it is).

fp32 inputs follow the config's input_precision ("ieee" -> full fp32, "tf32" -> TF32 tensor
cores) through torch's float32 matmul precision, restored afterwards.
"""

import contextlib

import torch
import torch.nn.functional as F

from kernels.config import MatmulConfig
from kernels.operands import check_operands
from kernels.registry import register_variant
from kernels.sizes import cdiv
from kernels.space import TMA_ALIGN_BYTES

_TORCH_PRECISION = {"ieee": "highest", "tf32": "high", "tf32x3": "highest"}


@contextlib.contextmanager
def _float32_precision(input_precision: str):
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(_TORCH_PRECISION[input_precision])
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@register_variant("cublas", config_space="library", baseline=True)
def cublas(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """torch.matmul (cuBLAS on NVIDIA GPUs): the baseline."""
    check_operands(a, b, cfg)
    if a.dtype != torch.float32:
        return torch.matmul(a, b)
    with _float32_precision(cfg.input_precision):
        return torch.matmul(a, b)


def whole_rows(size: int, element_size: int) -> int:
    """size rounded up to rows of whole 16-byte units: 4097 bf16 -> 4104."""
    per_unit = TMA_ALIGN_BYTES // element_size
    return cdiv(size, per_unit) * per_unit


def padded_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.matmul over copies whose K and N are zero-padded to whole 16-byte rows (as Inductor's
    `pad_mm` does); C is an (M, N) view of the padded product. Operands already aligned are not copied.

    Why: cuBLAS's fast kernels need rows that start on 16 bytes. At 4097^3 bf16 torch.matmul took
    1050 us, and 181.5 over operands padded to 4104, which made Inductor's 225 us of GPU time ahead of
    this project's best Triton kernel (245.8; H200, visit 116, Inductor's autotuning log).
    """
    k, n = a.shape[1], b.shape[1]
    k_pad, n_pad = whole_rows(k, a.element_size()), whole_rows(n, b.element_size())
    if k_pad != k:
        a = F.pad(a, (0, k_pad - k))
    if (k_pad, n_pad) != (k, n):
        b = F.pad(b, (0, n_pad - n, 0, k_pad - k))
    c = torch.matmul(a, b)
    return c[:, :n] if n_pad != n else c
