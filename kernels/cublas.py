"""`cublas`: torch.matmul, the library baseline every variant is compared with.

fp32 inputs follow the config's input_precision ("ieee" -> full fp32, "tf32" -> TF32 tensor
cores) through torch's float32 matmul precision, restored afterwards.
"""

import contextlib

import torch

from kernels.config import MatmulConfig
from kernels.operands import check_operands
from kernels.registry import register_variant

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
