"""Does the farm's eager-objective pick serve an eager caller at least as well as a serial autotune loop's?

    farm sweep --spec benchmarks/eager_pick.yaml --db farm.db
    python tools/serial_loop.py --spec benchmarks/eager_pick.yaml --db serial.db
    python benchmarks/eager_pick.py farm.db serial.db --out docs/results/eager_pick.csv

The question: an eager caller (no CUDA graphs) waits for the longer of a call's GPU time and its
launcher's host time. A farm that ranks by kernel time alone picked, at 2500^3, a kernel 0.49x as fast
called eagerly as the pick of a serial compile + do_bench loop over the same points. The farm's pick is
`farm best --objective eager`'s winner of each shape (least eager_ms, what that caller waits for); the
loop's is its least do_bench median (`--objective kernel` on its database: its ms is do_bench's, which
holds the host time). This script times both picks of every shape
in one process, eagerly (do_bench's median, L2 flushed), in rounds that alternate the two so that both
see the same clocks, and on the GPU alone (CUDA graphs, L2 flushed) beside it.
ratio = serial pick's eager time / the farm pick's: at least 1 where the farm's pick is as fast;
ratio_min and ratio_max: the same ratio round by round (how far it moves within one process), and
farm_stored_eager_us / farm_stored_host_us: what the farm stored of its pick, beside do_bench's reading.
Takes about a minute for five shapes on an H200, after the two runs above (3 and 2 minutes from an
empty Triton cache; the serial loop reuses the farm's compiled kernels).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from db import queries
from db.export import reading
from kernels import DTYPES, get_variant
from kernels.tuned import TunedEntry, stored_config
from tools.gpu_methods import Flush, do_bench_us
from tools.provenance import write_results

COLUMNS = ("m", "n", "k", "dtype", "farm_pick", "serial_pick", "farm_eager_us", "serial_eager_us",
           "ratio_serial_over_farm", "ratio_min", "ratio_max", "farm_gpu_us", "serial_gpu_us",
           "farm_stored_eager_us", "farm_stored_host_us")  # fmt: skip


def picks(target: str, objective: str) -> dict[tuple, tuple[TunedEntry, dict]]:
    """Each shape's winner in the database `target` for `objective` (db.queries.best_configs), with
    its stored row (eager_ms, host_ms: what the farm predicted of it)."""
    with reading(target) as conn:
        best = queries.best_configs(conn, objective=objective)
    winners = best.groupby(["gpu_name", "dtype", "m", "n", "k"], sort=False).head(1)
    return {
        (r["dtype"], r["m"], r["n"], r["k"]): (
            TunedEntry(
                r["gpu_name"],
                r["dtype"],
                int(r["m"]),
                int(r["n"]),
                int(r["k"]),
                r["variant"],
                float(r["ms"]),
                stored_config(r, r["config_key"]),
            ),
            r,
        )
        for r in winners.to_dict("records")
    }


def bound(e: TunedEntry, a: torch.Tensor, b: torch.Tensor):
    """The entry's launcher called on (a, b) with its config: one eager call."""
    launch = get_variant(e.variant).launch
    return lambda: launch(a, b, e.config)


def label(e: TunedEntry) -> str:
    return f"{e.variant} {e.config.key}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("farm", help="the farm sweep's results database")
    parser.add_argument("serial", help="the serial loop's results database (tools/serial_loop.py)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "eager_pick.csv"))
    args = parser.parse_args(argv)
    farm, serial = picks(args.farm, "eager"), picks(args.serial, "kernel")
    flush = Flush()
    rows = []
    for key in sorted(farm.keys() & serial.keys()):
        dtype, m, n, k = key
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn((m, k), device="cuda", generator=gen).to(DTYPES[dtype])
        b = torch.randn((k, n), device="cuda", generator=gen).to(DTYPES[dtype])
        (farm_pick, stored), serial_pick = farm[key], serial[key][0]
        calls = {"farm": bound(farm_pick, a, b), "serial": bound(serial_pick, a, b)}
        eager: dict[str, list[float]] = {who: [] for who in calls}
        for r in range(args.rounds):
            for who in sorted(calls, reverse=bool(r % 2)):
                eager[who].append(do_bench_us(calls[who]))
        # each round's ratio: how far the two picks' order moves from round to round in one process
        rounds = [s / f for s, f in zip(eager["serial"], eager["farm"], strict=True)]
        gpu = flush.graphs_flushed_us(calls, on_capture_error=lambda who, exc: print(f"{who}: {exc}"))
        us = {who: statistics.median(v) for who, v in eager.items()}
        rows.append({
            "m": m, "n": n, "k": k, "dtype": dtype,
            "farm_pick": label(farm_pick), "serial_pick": label(serial_pick),
            "farm_eager_us": round(us["farm"], 2), "serial_eager_us": round(us["serial"], 2),
            "ratio_serial_over_farm": round(us["serial"] / us["farm"], 3),
            "ratio_min": round(min(rounds), 3), "ratio_max": round(max(rounds), 3),
            "farm_gpu_us": round(gpu.get("farm", float("nan")), 2),
            "serial_gpu_us": round(gpu.get("serial", float("nan")), 2),
            "farm_stored_eager_us": round(stored["eager_ms"] * 1e3, 2),
            "farm_stored_host_us": round(stored["host_ms"] * 1e3, 2) if stored.get("host_ms") else None,
        })  # fmt: skip
    write_results(args.out, COLUMNS, rows)
    for row in rows:
        print(*(row[c] for c in COLUMNS), sep="  ")


if __name__ == "__main__":
    main()
