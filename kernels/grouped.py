"""`grouped`: a 1-D grid remapped in GROUP_SIZE_M groups (the L2-friendly order).

Program pid takes tile `grouped_tile(pid, ...)` (kernels/schedule.py): GROUP_M tile rows are
walked column by column, so while a group runs, its GROUP_M row blocks of A and the current
column block of B are reused from L2 instead of re-read from DRAM. group_m = 1 is row-major.
"""

import torch
import triton
import triton.language as tl

from kernels.config import MatmulConfig
from kernels.launching import DirectCalls
from kernels.operands import check_operands
from kernels.registry import register_variant
from kernels.schedule import cdiv, grouped_tile_jit
from kernels.tile import pointer_constexprs, pointer_key, pointer_layout, store_tile, tile_accumulate


@triton.jit
def _grouped_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, ALIGN: tl.constexpr = 1,
):
    pid_m, pid_n = grouped_tile_jit(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    acc = tile_accumulate(a_ptr, b_ptr, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                          pid_m, pid_n, 0, K, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION, ALIGN)
    store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, ALIGN)


# Called directly after a key's first launch: Triton's JIT path binds and specialises every argument
# on each call, 11.6 us of host for a no-op kernel on the H200 host (visit 93), and below about 50 us
# of GPU an eager caller, and do_bench after an L2 flush of about 70 us, waits for the host.
_CALLS = DirectCalls(_grouped_kernel)


@register_variant("grouped", config_space="grouped")
def grouped(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """1-D grid in GROUP_SIZE_M program order."""
    m, n, k = check_operands(a, b, cfg)
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    grid = (cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n),)
    strides, align = pointer_layout(a, b, c)
    constexprs = pointer_constexprs(cfg, align, GROUP_M=cfg.group_m)
    _CALLS.launch(
        pointer_key(a, b, c, strides, align, cfg), grid, (a, b, c, m, n, k, *strides), constexprs,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return c
