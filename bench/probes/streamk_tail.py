"""The bands' tail through stream-K over TMA, beside the shipped bands and cuBLAS.

    python bench/probes/streamk_tail.py --out $OUT/streamk_tail.csv     # H200, about 2 minutes

`persistent_tma_bands` runs C's main band in whole waves and its tail band apart; at 3072^3 the tail
(256 rows, 48 tiles of 128x128) runs split-K in two over 96 programs, 24 K iterations each, 17.0 us
(ncu, visit 139) for 8% of the work. Here the tail's K iterations are shared equally by all SMs
(stream-K: 17.5 iterations a program at 3072^3), a tile that several programs share summed by its last
arriver from one slot per owner, in order (deterministic, as `splitk_tma`'s in-kernel sum). Cuts: the
shipped one at 3072^3 (rows at 2816); at 3000x5000x1000, where the shipped bands make no cut, rows at
2432 or columns at 4096 (three waves of 128x256 less 16 or 12 tiles). Each tail config with and without
programmatic dependent launch (the tail waiting at its end for the main band). Every result is checked
against fp64 before it is timed (`time_checked`: flushed CUDA graphs and do_bench). Written in session
25 without device time; its kernel is tested under the interpreter (tests/kernels/test_probe_streamk_tail.py).
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait
from triton.tools.tensor_descriptor import TensorDescriptor

from bench.probes import Rows, probe_parser, time_checked
from kernels.config import MatmulConfig
from kernels.schedule import cdiv, grouped_tile_jit, multiprocessor_count
from kernels.splitk_tma import zeroed_counters
from kernels.streamk import streamk_piece, streamk_share

MAIN = MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)
TAILS = [
    MatmulConfig(128, 128, 64, group_m=1, num_warps=8, num_stages=4),
    MatmulConfig(128, 128, 64, group_m=1, num_warps=4, num_stages=4),
    MatmulConfig(128, 256, 64, group_m=1, num_warps=8, num_stages=3),
]
CASES = [((3072, 3072, 3072), [("m", 2816)]), ((3000, 5000, 1000), [("m", 2432), ("n", 4096)])]


@triton.jit
def _streamk_tma_kernel(
    a_desc, b_desc, c_desc, ws_ptr, counts_ptr, M, N, K, PROGRAMS,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SEGMENTS: tl.constexpr, PDL: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    iters = tl.cdiv(K, BLOCK_K)
    total = num_pid_m * num_pid_n * iters
    it, end = streamk_share(pid, total, PROGRAMS)
    slot = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    tile_size = BLOCK_M * BLOCK_N
    while it < end:
        tile, k0, k1 = streamk_piece(it, end, iters)
        pid_m, pid_n = grouped_tile_jit(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k0, k1):
            acc = tl.dot(a_desc.load([off_m, ki * BLOCK_K]), b_desc.load([ki * BLOCK_K, off_n]), acc)
        if (k0 == 0) & (k1 == iters):
            c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
        else:
            # program p owns iterations [p * total // PROGRAMS, (p + 1) * total // PROGRAMS): the first and
            # last owners of this tile's iterations give this piece's slot and the tile's count of pieces
            first = ((tile * iters + 1) * PROGRAMS - 1) // total
            last = ((tile + 1) * iters * PROGRAMS - 1) // total
            tl.store(ws_ptr + (tile * SEGMENTS + pid - first) * tile_size + slot, acc)
            tl.debug_barrier()  # every thread's part precedes the release below
            before = tl.atomic_add(counts_ptr + tile, 1, sem="acq_rel")
            if before == last - first:  # the last arriver sums the pieces in order
                summed = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for s in range(last - first + 1):
                    summed += tl.load(ws_ptr + (tile * SEGMENTS + s) * tile_size + slot, cache_modifier=".cg")
                tl.store(counts_ptr + tile, 0)  # zeroed for the next launch
                c_desc.store([off_m, off_n], summed.to(c_desc.dtype))
        it += k1 - k0
    if PDL:  # launched overlapping the main band: end after it
        gdc_wait()


def streamk_tma_into(a, b, c, cfg: MatmulConfig, programs: int, pdl: bool = False) -> torch.Tensor:
    """c = a @ b, the K iterations of all of c's tiles shared by `programs` programs (row-major a, b, c)."""
    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    tiles, iters = cdiv(m, bm) * cdiv(n, bn), cdiv(k, bk)
    programs = min(programs, tiles * iters)
    segments = cdiv(iters, tiles * iters // programs) + 1  # the most owners a tile can have
    ws = torch.empty(tiles * segments * bm * bn, device=a.device, dtype=torch.float32)
    descriptors = [
        TensorDescriptor(t, list(t.shape), [t.stride(0), 1], box)
        for t, box in ((a, [bm, bk]), (b, [bk, bn]), (c, [bm, bn]))
    ]
    _streamk_tma_kernel[(programs,)](
        *descriptors, ws, zeroed_counters(tiles, a.device), m, n, k, programs,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=cfg.group_m, SEGMENTS=segments, PDL=pdl,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **({"launch_pdl": True} if pdl else {}),
    )  # fmt: skip
    return c


def bands_streamk(
    a, b, main: MatmulConfig, tail: MatmulConfig, axis: str, cut: int, programs: int, pdl=False
):
    """C's main band (rows or columns before `cut`) through `persistent_tma`, the rest through stream-K."""
    from kernels.persistent_tma import launch_into

    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    if axis == "m":
        launch_into(a[:cut], b, c[:cut], main)
        streamk_tma_into(a[cut:], b, c[cut:], tail, programs, pdl)
    else:
        launch_into(a, b[:, :cut], c[:, :cut], main)
        streamk_tma_into(a, b[:, cut:], c[:, cut:], tail, programs, pdl)
    return c


def main(argv: list[str] | None = None) -> None:
    from kernels.registry import get_variant

    args = probe_parser(__doc__, "streamk_tail.csv").parse_args(argv)
    out = Rows(args.out, ("shape", "op", "graph_flush_us", "do_bench_us"))
    bands = get_variant("persistent_tma_bands").launch
    programs = multiprocessor_count(torch.device("cuda"))
    for (m, n, k), cuts in CASES:
        for dtype in (torch.bfloat16, torch.float16):
            a = torch.randn((m, k), device="cuda", dtype=dtype)
            b = torch.randn((k, n), device="cuda", dtype=dtype)
            ops = [
                ("cublas", functools.partial(torch.matmul, a, b)),
                ("bands shipped", functools.partial(bands, a, b, MAIN)),
            ]
            for axis, cut in cuts:
                for tail in TAILS:
                    for pdl in (False, True):
                        name = f"streamk {axis}{cut} {tail.block_m}x{tail.block_n} w{tail.num_warps}" + (
                            " pdl" if pdl else ""
                        )
                        call = functools.partial(bands_streamk, a, b, MAIN, tail, axis, cut, programs, pdl)
                        ops.append((name, call))
            shape = f"{m}x{n}x{k} {str(dtype)[6:]}"
            time_checked(out, shape, ops, torch.matmul(a.double(), b.double()), k, time.time() + 300)
    print("\n".join(out.best_lines(("cublas", "bands", "streamk"))))


if __name__ == "__main__":
    main()
