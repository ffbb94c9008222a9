"""The baseline the farm must beat: a plain serial loop over the same points as a preset.

    python bench/serial_loop.py --preset splitk --out $OUT/serial.json

For each point, one after another: compile (the first launch), then `triton.testing.do_bench`'s
median (25 ms warm-up, 100 ms of repetitions, L2 flushed). No accuracy check, no database, no
interleaving: what a person would write first. Prints points per minute.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import triton

from farm.plan import expand
from farm.spec import load_spec
from kernels import DTYPES, get_variant


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--limit-s", type=float, default=1e9, help="stop after this many seconds")
    args = parser.parse_args()
    points, _ = expand(load_spec(preset=args.preset))
    device = torch.device("cuda")
    inputs = {}
    rows = []
    start = time.perf_counter()
    for p in points:
        if time.perf_counter() - start > args.limit_s:
            break
        key = (p.dtype, p.m, p.n, p.k)
        if key not in inputs:
            inputs.clear()
            gen = torch.Generator(device=device).manual_seed(0)
            inputs[key] = (
                torch.randn((p.m, p.k), generator=gen, device=device).to(DTYPES[p.dtype]),
                torch.randn((p.k, p.n), generator=gen, device=device).to(DTYPES[p.dtype]),
            )
        a, b = inputs[key]
        launch = get_variant(p.variant).launch
        try:
            launch(a, b, p.config)  # compile
            ms = triton.testing.do_bench(lambda: launch(a, b, p.config), return_mode="median")  # noqa: B023
        except Exception as exc:
            rows.append({"point": p.label(), "error": str(exc)[:200]})
            continue
        rows.append(
            {
                "point": p.label(),
                "variant": p.variant,
                "m": p.m,
                "n": p.n,
                "k": p.k,
                "config_key": p.config.key,
                "ms": ms,
            }
        )
    seconds = time.perf_counter() - start
    result = {
        "preset": args.preset,
        "points": len(rows),
        "seconds": seconds,
        "points_per_min": len(rows) / seconds * 60,
        "rows": rows,
    }
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(
        f"serial loop over {args.preset}: {len(rows)} points in {seconds:.0f} s = "
        f"{result['points_per_min']:.0f} points/min"
    )


if __name__ == "__main__":
    main()
