"""Skinny-K split-K the way cuBLAS runs it: partial tiles through a deep TMA pipeline, summed by a
separate reduce kernel (`splitk_tma_reduce`), against `splitk_tma` (its tile's last program sums the
partials) and cuBLAS.

    python bench/probes/splitk_reduce.py --out $OUT/splitk_reduce.csv      # H200, about 7 minutes
    python bench/probes/splitk_reduce.py --dtype float16 --only 640x640x24576 --budget-s 100

cuBLAS's skinny-K kernels (docs/bench/cublas_kernels-visit93.txt): 512x512x32768
`nvjet_sm90_tst_128x128_64x6_2x1_v_bz_splitK` 25.6-27.1 us plus `splitKreduce` 2.7; 256x256x65536
`128x64_64x8_1x2` 20.8-21.4 plus 2.2: 6-8 pipeline stages, and the partials summed by all SMs in a
second kernel. `splitk_tma`'s best were 4-5 stages, 38.3 us against 29.7 at 512x512x32768 (CUDA
graphs, visit 88). Tiles 128x256 and 256x128 (8 warps), 128x128 (4 and 8 warps), 128x64 and 64x128
(4 warps) at 3, 4, 6 and 8 stages (those that fit), the splits that fill one wave and half of one,
each shape until its share of `--budget-s`; each result checked against fp64, then timed with L2
flushed in CUDA graphs and by do_bench (bench/gpu_methods.py). Visit 97 ran it with the reduce
variant's kernel still a copy in this file, called through Triton's JIT path (the graphs' times are
GPU time either way; do_bench's read that path's host time on some rows).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch
from triton.runtime.errors import OutOfResources

from bench.probes import Rows, probe_parser
from kernels.config import MatmulConfig
from kernels.schedule import cdiv, multiprocessor_count

SHAPES = ((512, 512, 32768), (256, 256, 65536), (640, 640, 24576), (1024, 1024, 16384), (768, 768, 12288))
# tile: warps. 128x256 and 256x128 (8 warps) read a third less of A and B from L2 a multiply than
# 128x128 does: at 512x512x32768 split 8, 128x128's programs read 256 MB from L2 in cuBLAS's ~26 us
# (about 10 TB/s), where cuBLAS's 2-CTA clusters multicast what two programs share.
TILES = {(128, 256): (8,), (256, 128): (8,), (128, 128): (4, 8), (128, 64): (4,), (64, 128): (4,)}
STAGES = (3, 4, 6, 8)  # those a tile's shared memory holds (48 KB a stage at 128x256x64: 3-4)


def main(argv: list[str] | None = None) -> None:
    from bench.gpu_methods import Flush, do_bench_us
    from bench.vs_libraries import wave_splits
    from kernels import check_accuracy, get_variant, reference_matmul

    parser = probe_parser(__doc__, "splitk_reduce.csv", budget_s=420)
    parser.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    parser.add_argument("--only", nargs="*", help="MxNxK of SHAPES to run (default: all)")
    args = parser.parse_args(argv)
    shapes = [s for s in SHAPES if not args.only or "x".join(map(str, s)) in args.only]
    dtype = getattr(torch, args.dtype)
    flush, programs = Flush(), multiprocessor_count(torch.device("cuda"))
    launchers = {
        "reduce": get_variant("splitk_tma_reduce").launch,
        "splitk_tma": get_variant("splitk_tma").launch,
    }

    out = Rows(args.out, ("shape", "op", "graph_flush_us", "do_bench_us"))

    def emit(shape, op, fn):
        out.add(shape, op, flush.graph_flushed_us(fn), do_bench_us(fn))

    for m, n, k in shapes:
        shape, stop_at = f"{m}x{n}x{k} {args.dtype}", time.time() + args.budget_s / len(shapes)
        a = torch.randn((m, k), device="cuda", dtype=dtype)
        b = torch.randn((k, n), device="cuda", dtype=dtype)
        ref = reference_matmul(a, b)
        emit(shape, "cublas", lambda a=a, b=b: torch.matmul(a, b))
        for (bm, bn), warp_counts in TILES.items():
            for split in wave_splits(cdiv(m, bm) * cdiv(n, bn), programs):
                for warps in warp_counts:
                    for stages in STAGES:
                        if time.time() > stop_at:
                            break
                        cfg = MatmulConfig(bm, bn, 64, split_k=split, num_warps=warps, num_stages=stages)
                        for name, launch in launchers.items():
                            try:
                                ok = check_accuracy(launch(a, b, cfg), ref, a.dtype, k).ok
                            except OutOfResources:
                                continue  # too many stages for this tile's shared memory
                            except Exception as exc:  # a compile failure: keep the other configs
                                print(f"skip {shape} {name} {cfg.key}: {str(exc)[:160]}", flush=True)
                                continue
                            if not ok:
                                sys.exit(f"WRONG {shape} {name} {cfg.key}")
                            emit(shape, f"{name} {cfg.key}", lambda a=a, b=b, cfg=cfg, f=launch: f(a, b, cfg))
        print(shape, "done", flush=True)
    print("\n".join(out.best_lines(("cublas", "reduce", "splitk_tma"))))


if __name__ == "__main__":
    main()
