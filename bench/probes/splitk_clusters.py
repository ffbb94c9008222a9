"""Skinny-K split-K in 2-CTA clusters: `splitk_tma_cluster` over deeper pipelines, larger K steps and
more shapes than its quick tuning, against the best single-CTA config and cuBLAS in the same process.

    python bench/probes/splitk_clusters.py --out $OUT/splitk_clusters.csv     # H200, about 4 minutes

Why: visit 101's first run (docs/bench/splitk_clusters-visit101.csv) had clusters of two take
512x512x32768 from 41.2 to 35.8 us and 256x256x65536 from 34.9 to 32.5 (cuBLAS 33.2 and 29.0), at
the deepest pipeline it tried (6 stages of BLOCK_K 64); a cluster's CTA holds half the stages' tiles,
so 8 stages and BLOCK_K 128 at 4 fit too. Each shape runs cuBLAS, its best single-CTA
`splitk_tma_reduce` config (visits 97 and 101), and `splitk_tma_cluster` over the tiles and steps
below with the splits that fill one wave of clusters, half of one, and two; each result checked
against fp64, then timed with L2 flushed in CUDA graphs and by do_bench (bench/gpu_methods.py).
Run it last in a visit's call: a layout Triton cannot lower may abort the process (LLVM errors are
not Python exceptions); the rows measured before stay in the CSV.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch

from bench.probes import Rows, probe_parser, time_checked
from kernels.config import MatmulConfig
from kernels.schedule import cdiv, multiprocessor_count

# shape: its best single-CTA `splitk_tma_reduce` config (graph us: 41.2, 34.9, 38.7 in visit 101;
# 49.2 and 29.9 in visit 97)
BASELINES = {
    (512, 512, 32768): MatmulConfig(128, 128, 64, split_k=8, num_warps=8, num_stages=4),
    (256, 256, 65536): MatmulConfig(128, 128, 64, split_k=16, num_warps=8, num_stages=6),
    (640, 640, 24576): MatmulConfig(128, 128, 64, split_k=5, num_warps=4, num_stages=6),
    (1024, 1024, 16384): MatmulConfig(128, 128, 64, split_k=2, num_warps=8, num_stages=6),
    (768, 768, 12288): MatmulConfig(128, 128, 64, split_k=3, num_warps=8, num_stages=6),
}
# tile: warps (a cluster's tile); 128x64 is cuBLAS's at 256x256x65536 (`128x64_64x8_1x2`, visit 93)
TILES = {(128, 256): (8,), (128, 128): (4, 8), (128, 64): (4,), (256, 128): (8,)}
STEPS = ((64, 4), (64, 6), (64, 8), (128, 3), (128, 4))  # (BLOCK_K, stages)


def cluster_splits(tiles: int, clusters: int) -> list[int]:
    """Splits filling one wave of `clusters` with `tiles` output tiles, half a wave, and two (at least 2)."""
    fill = max(2, clusters // tiles)
    return sorted({max(2, fill // 2), fill, 2 * fill})


def main(argv: list[str] | None = None) -> None:
    from kernels import Problem, get_variant, reference_matmul

    parser = probe_parser(__doc__, "splitk_clusters.csv", budget_s=240)
    args = parser.parse_args(argv)
    clusters = multiprocessor_count(torch.device("cuda")) // 2
    single, clustered = get_variant("splitk_tma_reduce").launch, get_variant("splitk_tma_cluster").launch
    space = get_variant("splitk_tma_cluster").space
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
            for split in cluster_splits(cdiv(m, bm) * cdiv(n, bn), clusters):
                for warps in warp_counts:
                    for bk, stages in STEPS:
                        cfg = MatmulConfig(bm, bn, bk, split_k=split, num_warps=warps, num_stages=stages)
                        if space.prune(cfg, Problem(m, n, k, "bfloat16")) is None:
                            ops.append((f"ctas2 {cfg.key}", lambda a=a, b=b, c=cfg: clustered(a, b, c)))
        time_checked(out, shape, ops, ref, k, stop_at)
        print(shape, "done", flush=True)
    print("\n".join(out.best_lines(("cublas", "single", "ctas2"))))


if __name__ == "__main__":
    main()
