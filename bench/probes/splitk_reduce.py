"""Skinny-K split-K the way cuBLAS runs it: partial tiles through a deep TMA pipeline, summed by a
separate reduce kernel, against `splitk_tma` (its tile's last program sums the partials) and cuBLAS.

    python bench/probes/splitk_reduce.py --out $OUT/splitk_reduce.csv      # H200, about 5 minutes

cuBLAS's skinny-K kernels (docs/bench/cublas_kernels-visit93.txt): 512x512x32768
`nvjet_sm90_tst_128x128_64x6_2x1_v_bz_splitK` 25.6-27.1 us plus `splitKreduce` 2.7; 256x256x65536
`128x64_64x8_1x2` 20.8-21.4 plus 2.2: 6-8 pipeline stages, and the partials summed by all SMs in a
second kernel. `splitk_tma`'s best were 4-5 stages, 38.3 us against 29.7 at 512x512x32768 (CUDA
graphs, visit 88). Here every program stores its fp32 partial into its split's slice of a
(SPLIT_K, M, N) workspace, and `splitk_det`'s fixed-order reduce kernel sums them (bitwise
reproducible still). Tiles 128x128 (4 and 8 warps), 128x64 and 64x128 (4 warps) at 4, 6 and 8
stages (those that compile), the splits that fill one wave and half of one, until `--budget-s`; each
result checked against fp64, then timed with L2 flushed in CUDA graphs and by do_bench
(bench/gpu_methods.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources
from triton.tools.tensor_descriptor import TensorDescriptor

from bench.probes import Rows
from kernels.config import MatmulConfig
from kernels.schedule import cdiv, multiprocessor_count, split_range_jit, splitk_tile_jit
from kernels.splitk_det import reduce_splits

SHAPES = ((512, 512, 32768), (256, 256, 65536), (640, 640, 24576), (1024, 1024, 16384), (768, 768, 12288))
TILES = {(128, 128): (4, 8), (128, 64): (4,), (64, 128): (4,)}  # tile: warps
STAGES = (4, 6, 8)


@triton.jit
def _split_partials_kernel(
    a_desc, b_desc, ws_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
):  # fmt: skip
    """Program (tile, pid_k): A[tile rows, chunk] @ B[chunk, tile cols] into ws[pid_k] (fp32, M x N)."""
    pid_m, pid_n, pid_k = splitk_tile_jit(
        tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), 1, SPLIT_K
    )
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    k_start, k_end = split_range_jit(pid_k, K, SPLIT_K, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(k_start // BLOCK_K, tl.cdiv(k_end, BLOCK_K)):
        acc = tl.dot(a_desc.load([off_m, ki * BLOCK_K]), b_desc.load([ki * BLOCK_K, off_n]), acc)
    rows = off_m + tl.arange(0, BLOCK_M)[:, None]
    cols = off_n + tl.arange(0, BLOCK_N)[None, :]
    tl.store(ws_ptr + pid_k.to(tl.int64) * M * N + rows * N + cols, acc, mask=(rows < M) & (cols < N))


def split_then_reduce(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """a @ b (row-major, TMA-aligned) as SPLIT_K partial products, then their fixed-order sum."""
    (m, k), n = a.shape, b.shape[1]
    a_desc = TensorDescriptor(a, [m, k], [a.stride(0), 1], [cfg.block_m, cfg.block_k])
    b_desc = TensorDescriptor(b, [k, n], [b.stride(0), 1], [cfg.block_k, cfg.block_n])
    ws = torch.empty((cfg.split_k, m, n), device=a.device, dtype=torch.float32)
    grid = (cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n) * cfg.split_k,)
    _split_partials_kernel[grid](
        a_desc, b_desc, ws, m, n, k, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        SPLIT_K=cfg.split_k, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return reduce_splits(ws, torch.empty((m, n), device=a.device, dtype=a.dtype))


def main(argv: list[str] | None = None) -> None:
    from bench.gpu_methods import Flush, do_bench_us
    from bench.vs_libraries import wave_splits
    from kernels import check_accuracy, get_variant, reference_matmul

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "splitk_reduce.csv"))
    parser.add_argument("--budget-s", type=float, default=420, help="start no new config after this")
    args = parser.parse_args(argv)
    stop_at = time.time() + args.budget_s
    flush, programs = Flush(), multiprocessor_count(torch.device("cuda"))
    splitk_tma = get_variant("splitk_tma").launch

    out = Rows(args.out, ("shape", "op", "graph_flush_us", "do_bench_us"))
    rows = out.rows

    def emit(shape, op, fn):
        out.add(shape, op, flush.graph_flushed_us(fn), do_bench_us(fn))

    for m, n, k in SHAPES:
        shape = f"{m}x{n}x{k}"
        a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
        ref = reference_matmul(a, b)
        emit(shape, "cublas", lambda a=a, b=b: torch.matmul(a, b))
        for (bm, bn), warp_counts in TILES.items():
            for split in wave_splits(cdiv(m, bm) * cdiv(n, bn), programs):
                for warps in warp_counts:
                    for stages in STAGES:
                        if time.time() > stop_at:
                            break
                        cfg = MatmulConfig(bm, bn, 64, split_k=split, num_warps=warps, num_stages=stages)
                        for name, launch in (("reduce", split_then_reduce), ("splitk_tma", splitk_tma)):
                            try:
                                ok = check_accuracy(launch(a, b, cfg), ref, a.dtype, k).ok
                            except OutOfResources:
                                continue  # too many stages for this tile's shared memory
                            if not ok:
                                sys.exit(f"WRONG {shape} {name} {cfg.key}")
                            emit(shape, f"{name} {cfg.key}", lambda a=a, b=b, cfg=cfg, f=launch: f(a, b, cfg))
        print(shape, "done", flush=True)
    print("shape            op                                            graph_flush do_bench")
    for shape in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == shape]
        for prefix in ("cublas", "reduce", "splitk_tma"):
            best = min((r for r in mine if r[1].startswith(prefix)), key=lambda r: r[2], default=None)
            if best:
                print(f"{best[0]:16s} {best[1]:46s} {best[2]:9.1f} {best[3]:8.1f}")


if __name__ == "__main__":
    main()
