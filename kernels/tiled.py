"""`tiled`: a 2-D grid, one program per output tile; program (i, j) computes tile (i, j).

The hardware walks the grid with axis 0 fastest, so consecutive programs cover one tile column
block and all the A row blocks: the plain order that the grouped schedule improves on once the
operands stop fitting in L2.
"""

import torch
import triton
import triton.language as tl

from kernels.config import MatmulConfig
from kernels.launching import BoundCall, DirectCalls, binds
from kernels.operands import check_operands
from kernels.registry import register_variant
from kernels.schedule import cdiv
from kernels.tile import (
    bind_pointer,
    pointer_constexprs,
    pointer_key,
    pointer_layout,
    store_tile,
    tile_accumulate,
)


def tiled_tile(pid_m: int, pid_n: int) -> tuple[int, int]:
    """The 2-D grid's mapping is the identity: program (pid_m, pid_n) owns tile (pid_m, pid_n)."""
    return pid_m, pid_n


@triton.jit
def _tiled_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    A_ALIGN: tl.constexpr = 1, B_ALIGN: tl.constexpr = 1, C_ALIGN: tl.constexpr = 1,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tile_accumulate(a_ptr, b_ptr, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                          pid_m, pid_n, 0, K, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION, A_ALIGN, B_ALIGN)
    store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_ALIGN)


# Called directly after a key's first launch, as every pointer kernel here is (`kernels.grouped`).
_CALLS = DirectCalls(_tiled_kernel)


@register_variant("tiled", config_space="tiled")
def tiled(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """2-D grid, one program per output tile."""
    m, n, k = check_operands(a, b, cfg)
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    grid = (cdiv(m, cfg.block_m), cdiv(n, cfg.block_n))
    strides, aligns = pointer_layout(a, b, c)
    _CALLS.launch(
        pointer_key(a, b, c, strides, aligns, cfg), grid, (a, b, c, m, n, k, *strides),
        pointer_constexprs(cfg, aligns),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return c


@binds("tiled")
def _bind(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback) -> BoundCall | None:
    """`tiled` at cfg for operands like a and b, its compiled kernel held (`bound_launch`)."""
    return bind_pointer(_CALLS, a, b, cfg, fallback)
