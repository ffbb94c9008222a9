"""`grouped` configs where K is a few dozen to a few hundred (495x5333x71, 5000x5000x200), against cuBLAS.

    python bench/probes/small_k_grouped.py --out $OUT/small_k_grouped.csv    # H200, about 3 minutes

Where K is this small the product is mostly writing C, and the pointer kernel's masked K steps and,
with N odd, its 2-byte stores decide. Tiles 64x128 to 128x256, BLOCK_K 32 and 128 (K = 71: three
masked-tail steps or one) or 32 and 64 (K = 200), 4 and 8 warps, 1-2 or 2-3 stages; every result
checked against fp64 first, then timed with L2 flushed in CUDA graphs and by do_bench, and its host
time (bench/gpu_methods.py). Visit 94's run: docs/bench/small_k_grouped-visit94.csv.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch

from bench.gpu_methods import Flush, do_bench_us, host_us
from bench.probes import Rows, probe_parser
from kernels import MatmulConfig, check_accuracy, reference_matmul
from kernels.grouped import grouped

TILES = ((64, 128), (128, 64), (128, 128), (64, 256), (128, 256))
CASES = {  # (m, n, k): (dtypes, BLOCK_K values, stages)
    (495, 5333, 71): ((torch.bfloat16, torch.float16), (32, 128), (1, 2)),
    (5000, 5000, 200): ((torch.bfloat16,), (32, 64), (2, 3)),
}


def configs(block_ks, stages):
    for bm, bn in TILES:
        for bk in block_ks:
            for warps in (4, 8):
                for st in stages:
                    yield MatmulConfig(bm, bn, bk, group_m=8, num_warps=warps, num_stages=st)


def main(argv: list[str] | None = None) -> None:
    parser = probe_parser(__doc__, "small_k_grouped.csv")
    args = parser.parse_args(argv)
    flush = Flush()
    out = Rows(args.out, ("shape", "dtype", "op", "graph_flush_us", "do_bench_us", "host_us"))
    rows = out.rows

    def emit(shape, dtype, op, fn):
        dname = str(dtype).removeprefix("torch.")
        out.add(shape, dname, op, flush.graph_flushed_us(fn), do_bench_us(fn), host_us(fn))

    for (m, n, k), (dtypes, block_ks, stages) in CASES.items():
        shape = f"{m}x{n}x{k}"
        for dtype in dtypes:
            a = torch.randn((m, k), device="cuda", dtype=dtype)
            b = torch.randn((k, n), device="cuda", dtype=dtype)
            ref = reference_matmul(a, b)
            emit(shape, dtype, "cublas", lambda a=a, b=b: torch.matmul(a, b))
            for cfg in configs(block_ks, stages):
                if not check_accuracy(grouped(a, b, cfg), ref, dtype, k).ok:
                    sys.exit(f"WRONG {shape} {dtype} grouped {cfg.key}")
                emit(shape, dtype, f"grouped {cfg.key}", lambda a=a, b=b, cfg=cfg: grouped(a, b, cfg))
    print("shape          dtype    op                                        graph_flush do_bench host")
    for shape, dtype in sorted({r[:2] for r in rows}):
        mine = [r for r in rows if r[:2] == (shape, dtype)]
        for r in [mine[0], *sorted(mine[1:], key=lambda r: r[3])[:4]]:  # cuBLAS, then the best four
            print(f"{r[0]:14s} {r[1]:8s} {r[2]:42s} {r[3]:9.1f} {r[4]:8.1f} {r[5]:6.1f}")


if __name__ == "__main__":
    main()
