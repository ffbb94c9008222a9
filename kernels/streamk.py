"""`streamk`: one program per SM, each taking an equal, contiguous share of all the K iterations
of all the output tiles (Stream-K, Osama et al., 2023). A program that covers a whole tile
stores it; a tile shared by two or more programs is summed with fp32 atomics in the tile's slot,
and the contributor that completes its K iterations stores it (`kernels.scratch`, as `splitk`:
one launch, no zeroed copy of C, the same nondeterminism).

Where split-K picks one factor for every tile, stream-K balances exactly: 16 tiles of
512 x 512 x 32768 (512 K-iterations each at BLOCK_K=64) over 132 SMs is 62 iterations a program,
about an eighth of a tile, where split-K 8 leaves 4 SMs idle and split-K 16 queues a second wave.
"""

import torch
import triton
import triton.language as tl

from kernels.config import MatmulConfig
from kernels.launching import BoundCall, DirectCalls, binds
from kernels.operands import check_operands
from kernels.registry import register_variant
from kernels.schedule import cdiv, grouped_tile_jit, multiprocessor_count
from kernels.scratch import contribute, take_sum, zeroed_scratch
from kernels.tile import (
    bind_pointer,
    pointer_constexprs,
    pointer_key,
    pointer_layout,
    store_tile,
    tile_accumulate,
)


def streamk_work(pid: int, tiles: int, iters_per_tile: int, programs: int) -> list[tuple[int, int, int]]:
    """(tile, first K iteration, end K iteration) pieces that program pid computes, in order."""
    total = tiles * iters_per_tile
    it, end = pid * total // programs, (pid + 1) * total // programs
    pieces = []
    while it < end:
        tile, k0 = divmod(it, iters_per_tile)
        k1 = min(iters_per_tile, k0 + end - it)
        pieces.append((tile, k0, k1))
        it += k1 - k0
    return pieces


@triton.jit
def streamk_share(pid, total, PROGRAMS):
    """[it, end): program pid's equal contiguous share of `total` K iterations (`streamk_work`)."""
    return pid * total // PROGRAMS, (pid + 1) * total // PROGRAMS


@triton.jit
def streamk_piece(it, end, iters_per_tile):
    """(tile, k0, k1): the piece of one tile that a share ending at `end` computes from iteration `it`."""
    k0 = it % iters_per_tile
    return it // iters_per_tile, k0, tl.minimum(iters_per_tile, k0 + end - it)


@triton.jit
def _streamk_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr, counts_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, PROGRAMS,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    A_ALIGN: tl.constexpr = 1, B_ALIGN: tl.constexpr = 1, C_ALIGN: tl.constexpr = 1,
):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    iters_per_tile = tl.cdiv(K, BLOCK_K)
    it, end = streamk_share(pid, num_pid_m * num_pid_n * iters_per_tile, PROGRAMS)
    while it < end:
        tile, k0, k1 = streamk_piece(it, end, iters_per_tile)
        pid_m, pid_n = grouped_tile_jit(tile, num_pid_m, num_pid_n, GROUP_M)
        k_start, k_end = k0 * BLOCK_K, tl.minimum(k1 * BLOCK_K, K)
        acc = tile_accumulate(a_ptr, b_ptr, M, N, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
                              k_start, k_end, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION, A_ALIGN, B_ALIGN)
        if (k0 == 0) & (k1 == iters_per_tile):  # the whole tile is this program's: no one else adds to it
            store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_ALIGN)
        else:
            slot, last = contribute(ws_ptr, counts_ptr, tile, acc, k1 - k0, iters_per_tile, BLOCK_M, BLOCK_N)
            if last:  # the contributor that completed the tile stores the sum
                total = take_sum(slot, counts_ptr, tile)
                store_tile(c_ptr, total, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_ALIGN)
        it += k1 - k0


def streamk_programs(device: torch.device, m: int, n: int, k: int, cfg: MatmulConfig) -> int:
    """One program per SM, never more than there are K iterations to share."""
    iterations = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n) * cdiv(k, cfg.block_k)
    return min(multiprocessor_count(device), iterations)


# Called directly after a key's first launch, as every pointer kernel here is (`kernels.grouped`).
_CALLS = DirectCalls(_streamk_kernel)


@register_variant("streamk", config_space="grouped", atomic=True)
def streamk(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Stream-K: one program per SM, equal shares of all K iterations, atomics where tiles are shared."""
    m, n, k = check_operands(a, b, cfg)
    programs = streamk_programs(a.device, m, n, k, cfg)
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    ws, counts = zeroed_scratch(tiles, cfg.block_m, cfg.block_n, a.device)
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    strides, aligns = pointer_layout(a, b, c)
    constexprs = pointer_constexprs(cfg, aligns, GROUP_M=cfg.group_m)
    _CALLS.launch(
        pointer_key(a, b, c, strides, aligns, cfg, programs), (programs,),
        (a, b, c, ws, counts, m, n, k, *strides, programs), constexprs,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return c



@binds("streamk")
def _bind(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback) -> BoundCall | None:
    """`streamk` at cfg for operands like a and b, its compiled kernel held (`bound_launch`); its kept
    slots and counters (one a tile) looked up per call."""
    (m, k), n = a.shape, b.shape[1]
    programs = streamk_programs(a.device, m, n, k, cfg)
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    return bind_pointer(
        _CALLS, a, b, cfg, fallback, key_extra=(programs,), args_extra=(programs,), scratch_tiles=tiles
    )
