"""Repeatability: the same points in two result databases, against issue #13's bars.

    python tools/compare_runs.py run1.db run2.db [--by-shape]
    python tools/compare_runs.py run1.db serial.db      # the farm against tools/serial_loop.py's do_bench

Over the `ok` points both runs measured (the same variant, dtype, shape and config):
- time: median and 90th percentile of |t1/t2 - 1|, overall and per variant (bar: median <= 1%);
- grouping gains (`db.queries.grouping_gain`: time at group_m 1 over time at group_m > 1, same
  blocks): |gain1 - gain2| per pair, its median, the share within 0.02 and the largest (bar: every
  pair within 0.02);
- energy per launch (trusted readings on both sides): median |e1/e2 - 1| and the share within 3%
  (bar: 3%).
--by-shape adds a table per shape: points, time scatter, the share throttled, gain pairs and their
differences (where the power limiter acts, the scatter grows).
Either argument may be a database URL (postgresql://...); both are opened read-only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd
from sqlalchemy import select

from db.queries import GAIN_KEY, frame, grouping_gain, trusted_energy, view
from db.schema import open_engine

POINT = ["variant", "dtype", "m", "n", "k", "config_key"]
TIME_BAR, GAIN_BAR, ENERGY_BAR = 0.01, 0.02, 0.03


def read_run(target: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ok points with ms and trusted joules_per_launch, grouping gains) of one results database."""
    engine = open_engine(target, readonly=True)
    try:
        with engine.connect() as conn:
            r = view("results")
            stmt = select(
                *(r.c[c] for c in POINT), r.c.ms, r.c.throttled, trusted_energy(r, "joules_per_launch")
            )
            points = frame(conn, stmt.where(r.c.status == "ok", r.c.ms.is_not(None)))
            gains = grouping_gain(conn)
    finally:
        engine.dispose()
    # A point measured twice in one database (a resumed sweep's retry): its newest row is not
    # known here, so the faster one stands, as the views pick it.
    points = points.sort_values("ms").drop_duplicates(POINT)
    return points, gains


def time_deviation(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    both = a.merge(b, on=POINT, suffixes=("_1", "_2"))
    both["dev"] = (both.ms_1 / both.ms_2 - 1).abs()
    both["energy_dev"] = (both.joules_per_launch_1 / both.joules_per_launch_2 - 1).abs()
    return both


def gain_difference(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    both = a.merge(b, on=[*GAIN_KEY, "group_m"], suffixes=("_1", "_2"))
    both["diff"] = (both.time_gain_1 - both.time_gain_2).abs()
    both["energy_diff"] = (both.energy_gain_1 - both.energy_gain_2).abs()
    return both


def report(title: str, both: pd.DataFrame) -> list[str]:
    if both.empty:
        return [f"{title}: no common points"]
    lines = [
        f"{title}: {len(both)} common points; median |t1/t2-1| {both.dev.median():.2%} (bar {TIME_BAR:.0%}), "
        f"p90 {both.dev.quantile(0.9):.2%}"
    ]
    for variant, sub in both.groupby("variant"):
        lines.append(
            f"  {variant:14s} {len(sub):5d} points  median {sub.dev.median():.2%}  max {sub.dev.max():.2%}"
        )
    energy = both.energy_dev.dropna()
    if len(energy):
        lines.append(
            f"energy per launch: {len(energy)} of {len(both)} points read on both sides; median |e1/e2-1| "
            f"{energy.median():.2%} (bar {ENERGY_BAR:.0%}), {(energy <= ENERGY_BAR).mean():.0%} within it"
        )
    else:
        lines.append("energy per launch: no point has a reading in both runs")
    return lines


def report_gains(gains: pd.DataFrame) -> list[str]:
    if gains.empty:
        return ["grouping gains: no pair in both runs"]
    worst = gains.loc[gains["diff"].idxmax()]
    lines = [
        f"grouping gains: {len(gains)} pairs; median |gain1-gain2| {gains['diff'].median():.3f}, "
        f"{(gains['diff'] <= GAIN_BAR).mean():.0%} within {GAIN_BAR} (bar: every pair), largest "
        f"{worst['diff']:.3f} at {worst.m}x{worst.n}x{worst.k} {worst.variant} "
        f"{worst.block_m}x{worst.block_n}x{worst.block_k} group_m {worst.group_m} "
        f"({worst.time_gain_1:.3f} against {worst.time_gain_2:.3f})"
    ]
    energy = gains.energy_diff.dropna()
    if len(energy):
        lines.append(
            f"  energy gains: {len(energy)} pairs with readings; median |diff| {energy.median():.3f}, "
            f"largest {energy.max():.3f}"
        )
    return lines


def by_shape(points: pd.DataFrame, gains: pd.DataFrame) -> list[str]:
    """Per shape: the time scatter of its points and the differences of its gain pairs."""
    shape = ["dtype", "m", "n", "k"]
    lines = [
        "| shape | points | median abs(t1/t2 - 1) | p90 | throttled | gain pairs | median abs(gain1 - gain2) "
        "| within 0.02 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, sub in points.groupby(shape):
        pairs = gains.merge(pd.DataFrame([key], columns=shape), on=shape)["diff"]
        gain_cells = (
            f"{len(pairs)} | {pairs.median():.3f} | {(pairs <= GAIN_BAR).mean():.0%}"
            if len(pairs)
            else "0 | | "
        )
        share = sub.throttled_1.astype("boolean").mean()  # rows that never read NVML: unknown
        throttled = "n/a" if pd.isna(share) else f"{share:.0%}"
        lines.append(
            f"| {key[0]} {key[1]}x{key[2]}x{key[3]} | {len(sub)} | {sub.dev.median():.2%} | "
            f"{sub.dev.quantile(0.9):.2%} | {throttled} | {gain_cells} |"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("first", help="a results database (path or URL)")
    parser.add_argument("second", help="a results database (path or URL)")
    parser.add_argument("--by-shape", action="store_true", help="also a table per shape (markdown)")
    args = parser.parse_args(argv)
    (points1, gains1), (points2, gains2) = read_run(args.first), read_run(args.second)
    points, gains = time_deviation(points1, points2), gain_difference(gains1, gains2)
    lines = report("run 1 vs run 2", points) + report_gains(gains)
    if args.by_shape:
        lines += by_shape(points, gains)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
