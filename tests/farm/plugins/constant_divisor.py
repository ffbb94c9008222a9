"""A plugin with the classic grouped-order bug: pid_n divides by the constant GROUP_M, not the
last group's actual height, so some tiles are computed twice and others never."""

import torch
import triton
import triton.language as tl

from kernels import MatmulConfig, register_variant
from kernels.tile import store_tile, tile_accumulate


@triton.jit
def _buggy_grouped_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_in_group = GROUP_M * tl.cdiv(N, BLOCK_N)
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // GROUP_M  # the bug: GROUP_M, not group_size_m
    acc = tile_accumulate(
        a_ptr,
        b_ptr,
        M,
        N,
        stride_am,
        stride_ak,
        stride_bk,
        stride_bn,
        pid_m,
        pid_n,
        0,
        K,
        BLOCK_M,
        BLOCK_N,
        BLOCK_K,
        "ieee",
        1,  # A_ALIGN and B_ALIGN: no row-alignment claim
        1,
    )
    store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, 1)  # C_ALIGN 1


@register_variant("buggy_grouped", config_space="grouped")
def launch(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Grouped order with the constant-divisor bug."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n),)
    _buggy_grouped_kernel[grid](
        a,
        b,
        c,
        m,
        n,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        BLOCK_M=cfg.block_m,
        BLOCK_N=cfg.block_n,
        BLOCK_K=cfg.block_k,
        GROUP_M=cfg.group_m,
        num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
    )
    return c
