"""Skinny-K split-K in 2-CTA clusters: `splitk_tma_reduce`'s kernel launched with Triton's num_ctas=2.

    python bench/probes/splitk_clusters.py --out $OUT/splitk_clusters.csv     # H200, about 4 minutes

Why: at 512x512x32768 and 256x256x65536 `splitk_tma_reduce` runs 40.0 and 34.1 us (L2 flushed, in
CUDA graphs) against cuBLAS's 33.3 and 29.0 (visit 97, docs/bench/splitk_reduce-visit97.csv), whose
kernels there run in 2x1 and 1x2 clusters (`..._64x6_2x1_..._splitK`, docs/bench/cublas_kernels-visit93.txt):
the two CTAs of a cluster share one operand's tile, loaded once from L2 for both. With num_ctas=2
Triton launches each program as a cluster of two CTAs and splits the program's tile between them;
whether it then loads the shared operand once (TMA multicast) is what this measures. Each shape runs
cuBLAS, the visit-97 best single-CTA config (the baseline in this process), and clusters of two over
tiles 256x128, 128x256 and 128x128 at BLOCK_K 64 (3, 4, 6 stages) and 128 (3 stages), the splits
that fill one wave of clusters and half of one; each result checked against fp64, then timed with L2
flushed in CUDA graphs and by do_bench (bench/gpu_methods.py). Run it last in a visit's call: a
cluster layout Triton cannot lower may abort the process (LLVM errors are not Python exceptions);
the rows measured before stay in the CSV.
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

from bench.probes import Rows
from kernels.config import MatmulConfig
from kernels.schedule import cdiv, multiprocessor_count

# shape: visit 97's best `splitk_tma_reduce` config there (graph us: 40.4, 34.1, 38.9)
BASELINES = {
    (512, 512, 32768): MatmulConfig(128, 128, 64, split_k=8, num_warps=8, num_stages=4),
    (256, 256, 65536): MatmulConfig(128, 128, 64, split_k=16, num_warps=8, num_stages=6),
    (640, 640, 24576): MatmulConfig(128, 128, 64, split_k=5, num_warps=4, num_stages=6),
}
TILES = {(256, 128): (8,), (128, 256): (8,), (128, 128): (4, 8)}  # tile: warps (a cluster's tile)
STEPS = ((64, 3), (64, 4), (64, 6), (128, 3))  # (BLOCK_K, stages)


def reduce_in_clusters(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, ctas: int) -> torch.Tensor:
    """`splitk_tma_reduce` with each program a cluster of `ctas` CTAs (Triton's JIT path: a probe's
    host time does not matter in graphs)."""
    from kernels.splitk_det import reduce_splits
    from kernels.splitk_tma import _plan, _splitk_tma_kernel

    (m, k), n = a.shape, b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    plan = _plan(a, b, c, cfg, apart=True)
    ws = torch.empty((cfg.split_k, m, n), device=a.device, dtype=torch.float32)
    _splitk_tma_kernel[plan.grid](
        *plan.descriptors(a, b, c), ws, ws, m, n, k, **plan.constexprs,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, num_ctas=ctas,
    )  # fmt: skip
    return reduce_splits(ws, c)


def main(argv: list[str] | None = None) -> None:
    from bench.gpu_methods import Flush, do_bench_us
    from bench.vs_libraries import wave_splits
    from kernels import check_accuracy, get_variant, reference_matmul

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "splitk_clusters.csv"))
    parser.add_argument("--budget-s", type=float, default=240, help="shared by the shapes equally")
    args = parser.parse_args(argv)
    flush, programs = Flush(), multiprocessor_count(torch.device("cuda"))
    single = get_variant("splitk_tma_reduce").launch
    out = Rows(args.out, ("shape", "op", "graph_flush_us", "do_bench_us"))

    for (m, n, k), baseline in BASELINES.items():
        shape, stop_at = f"{m}x{n}x{k}", time.time() + args.budget_s / len(BASELINES)
        a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
        ref = reference_matmul(a, b)
        ops = [
            ("cublas", lambda a=a, b=b: torch.matmul(a, b)),
            (f"single {baseline.key}", lambda a=a, b=b, cfg=baseline: single(a, b, cfg)),
        ]
        for (bm, bn), warp_counts in TILES.items():
            for split in wave_splits(cdiv(m, bm) * cdiv(n, bn), programs // 2):
                for warps in warp_counts:
                    for bk, stages in STEPS:
                        cfg = MatmulConfig(bm, bn, bk, split_k=split, num_warps=warps, num_stages=stages)
                        ops.append(
                            (f"ctas2 {cfg.key}", lambda a=a, b=b, c=cfg: reduce_in_clusters(a, b, c, 2))
                        )
        for name, fn in ops:
            if time.time() > stop_at:
                break
            try:
                ok = check_accuracy(fn(), ref, a.dtype, k).ok
            except Exception as exc:  # out of resources, or a cluster layout Triton cannot compile
                print(f"skip {shape} {name}: {str(exc)[:160]}", flush=True)
                continue
            if not ok:  # kept as a row: a cluster layout computing wrong is a finding too
                out.add(shape, f"WRONG {name}", float("nan"), float("nan"))
                continue
            out.add(shape, name, flush.graph_flushed_us(fn), do_bench_us(fn))
        print(shape, "done", flush=True)
    print("\n".join(out.best_lines(("cublas", "single", "ctas2"))))


if __name__ == "__main__":
    main()
