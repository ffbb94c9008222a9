"""Every config of some variants on a few shapes against cuBLAS, in one process: where a kernel stands.

    python bench/config_probe.py --variants splitk splitk_det --shapes 512x512x32768 96x7168x2048 \
        --axes block_m=64,128 block_n=64,128 --waves 0.8 2.2 --detail --out $OUT/probe.csv

Configs come from each variant's own config space (its rules prune them), narrowed by `--axes`
and by `--waves`: a split config is kept when its programs (tiles x SPLIT_K) fill between that
many waves of the device's SMs, the range where a split can pay; an unsplit one when its tiles
fill at least one wave. Every result is checked against the fp64 reference before it is timed;
every time is do_bench's median with L2 flushed, cuBLAS timed the same way on the same operands.
Prints each variant's best per shape; the CSV has every config.

A do_bench time is the larger of a call's GPU time and its host time past the L2 flush's: below
about 50 us it can be timing the Python launcher (visit 43: 65-130 us a call for this project's
variants, 16-28 us for torch.matmul). `--detail` says which: each best config's CUDA-graph time
(GPU only, but with a warm L2) and its host time per call. For kernel time with L2 flushed and no
host time in it, sweep the same points with the farm (`farm sweep --spec`), as visit 44 did.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from bench.gpu_methods import host_us
from kernels.sizes import cdiv


def parse_axes(items: list[str]) -> dict[str, tuple[int, ...]]:
    axes = {}
    for item in items:
        name, _, values = item.partition("=")
        axes[name] = tuple(int(v) for v in values.split(","))
    return axes


def fills_waves(cfg, m: int, n: int, sms: int, waves: tuple[float, float] | None) -> bool:
    """`--waves`: a split config's programs fill waves[0]..waves[1] waves; an unsplit one's at least one."""
    if waves is None:
        return True
    filled = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n) * cfg.split_k / sms
    return waves[0] <= filled <= waves[1] if cfg.split_k > 1 else filled >= 1


def detail(fn) -> tuple[float, float]:
    """(GPU ms from a CUDA graph's replays, warm L2; host ms to queue one call): do_bench's median
    holds the larger of a call's GPU time and its host time past the L2 flush's."""
    import triton

    graph = triton.testing.do_bench_cudagraph(fn, return_mode="median")
    return graph, host_us(fn, calls=200, passes=1) / 1e3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", nargs="+", required=True)
    parser.add_argument("--shapes", nargs="+", required=True, help="MxNxK")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    parser.add_argument("--axes", nargs="*", default=[], help="axis=v1,v2 (replaces the space's values)")
    parser.add_argument("--waves", nargs=2, type=float, default=None, metavar=("LOW", "HIGH"))
    parser.add_argument(
        "--detail", action="store_true", help="each best config's CUDA-graph time and host time too"
    )
    parser.add_argument("--budget-s", type=float, default=420, help="start no new config after this")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "config_probe.csv"))
    args = parser.parse_args(argv)

    import triton

    from kernels import DTYPES, check_accuracy, get_variant, reference_matmul

    device = torch.device("cuda")
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    dtype = DTYPES[args.dtype]
    axes = parse_axes(args.axes)
    end = time.time() + args.budget_s
    rows = []
    summary = []
    for shape in args.shapes:
        m, n, k = (int(x) for x in shape.split("x"))
        gen = torch.Generator(device=device).manual_seed(m + 3 * n + 7 * k)
        a = torch.randn((m, k), device=device, dtype=dtype, generator=gen)
        b = torch.randn((k, n), device=device, dtype=dtype, generator=gen)
        ref = reference_matmul(a, b)
        cublas = triton.testing.do_bench(lambda: torch.matmul(a, b), return_mode="median")  # noqa: B023
        if args.detail:
            graph, host = detail(lambda: torch.matmul(a, b))  # noqa: B023
            summary.append(f"{shape:>16} cublas do_bench {cublas:.4f} ms | graph {graph:.4f} host {host:.4f}")
        for name in args.variants:
            variant = get_variant(name)
            best = None
            for cfg in variant.configs(m, n, k, dtype, axes):
                if not fills_waves(cfg, m, n, sms, args.waves):
                    continue
                if time.time() > end:
                    break
                try:
                    acc = check_accuracy(variant.launch(a, b, cfg), ref, dtype, k)
                    ms = triton.testing.do_bench(lambda: variant.launch(a, b, cfg), return_mode="median")  # noqa: B023
                except Exception as exc:  # out of resources and the like: recorded, not fatal
                    rows.append([m, n, k, name, cfg.key, "", "", "", str(exc)[:200]])
                    print(f"  error {name} {cfg.key}: {str(exc)[:160]}", flush=True)
                    continue
                rows.append([m, n, k, name, cfg.key, ms, cublas, acc.ok, acc.rel_err])
                if acc.ok and (best is None or ms < best[0]):
                    best = (ms, cfg.key, cfg)
            line = f"{shape:>16} {name:15s} cublas {cublas:.4f} ms"
            if best:
                line += f"  best {best[0]:.4f} ms  cublas/best {cublas / best[0]:.3f}  {best[1]}"
                if args.detail:
                    best_cfg = best[2]
                    graph, host = detail(lambda: variant.launch(a, b, best_cfg))  # noqa: B023
                    line += f"  | graph {graph:.4f} host {host:.4f}"
            summary.append(line)
            print(line, flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["m", "n", "k", "variant", "config", "ms", "cublas_ms", "ok", "rel_err_or_error"])
        writer.writerows(rows)
    print("\n".join(["", *summary]))


if __name__ == "__main__":
    main()
