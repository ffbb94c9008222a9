"""Kernels on a real GPU: every variant's accuracy on ragged shapes, and each variant's best of a
small config set against cuBLAS on the shapes the notes track.

    python bench/kernels_gpu.py --out $OUT/kernels.json

Prints the two tables last. Timing here is `triton.testing.do_bench` (median, L2 flushed between
runs); the farm's own protocol is in farm/measure.py, farm/timing.py and farm/clock.py.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch
import triton

from kernels import LIBRARY_CONFIG, MatmulConfig, check_accuracy, get_variant, reference_matmul

RAGGED = [(37, 50, 200), (495, 5333, 71), (127, 257, 4099), (1000, 1, 999), (4097, 33, 1000), (1, 4096, 512)]
SMALL_CFG = {
    "tiled": MatmulConfig(64, 64, 32, num_warps=4, num_stages=3),
    "grouped": MatmulConfig(64, 64, 32, group_m=4, num_warps=4, num_stages=3),
    "splitk": MatmulConfig(64, 64, 32, group_m=4, split_k=4, num_warps=4, num_stages=3),
    "splitk_det": MatmulConfig(64, 64, 32, split_k=4, num_warps=4, num_stages=3),
    "cublas": LIBRARY_CONFIG,
}


# (block_m, block_n, block_k, num_warps, num_stages) tried per shape class.
BIG_TILES = [
    (128, 256, 64, 8, 3),
    (256, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 128, 64, 4, 4),
    (128, 128, 32, 4, 4),
    (64, 256, 64, 4, 4),
]
SKINNY_TILES = [
    (64, 64, 128, 4, 4),
    (64, 64, 64, 4, 5),
    (128, 128, 64, 8, 3),
    (64, 128, 64, 4, 4),
    (128, 64, 64, 4, 4),
]


def _configs(tiles, group_m: int, split_ks=(1,)) -> list[MatmulConfig]:
    return [
        MatmulConfig(bm, bn, bk, group_m=group_m, split_k=s, num_warps=w, num_stages=st)
        for bm, bn, bk, w, st in tiles
        for s in split_ks
    ]


PERF_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (512, 512, 32768), (256, 256, 65536)]


def perf_configs(variant: str, m: int, n: int, k: int) -> list[MatmulConfig]:
    skinny = m * n <= 512 * 512
    if variant == "cublas":
        return [LIBRARY_CONFIG]
    if variant in ("splitk", "splitk_det"):
        return _configs(SKINNY_TILES, 1, (4, 8, 16, 32)) if skinny else _configs(BIG_TILES, 8, (1, 2))
    group = 8 if variant == "grouped" else 1
    return _configs(SKINNY_TILES if skinny else BIG_TILES, group)


def accuracy_table(device) -> list[dict]:
    rows = []
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for variant, cfg in SMALL_CFG.items():
            worst = 0.0
            tol_at_worst = 0.0
            for m, n, k in RAGGED:
                gen = torch.Generator(device=device).manual_seed(m * 7 + n * 3 + k)
                a = torch.randn((m, k), device=device, generator=gen).to(dtype)
                b = torch.randn((k, n), device=device, generator=gen).to(dtype)
                # poison what the allocator hands out next: an unwritten tile shows as NaN
                torch.full((m * n * 8,), math.nan, device=device)
                acc = check_accuracy(get_variant(variant).launch(a, b, cfg), reference_matmul(a, b), dtype, k)
                if acc.rel_err / acc.tolerance >= worst / max(tol_at_worst, 1e-30):
                    worst, tol_at_worst = acc.rel_err, acc.tolerance
                rows.append(
                    {
                        "dtype": str(dtype),
                        "variant": variant,
                        "shape": [m, n, k],
                        "rel_err": acc.rel_err,
                        "tolerance": acc.tolerance,
                        "ok": acc.ok,
                    }
                )
            print(
                f"accuracy {dtype!s:15s} {variant:11s} worst rel_err {worst:.2e} (tol {tol_at_worst:.2e})",
                flush=True,
            )
    return rows


def perf_table(device, budget_s: float) -> list[dict]:
    rows = []
    start = time.time()
    dtype = torch.bfloat16
    for m, n, k in PERF_SHAPES:
        a = torch.randn((m, k), device=device, dtype=dtype)
        b = torch.randn((k, n), device=device, dtype=dtype)
        ref = reference_matmul(a, b)
        for variant in ("cublas", "tiled", "grouped", "splitk", "splitk_det"):
            launch = get_variant(variant).launch
            for cfg in perf_configs(variant, m, n, k):
                if time.time() - start > budget_s:
                    print("perf budget spent; stopping", flush=True)
                    return rows
                t0 = time.time()
                try:
                    out = launch(a, b, cfg)
                    torch.cuda.synchronize()
                except Exception as exc:  # out of resources: record and go on
                    rows.append(
                        {"variant": variant, "shape": [m, n, k], "config": cfg.key, "error": str(exc)[:200]}
                    )
                    continue
                compile_s = time.time() - t0
                acc = check_accuracy(out, ref, dtype, k)
                ms = triton.testing.do_bench(
                    lambda: launch(a, b, cfg),  # noqa: B023 (called right here, inside the loop)
                    warmup=25,
                    rep=100,
                    return_mode="median",
                )
                rows.append(
                    {
                        "variant": variant,
                        "shape": [m, n, k],
                        "config": cfg.key,
                        "ms": ms,
                        "tflops": 2 * m * n * k / ms * 1e-9,
                        "rel_err": acc.rel_err,
                        "ok": acc.ok,
                        "compile_s": compile_s,
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--perf-budget-s", type=float, default=240)
    args = parser.parse_args()
    device = torch.device("cuda")
    torch.randn(8192, 8192, device=device) @ torch.randn(8192, 8192, device=device)  # leave idle clocks
    acc_rows = accuracy_table(device)
    perf_rows = perf_table(device, args.perf_budget_s)
    with open(args.out, "w") as fh:
        json.dump(
            {"accuracy": acc_rows, "perf": perf_rows, "device": torch.cuda.get_device_name()}, fh, indent=1
        )
    print(f"\nfailed accuracy rows: {[r for r in acc_rows if not r['ok']]}")
    print(f"\n{'shape':>18s} {'variant':11s} {'best TFLOP/s':>12s} {'vs cuBLAS':>9s}  config")
    for shape in PERF_SHAPES:
        ok = [r for r in perf_rows if r["shape"] == list(shape) and r.get("ok")]
        cublas = max((r["tflops"] for r in ok if r["variant"] == "cublas"), default=float("nan"))
        for variant in ("cublas", "tiled", "grouped", "splitk", "splitk_det"):
            mine = [r for r in ok if r["variant"] == variant]
            if mine:
                best = max(mine, key=lambda r: r["tflops"])
                print(
                    f"{'x'.join(map(str, shape)):>18s} {variant:11s} {best['tflops']:12.1f} "
                    f"{best['tflops'] / cublas:9.2f}  {best['config']}"
                )


if __name__ == "__main__":
    main()
