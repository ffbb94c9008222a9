"""The new kernels on a GPU, in under 3 minutes: persistent_tma and streamk_hybrid (and grouped,
whose shared tile code now peels the K tail and carries row-alignment hints) against fp64 on
ragged shapes in bf16 and fp16, then TFLOP/s against cuBLAS on the shapes the issue tracks.

    python bench/new_kernels_gpu.py --out $OUT/new_kernels.json

Times: `triton.testing.do_bench` medians, L2 flushed between launches. Prints two tables last.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton

from kernels import MatmulConfig, Problem, check_accuracy, get_variant, reference_matmul

# Ragged shapes; persistent_tma takes those whose N and K are multiples of 8 (16 B rows in bf16)
# and reports the rest as refused (its launcher's TmaUnsupported), which is the expected answer;
# persistent_tma_pad takes them all (it pads what is unaligned).
RAGGED = [
    (37, 56, 200),
    (3000, 5000, 1000),
    (1000, 1000, 1000),
    (495, 5333, 71),
    (4097, 33, 1000),
    (1, 4096, 512),
]
ACCURACY_CFG = {
    "persistent_tma": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "persistent_tma_pad": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "streamk_hybrid": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "grouped": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
}
PERF_SHAPES = [
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (512, 512, 32768),
    (3000, 5000, 1000),
    (4096, 32001, 4096),
]
PERF_CFG = {
    "persistent_tma": [
        MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
        MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=4),
        MatmulConfig(128, 128, 64, group_m=8, num_warps=4, num_stages=4),
    ],
    "streamk_hybrid": [
        MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
        MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
        MatmulConfig(64, 64, 128, group_m=8, num_warps=4, num_stages=4),
    ],
    "persistent_tma_pad": [MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)],  # 32001 only
    "grouped": [
        MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
        MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=4),
    ],
}


def accuracy(device) -> list[dict]:
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        for m, n, k in RAGGED:
            gen = torch.Generator(device=device).manual_seed(m + n + k)
            a = torch.randn((m, k), device=device, generator=gen).to(dtype)
            b = torch.randn((k, n), device=device, generator=gen).to(dtype)
            ref = reference_matmul(a, b)
            for variant, cfg in ACCURACY_CFG.items():
                torch.full((m * n * 4,), math.nan, device=device)  # poison what the allocator hands out next
                try:
                    acc = check_accuracy(get_variant(variant).launch(a, b, cfg), ref, dtype, k)
                    status, err, tol = ("ok" if acc.ok else "WRONG"), acc.rel_err, acc.tolerance
                except Exception as exc:
                    status, err, tol = f"{type(exc).__name__}: {str(exc)[:80]}", math.nan, math.nan
                rows.append(
                    dict(
                        dtype=str(dtype),
                        variant=variant,
                        shape=[m, n, k],
                        status=status,
                        rel_err=err,
                        tol=tol,
                    )
                )
    return rows


def perf(device) -> list[dict]:
    rows = []
    dtype = torch.bfloat16
    for m, n, k in PERF_SHAPES:
        a = torch.randn((m, k), device=device, dtype=dtype)
        b = torch.randn((k, n), device=device, dtype=dtype)
        ref = reference_matmul(a, b) if m * n * k <= 4096**3 else None
        flop = 2 * m * n * k
        ms = triton.testing.do_bench(lambda: torch.matmul(a, b), warmup=25, rep=100, return_mode="median")  # noqa: B023
        rows.append(dict(shape=[m, n, k], variant="cublas", config="library", ms=ms, tflops=flop / ms * 1e-9))
        for variant, cfgs in PERF_CFG.items():
            launch = get_variant(variant).launch
            for cfg in cfgs:
                if get_variant(variant).space.prune(cfg, Problem(m, n, k, dtype)) is not None:
                    continue  # persistent_tma on 32001, persistent_tma_pad on aligned shapes
                try:
                    out = launch(a, b, cfg)
                    ok = ref is None or check_accuracy(out, ref, dtype, k).ok
                    ms = triton.testing.do_bench(
                        functools.partial(launch, a, b, cfg), warmup=25, rep=100, return_mode="median"
                    )
                except Exception as exc:
                    rows.append(dict(shape=[m, n, k], variant=variant, config=cfg.key, error=str(exc)[:160]))
                    continue
                rows.append(
                    dict(
                        shape=[m, n, k],
                        variant=variant,
                        config=cfg.key,
                        ms=ms,
                        tflops=flop / ms * 1e-9,
                        ok=ok,
                    )
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "new_kernels.json"))
    args = parser.parse_args()
    device = torch.device("cuda")
    start = time.time()
    acc = accuracy(device)
    print(f"accuracy done in {time.time() - start:.0f} s", flush=True)
    speed = perf(device)
    Path(args.out).write_text(json.dumps({"accuracy": acc, "perf": speed}, indent=1))
    print(f"\n{'dtype':15s} {'variant':15s} {'shape':>18s}  status / rel_err (tol)")
    for r in acc:
        shape = "x".join(map(str, r["shape"]))
        err = f"{r['rel_err']:.2e} ({r['tol']:.2e})"
        print(f"{r['dtype']:15s} {r['variant']:15s} {shape:>18s}  {r['status']} {err}")
    print(f"\n{'shape':>18s} {'variant':15s} {'config':38s} {'TFLOP/s':>8s} {'x cuBLAS':>8s}")
    cublas = {tuple(r["shape"]): r["tflops"] for r in speed if r["variant"] == "cublas"}
    for r in speed:
        shape = "x".join(map(str, r["shape"]))
        if "error" in r:
            print(f"{shape:>18s} {r['variant']:15s} {r['config']:38s} error: {r['error'][:60]}")
            continue
        flag = "" if r.get("ok", True) else "  WRONG"
        ratio = r["tflops"] / cublas[tuple(r["shape"])]
        print(f"{shape:>18s} {r['variant']:15s} {r['config']:38s} {r['tflops']:8.1f} {ratio:8.3f}{flag}")
    print(f"total {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
