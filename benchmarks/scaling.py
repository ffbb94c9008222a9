"""Multi-GPU scaling on one host: the same sweep on 1, 2, 4 (8) GPUs, each run a whole command.

    python benchmarks/scaling.py --preset splitk --gpus 1 2 4 8 --csv $OUT/scaling.csv
    python benchmarks/scaling.py --spec benchmarks/streamk.yaml --regime interleaved --gpus 1 2 --csv X.csv

Each run is `python farm/sweep.py --workers N` in a fresh process, into a fresh database, from an
empty Triton cache (a cache an earlier run filled made 2 GPUs look "1.5x efficient"). Columns:
loop_s is the sweep loop (the sweep row's started_at to finished_at: workers up, every point
stored), command_s the whole command (Python and Ray start-up included); efficiency is
rate(N) / (N * rate(1)) of each. Also printed: the distinct GPU UUIDs in the rows (one actor per
GPU) and the median |t_N / t_1 - 1| of the points both runs measured (equal within noise).
NVLink multicast stays off. --regime runs the same grid under another timing regime (a copy of the
spec with timing.regime set; the CSV's `regime` column says which); --timeout-s stops a run, its
local Ray included, and the bench after it, keeping the rows written so far; --visit N fills the
`visit` column (docs/results/scaling.csv gathers rows of several runs).

Writes --csv (default docs/results/scaling.csv; the stream-K spec's rows are
docs/results/scaling_streamk.csv). Time: one whole sweep per GPU count; on a 2 x H200 host the splitk
preset took 131 s on one GPU and 71 s on two, the stream-K spec 182 s and 104 s.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from tools.ports import stop_group  # noqa: E402

COLUMNS = [
    "gpus",
    "points",
    "loop_s",
    "command_s",
    "loop_efficiency",
    "command_efficiency",
    "first_point_s",  # the command's start to the first point's record (start-up; the bar: <= 8 s)
    "regime",  # the timing regime every run used (the spec's own, or --regime)
    "visit",  # --visit: a label for the run the row comes from (empty without)
]

# Shared multi-GPU hosts: NVLink multicast can take their GPUs out of service (device KINDS.md).
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _times(db: Path) -> dict[tuple, float]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT variant, dtype, m, n, k, config_key, ms FROM measurements WHERE status='ok'"
        )
        return {tuple(r[:6]): r[6] for r in rows}


def _sweep_row(db: Path) -> tuple[int, float, int, datetime]:
    """(points stored, loop seconds, distinct GPU UUIDs, first record's time) of the one sweep in db."""
    with sqlite3.connect(db) as conn:
        started, finished, n_ok, n_failed = conn.execute(
            "SELECT started_at, finished_at, n_ok, n_failed FROM sweeps ORDER BY id DESC LIMIT 1"
        ).fetchone()
        (uuids,) = conn.execute("SELECT COUNT(DISTINCT gpu_uuid) FROM measurements").fetchone()
        (first,) = conn.execute("SELECT MIN(created_at) FROM measurements").fetchone()
    loop = datetime.fromisoformat(finished) - datetime.fromisoformat(started)
    return n_ok + n_failed, loop.total_seconds(), uuids, _utc(first)


def _utc(text: str) -> datetime:
    when = datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def run(source: list[str], gpus: int, folder: Path, timeout_s: float | None = None) -> dict:
    db = folder / f"gpus{gpus}.db"
    env = {
        **os.environ,
        **NO_MULTICAST,
        "TRITON_CACHE_DIR": str(folder / f"triton-cache-{gpus}"),  # empty: every kernel compiled here
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, str(REPO / "farm" / "sweep.py"), *source, "--db", str(db)]
    command += ["--workers", str(gpus), "--no-progress"]
    start, wall_start = time.monotonic(), datetime.now(UTC)
    # its own process group: a run stopped at timeout_s takes its local Ray down with it
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        returncode = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_group(proc, 0)
        raise
    if returncode:
        raise subprocess.CalledProcessError(returncode, command)
    command_s = time.monotonic() - start
    points, loop_s, uuids, first = _sweep_row(db)
    first_point_s = (first - wall_start).total_seconds()
    return dict(
        gpus=gpus, points=points, loop_s=loop_s, command_s=command_s, uuids=uuids, db=db, first=first_point_s
    )


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def measure(args: argparse.Namespace, folder: Path) -> list[dict]:
    """The sweep on each of args.gpus in turn: a row each, args.csv rewritten after every run."""
    spec_path = Path(args.spec) if args.spec else REPO / "farm" / "presets" / f"{args.preset}.yaml"
    spec = yaml.safe_load(spec_path.read_text())
    regime = args.regime or spec.get("timing", {}).get("regime", "steady")
    if args.regime:  # the same grid under another regime: a copy of the spec with timing.regime set
        spec.setdefault("timing", {})["regime"] = args.regime
        spec_path = folder / spec_path.name
        spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    source_args = ["--spec", str(spec_path)] if args.spec or args.regime else ["--preset", args.preset]
    rows, base, base_times = [], None, None
    for gpus in args.gpus:
        try:
            result = run(source_args, gpus, folder, args.timeout_s)
        except subprocess.CalledProcessError as exc:
            print(f"{gpus} GPUs: the sweep exited {exc.returncode}; stopping")
            break
        except subprocess.TimeoutExpired:
            print(f"{gpus} GPUs: the sweep ran past {args.timeout_s:.0f} s; stopping")
            break
        base = base or result
        times = _times(result["db"])
        base_times = base_times or times
        common = set(times) & set(base_times)
        agreement = statistics.median(abs(times[k] / base_times[k] - 1) for k in common) if common else None
        row = {
            "gpus": gpus,
            "points": result["points"],
            "loop_s": round(result["loop_s"], 1),
            "command_s": round(result["command_s"], 1),
            # rate(N) / (N * rate(1)), rate = points / seconds
            "loop_efficiency": round(
                result["points"] * base["loop_s"] / (gpus * base["points"] * result["loop_s"]), 3
            ),
            "command_efficiency": round(
                result["points"] * base["command_s"] / (gpus * base["points"] * result["command_s"]), 3
            ),
            "first_point_s": round(result["first"], 1),
            "regime": regime,
            "visit": args.visit,
        }
        if args.keep:
            Path(args.keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(result["db"], Path(args.keep) / f"{Path(args.csv).stem}-gpus{gpus}.db")
        rows.append(row)
        note = f"median |t/t1-1| {agreement:.2%}" if agreement is not None else ""
        print(f"{gpus} GPUs: {row}, {result['uuids']} GPU UUIDs {note}", flush=True)
        write_csv(Path(args.csv), rows)  # after every run: a later run that is stopped loses only itself
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--preset", default="splitk")
    source.add_argument("--spec", help="a spec file instead of a preset")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--csv", default="docs/results/scaling.csv")
    parser.add_argument("--keep", metavar="DIR", help="copy each run's results database here")
    parser.add_argument("--timeout-s", type=float, help="stop a run (and the bench) after this long")
    parser.add_argument("--regime", help="override the spec's timing regime (farm sweep checks the name)")
    parser.add_argument("--visit", default="", help="the visit number to write in the CSV's visit column")
    args = parser.parse_args()
    # each run's database and Triton cache (megabytes a run on the GPU) go with the bench
    with tempfile.TemporaryDirectory(prefix="scaling-", ignore_cleanup_errors=True) as folder:
        rows = measure(args, Path(folder))
    print(f"wrote {args.csv}")
    print(" ".join(f"{c:>18s}" for c in COLUMNS))
    for row in rows:
        print(" ".join(f"{row[c]:>18}" for c in COLUMNS))


if __name__ == "__main__":
    main()
