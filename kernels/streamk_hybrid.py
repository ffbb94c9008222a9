"""`streamk_hybrid`: data-parallel for the full waves, stream-K for the last partial wave only.

With P programs (one per SM) and T output tiles, the first floor(T / P) * P tiles go whole to
programs pid, pid + P, ... (no atomics, stored in the output dtype), and only the K iterations
of the remaining T mod P tiles are shared out in equal contiguous ranges, as `streamk` shares all
of them. Plain stream-K pays fp32 atomics on every tile and a zeroed fp32 copy of C converted
afterwards; here a 3000x5000 output in 128x256 tiles (480 tiles on 132 SMs) keeps 396 tiles
data-parallel and shares 84.

Shared tiles are summed in fp32 slots of (T mod P) tiles (under one wave of tiles: 84 x 128 KiB =
10.5 MiB for the example) with fp32 atomics, and the contributor that completes a tile's K
iterations stores it in the output dtype (`kernels.scratch`: slots and counters kept zeroed by the
kernel itself, no memset a call). Sums of shared tiles depend on the atomics' order: not bitwise
reproducible.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.config import MatmulConfig
from kernels.launching import BoundCall, DirectCalls, binds
from kernels.operands import check_operands
from kernels.registry import register_variant
from kernels.schedule import cdiv, grouped_tile_jit
from kernels.scratch import contribute, take_sum, zeroed_scratch
from kernels.streamk import streamk_piece, streamk_programs, streamk_share, streamk_work
from kernels.tile import (
    bind_pointer,
    pointer_constexprs,
    pointer_key,
    pointer_layout,
    store_tile,
    tile_accumulate,
)


def hybrid_split(tiles: int, programs: int) -> tuple[int, int]:
    """(data-parallel tiles, stream-K tiles): the full waves, and the last partial wave."""
    data_parallel = tiles // programs * programs
    return data_parallel, tiles - data_parallel


def hybrid_work(pid: int, tiles: int, iters_per_tile: int, programs: int) -> list[tuple[int, int, int]]:
    """(tile, first K iteration, end K iteration) pieces program pid computes, in order."""
    data_parallel, shared = hybrid_split(tiles, programs)
    pieces = [(tile, 0, iters_per_tile) for tile in range(pid, data_parallel, programs)]
    pieces += [
        (data_parallel + tile, k0, k1) for tile, k0, k1 in streamk_work(pid, shared, iters_per_tile, programs)
    ]
    return pieces


@triton.jit
def _streamk_hybrid_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    ws_ptr,
    counts_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    PROGRAMS,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    A_ALIGN: tl.constexpr = 1,
    B_ALIGN: tl.constexpr = 1,
    C_ALIGN: tl.constexpr = 1,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    iters_per_tile = tl.cdiv(K, BLOCK_K)
    tiles = num_pid_m * num_pid_n
    data_parallel = tiles // PROGRAMS * PROGRAMS
    for tile in range(pid, data_parallel, PROGRAMS):  # the full waves: whole tiles, plain stores
        pid_m, pid_n = grouped_tile_jit(tile, num_pid_m, num_pid_n, GROUP_M)
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
            INPUT_PRECISION,
            A_ALIGN,
            B_ALIGN,
        )
        store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_ALIGN)
    # The last partial wave: equal shares of its K iterations (`streamk_work`).
    it, end = streamk_share(pid, (tiles - data_parallel) * iters_per_tile, PROGRAMS)
    while it < end:
        shared_tile, k0, k1 = streamk_piece(it, end, iters_per_tile)
        pid_m, pid_n = grouped_tile_jit(data_parallel + shared_tile, num_pid_m, num_pid_n, GROUP_M)
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
            k0 * BLOCK_K,
            tl.minimum(k1 * BLOCK_K, K),
            BLOCK_M,
            BLOCK_N,
            BLOCK_K,
            INPUT_PRECISION,
            A_ALIGN,
            B_ALIGN,
        )
        if (k0 == 0) & (k1 == iters_per_tile):  # the whole tile is this program's
            store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_ALIGN)
        else:
            slot, last = contribute(
                ws_ptr, counts_ptr, shared_tile, acc, k1 - k0, iters_per_tile, BLOCK_M, BLOCK_N
            )
            if last:  # the last contributor stores the sum
                total_acc = take_sum(slot, counts_ptr, shared_tile)
                store_tile(
                    c_ptr, total_acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_ALIGN
                )
        it += k1 - k0


def shared_scratch(
    m: int, n: int, programs: int, cfg: MatmulConfig, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """The kept zeroed fp32 slots and counters of the last partial wave's shared tiles (`hybrid_split`)."""
    _, shared = hybrid_split(cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n), programs)
    return zeroed_scratch(shared, cfg.block_m, cfg.block_n, device)


# Called directly after a key's first launch, as every pointer kernel here is (`kernels.grouped`). The
# slots and counters come from PyTorch's allocator: their starts are always aligned.
_CALLS = DirectCalls(_streamk_hybrid_kernel)


@register_variant("streamk_hybrid", config_space="grouped", atomic=True)
def streamk_hybrid(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Full waves data-parallel, stream-K over the last partial wave (fp32 slots, last one stores)."""
    m, n, k = check_operands(a, b, cfg)
    programs = streamk_programs(a.device, m, n, k, cfg)
    ws, counts = shared_scratch(m, n, programs, cfg, a.device)
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    strides, aligns = pointer_layout(a, b, c)
    constexprs = pointer_constexprs(cfg, aligns, GROUP_M=cfg.group_m)
    _CALLS.launch(
        pointer_key(a, b, c, strides, aligns, cfg, programs), (programs,),
        (a, b, c, ws, counts, m, n, k, *strides, programs), constexprs,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return c


@binds("streamk_hybrid")
def _bind(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback) -> BoundCall | None:
    """`streamk_hybrid` at cfg for operands like a and b, its compiled kernel held (`bound_launch`); the
    kept slots and counters of its shared tiles looked up per call."""
    (m, k), n = a.shape, b.shape[1]
    programs = streamk_programs(a.device, m, n, k, cfg)
    _, shared = hybrid_split(cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n), programs)
    return bind_pointer(
        _CALLS, a, b, cfg, fallback, key_extra=(programs,), args_extra=(programs,), scratch_tiles=shared
    )
