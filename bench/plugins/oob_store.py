"""A plugin kernel with an out-of-bounds store, for the farm's crash handling on a real GPU.

With block_n == 64 every program also stores one value 2^40 elements past the output: an
illegal address, which poisons the process's CUDA context. Other configs are a correct kernel.
"""

import torch
import triton
import triton.language as tl

from kernels import MatmulConfig, register_variant
from kernels.schedule import grouped_tile_jit
from kernels.tile import store_tile, tile_accumulate


@triton.jit
def _oob_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP_M: tl.constexpr, OUT_OF_BOUNDS: tl.constexpr):
    pid_m, pid_n = grouped_tile_jit(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    acc = tile_accumulate(a_ptr, b_ptr, M, N, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n, 0, K,
                          BLOCK_M, BLOCK_N, BLOCK_K, "ieee", 1)
    store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, 1)
    if OUT_OF_BOUNDS:
        tl.store(c_ptr + (1 << 40) + pid_m, 1.0)


@register_variant("oob_store", config_space="grouped")
def launch(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Grouped kernel; with block_n == 64 it also writes far out of bounds."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n),)
    _oob_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                      c.stride(1), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
                      GROUP_M=cfg.group_m, OUT_OF_BOUNDS=cfg.block_n == 64, num_warps=cfg.num_warps,
                      num_stages=cfg.num_stages)
    return c
