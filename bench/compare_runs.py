"""Repeatability and agreement: the same points in two result databases (or a serial-loop JSON).

    python bench/compare_runs.py run1.db run2.db [--serial serial.json]

Prints, per variant and overall, the median and 90th percentile of |t1/t2 - 1| over the `ok`
points both runs measured. The farm's target: median <= 2%.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics


def _times(db: str) -> dict[tuple, float]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT variant, dtype, m, n, k, config_key, ms FROM measurements WHERE status = 'ok'"
        )
        return {tuple(r[:6]): r[6] for r in rows}


def _report(title: str, a: dict, b: dict) -> None:
    common = sorted(set(a) & set(b))
    if not common:
        print(f"{title}: no common points")
        return
    dev = {k: abs(a[k] / b[k] - 1) for k in common}
    print(
        f"{title}: {len(common)} common points; median |t1/t2-1| = {statistics.median(dev.values()):.2%}, "
        f"p90 = {statistics.quantiles(dev.values(), n=10)[-1]:.2%}"
    )
    for variant in sorted({k[0] for k in common}):
        sub = [v for k, v in dev.items() if k[0] == variant]
        print(
            f"  {variant:12s} {len(sub):5d} points  median {statistics.median(sub):.2%}  max {max(sub):.2%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--serial", help="a bench/serial_loop.py JSON to compare the first run with")
    args = parser.parse_args()
    first = _times(args.first)
    _report("run 1 vs run 2", first, _times(args.second))
    if args.serial:
        with open(args.serial) as fh:
            rows = json.load(fh)["rows"]
        serial = {
            (r["variant"], "bfloat16", r["m"], r["n"], r["k"], r["config_key"]): r["ms"]
            for r in rows
            if "ms" in r
        }
        _report("farm run 1 vs serial do_bench", first, serial)


if __name__ == "__main__":
    main()
