"""Multi-GPU scaling on one host: the same sweep on 1, 2, 4 (8) GPUs.

    python bench/scaling.py --preset splitk --gpus 1 2 4 8 --csv docs/bench/scaling.csv

Each run starts a fresh local Ray with N workers and sweeps into a fresh database. Reports
points per minute of the sweep loop, efficiency = rate(N) / (N * rate(1)), the distinct GPU
UUIDs in the rows (one actor per GPU), and the median |t_N / t_1 - 1| of the points both runs
measured (results across GPUs equal within noise). NVLink multicast stays off.
"""

from __future__ import annotations

import argparse
import csv
import os
import sqlite3
import statistics
import tempfile
from pathlib import Path

# Shared multi-GPU hosts: NVLink multicast can take their GPUs out of service (device KINDS.md).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

from farm.driver import SweepOptions, run_sweep
from farm.spec import load_spec

COLUMNS = ["gpus", "points", "wall_s", "points_per_min", "efficiency"]


def _times(db: Path) -> dict[tuple, float]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT variant, dtype, m, n, k, config_key, ms FROM measurements WHERE status='ok'"
        )
        return {tuple(r[:6]): r[6] for r in rows}


def _uuids(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {u for (u,) in conn.execute("SELECT DISTINCT gpu_uuid FROM measurements")}


def main() -> None:
    parser = argparse.ArgumentParser()
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--preset", default="splitk")
    source.add_argument("--spec", help="a spec file instead of a preset")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--csv", default="docs/bench/scaling.csv")
    args = parser.parse_args()
    spec = load_spec(path=args.spec) if args.spec else load_spec(preset=args.preset)
    folder = Path(tempfile.mkdtemp(prefix="scaling-"))
    rows, base_rate, base_times = [], None, None
    for gpus in args.gpus:
        db = folder / f"gpus{gpus}.db"
        # A fresh Triton cache per run: otherwise a later run loads what an earlier one compiled
        # (seen: 2 GPUs at "1.5x efficiency" after a 1-GPU run had filled the cache).
        os.environ["TRITON_CACHE_DIR"] = str(folder / f"triton-cache-{gpus}")
        result = run_sweep(spec, SweepOptions(db=str(db), workers=gpus, progress=False), f"scaling {gpus}")
        if result.measured == 0 or result.status != "finished":
            print(f"{gpus} GPUs: {result.status}, {result.measured} points; stopping")
            break
        rate = result.measured / result.seconds * 60
        base_rate = base_rate or rate
        times = _times(db)
        base_times = base_times or times
        common = set(times) & set(base_times)
        agreement = (
            statistics.median(abs(times[k] / base_times[k] - 1) for k in common) if common else float("nan")
        )
        rows.append(
            {
                "gpus": gpus,
                "points": result.measured,
                "wall_s": round(result.seconds, 1),
                "points_per_min": round(rate, 1),
                "efficiency": round(rate / (gpus * base_rate), 3),
            }
        )
        print(
            f"{gpus} GPUs: {result.measured} points in {result.seconds:.1f} s = {rate:.0f}/min, "
            f"efficiency {rows[-1]['efficiency']:.2f}, {len(_uuids(db))} GPU UUIDs, "
            f"median |t/t1-1| {agreement:.2%}"
        )
    Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
    with open(args.csv, "w", newline="") as fh:
        writer = csv.DictWriter(fh, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
