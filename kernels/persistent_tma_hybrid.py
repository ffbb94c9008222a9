"""`persistent_tma_hybrid`: `persistent_tma` for the full waves, stream-K for the last partial wave.

Why: a persistent grid of P programs over T tiles runs ceil(T / P) rounds, the last one
(T mod P) / P full. 3072^3 in 128x256 tiles is 288 tiles on 132 SMs: 2.18 waves run as 3, and
own Triton reached 0.83 of cuBLAS there (docs/bench/h200.csv, held out), against 0.97-1.03 at the
squares whose waves come out nearly whole. Here the first floor(T / P) * P tiles go whole to
programs pid, pid + P, ... exactly as in `persistent_tma` (TMA loads and stores, grouped order),
and only the K iterations of the T mod P tiles left are shared out in equal contiguous ranges, as
`streamk_hybrid` shares them (`hybrid_work` is the plan both follow): with 288 tiles, 264 whole
and 24 x 48 K iterations shared, 8.7 per program, so every program ends within one iteration of
the others instead of 108 programs idling through the last round.

Shared tiles are summed in an fp32 workspace with atomics; the contributor whose count completes a
tile's K iterations stores it through C's descriptor (`streamk_hybrid`'s fixup: a CTA barrier, an
acq_rel counter, loads that bypass L1). Not bitwise reproducible where tiles are shared.
Constraints and errors are `persistent_tma`'s (`check_tma`); whole waves (T mod P = 0) share
nothing and allocate no workspace.

Status: correct under the interpreter (tests/kernels/test_tma_and_hybrid.py); written in session 9
without a GPU, so neither compiled by Triton 3.6 nor timed yet (docs/perf-notes.md, next visit).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.config import MatmulConfig
from kernels.operands import check_operands
from kernels.persistent_tma import check_tma, operand_descriptor, output_descriptor, persistent_programs
from kernels.registry import register_variant
from kernels.schedule import grouped_tile_jit
from kernels.streamk import streamk_piece, streamk_share
from kernels.streamk_hybrid import contribute, shared_workspace


@triton.jit
def _product(a_desc, b_desc, off_m, off_n, k_first, k_end,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
             A_TRANSPOSED: tl.constexpr, B_TRANSPOSED: tl.constexpr,
             INPUT_PRECISION: tl.constexpr):  # fmt: skip
    """fp32 sum over K iterations [k_first, k_end) of one tile's A and B boxes."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(k_first, k_end):
        off_k = ki * BLOCK_K
        a = a_desc.load([off_k, off_m]).T if A_TRANSPOSED else a_desc.load([off_m, off_k])
        b = b_desc.load([off_n, off_k]).T if B_TRANSPOSED else b_desc.load([off_k, off_n])
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    return acc


@triton.jit
def _store(c_desc, acc, off_m, off_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """acc into C in two BLOCK_N/2 halves (the descriptor's box); the hardware clips past M and N."""
    left, right = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
    c_desc.store([off_m, off_n], left.to(c_desc.dtype))
    c_desc.store([off_m, off_n + BLOCK_N // 2], right.to(c_desc.dtype))


@triton.jit
def _persistent_tma_hybrid_kernel(
    a_desc, b_desc, c_desc, ws_ptr, counts_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr, A_TRANSPOSED: tl.constexpr, B_TRANSPOSED: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    tiles = num_pid_m * num_pid_n
    data_parallel = tiles // NUM_PROGRAMS * NUM_PROGRAMS
    # The full waves: whole tiles, as persistent_tma walks them (a flattened loop, so a tile's
    # epilogue overlaps the next one's loads; the epilogue recomputes its tile from its own counter).
    tile_c = pid - NUM_PROGRAMS
    for tile in tl.range(pid, data_parallel, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = grouped_tile_jit(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BLOCK_K
            a = a_desc.load([off_k, off_m]).T if A_TRANSPOSED else a_desc.load([off_m, off_k])
            b = b_desc.load([off_n, off_k]).T if B_TRANSPOSED else b_desc.load([off_k, off_n])
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        tile_c += NUM_PROGRAMS
        pid_m, pid_n = grouped_tile_jit(tile_c, num_pid_m, num_pid_n, GROUP_M)
        _store(c_desc, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)
    # The last partial wave: equal shares of its K iterations (`hybrid_work`).
    it, end = streamk_share(pid, (tiles - data_parallel) * k_tiles, NUM_PROGRAMS)
    while it < end:
        shared, k0, k1 = streamk_piece(it, end, k_tiles)
        pid_m, pid_n = grouped_tile_jit(data_parallel + shared, num_pid_m, num_pid_n, GROUP_M)
        acc = _product(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, k0, k1,
                       BLOCK_M, BLOCK_N, BLOCK_K, A_TRANSPOSED, B_TRANSPOSED, INPUT_PRECISION)  # fmt: skip
        if (k0 == 0) & (k1 == k_tiles):  # the whole tile is this program's
            _store(c_desc, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)
        else:
            slot, last = contribute(ws_ptr, counts_ptr, shared, acc, k1 - k0, k_tiles, BLOCK_M, BLOCK_N)
            if last:  # the last contributor stores the sum
                total = tl.load(slot, cache_modifier=".cg")
                _store(c_desc, total, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_M, BLOCK_N)
        it += k1 - k0


@register_variant("persistent_tma_hybrid", config_space="persistent_tma", atomic=True)
def persistent_tma_hybrid(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """persistent_tma for the full waves, stream-K (fp32 workspace, last one stores) for the partial one."""
    m, n, k = check_operands(a, b, cfg)
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    check_tma(a, b, c, cfg)
    programs = persistent_programs(a.device, m, n, cfg)
    ws, counts = shared_workspace(m, n, programs, cfg, a.device)
    a_desc, a_transposed = operand_descriptor(a, cfg.block_m, cfg.block_k)
    b_desc, b_transposed = operand_descriptor(b, cfg.block_k, cfg.block_n)
    c_desc = output_descriptor(c, cfg)
    _persistent_tma_hybrid_kernel[(programs,)](
        a_desc, b_desc, c_desc, ws, counts, m, n, k,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
        NUM_PROGRAMS=programs, A_TRANSPOSED=a_transposed, B_TRANSPOSED=b_transposed,
        INPUT_PRECISION=cfg.input_precision, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return c
