"""A plugin whose kernel cannot compile: it calls a function Triton does not know."""

import torch
import triton
import triton.language as tl

from kernels import MatmulConfig, register_variant


@triton.jit
def _broken_kernel(c_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(c_ptr + offs, tl.no_such_function(offs))


@register_variant("broken", config_space="tiled")
def launch(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Fails to compile, every time."""
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    _broken_kernel[(1,)](c, BLOCK=16)
    return c
