"""What QuietHost costs a sweep and what it buys: the same sweep on one GPU twice, through `farm sweep`,
once with the worker's compiles held back while host times are taken (farm.quiet_host.QuietHost, as
shipped) and once with nothing held back (`off`).

    python benchmarks/quiet_host_cost.py                      # writes docs/results/quiet_host_cost.csv
    python benchmarks/quiet_host_cost.py --tiny --csv X.csv   # CPU: the interpreter, three points

QuietHost's `quiet()` waits for the compiles running on the worker's pool to end and holds new ones
back while the clock takes each point's host time (farm.clock.CudaClock.host_times), so the GPU may
idle behind a compile, and the next batch compiles later: a cost in points a minute. Without it a
Python thread compiling beside the queueing thread takes the GIL from it: host times read high.

Each run is `python farm/sweep.py --spec S --workers 1 --no-progress` in a fresh process, into a
fresh database, from an empty Triton cache (every kernel compiled in each run, as in
benchmarks/scaling.py), on a local Ray of its own: RAY_ADDRESS unset and a fresh RAY_TMPDIR, so no
running Ray is joined (its workers, kept ones included, would run as they started). `shipped` runs
first, then `off` (--off-first: the other way round, to see what the order does). The bench imports
torch, Triton and Ray before them (its provenance line needs them), so that the first run is not the
only one to read them from a cold page cache.

How `off` is switched: FARM_QUIET_HOST=0 in the sweep's environment (farm.quiet_host.SWITCH_ENV, read
by the worker when it starts: farm.quiet_host.LoudHost, whose `quiet()` and `compiling()` hold
nothing). A local Ray's workers inherit the environment of the process that started it, so the
variable reaches every worker process, restarted ones included, with no change to the command line,
the sweep's options, the kept workers' digest or the Ray actor's arguments; an option of GpuWorker
would have had to pass through all four (farm.options, farm.cluster's start_workers and
worker_digest, cli/sweep.py) for a switch that only this measurement uses.

Columns, one row per mode:
- points: the sweep's points stored (ok and failed), ok: those ok;
- loop_s: the sweep's wall time (the sweep row's started_at to finished_at: workers up, every
  point stored), command_s: the whole command (Python and Ray start-up included);
  points_per_min: points / loop_s x 60;
- common: the points ok with a host time in both runs; host_us_median and host_us_p90: this run's
  stored host time of a call over those points (p90: linear between the order statistics);
  host_ratio_median: the median over them of this run's host time over shipped's (1 for shipped);
- cublas_host_us: the median host time of this run's ok cuBLAS points (a call whose host time does
  not depend on a compile of its own);
- gpu: the environment's GPU name (the interpreter's rows: its CPU stand-in), run: 1 or 2, the order.

Under the interpreter (--tiny) nothing compiles ahead and host times are the interpreter's wall
times: the rows check the plumbing, not QuietHost. Time on one H100-class GPU: about 75 s a run
(0.9 min of GPU by the dry run's estimate and 20 s of start-up), under 4 minutes in all; --timeout-s
(default 300) stops a run and the bench, keeping the rows written so far.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from cli.sweep import EXIT_OK, EXIT_UNMEASURED  # noqa: E402
from farm.quiet_host import SWITCH_ENV  # noqa: E402
from tools.ports import stop_group  # noqa: E402

SPEC = REPO / "benchmarks" / "quiet_host_cost.yaml"
MODES = ("shipped", "off")
COLUMNS = [
    "mode",
    "points",
    "ok",
    "loop_s",
    "command_s",
    "points_per_min",
    "common",
    "host_us_median",
    "host_us_p90",
    "host_ratio_median",
    "cublas_host_us",
    "gpu",
    "run",
]
# --tiny: one small shape under Triton's interpreter, two tiled configs and cuBLAS (a few seconds a run
# on 2 cores, most of it Ray's start-up).
TINY_SPEC = """\
name: quiet_host_cost_tiny
dtypes: [bfloat16]
variants: [tiled, cublas]
shapes: [{m: 24, n: 32, k: 40}]
configs: {block_m: [16], block_n: [16, 32], block_k: [16], num_warps: [4], num_stages: [2]}
timing: {min_reps: 2, max_reps: 2}
"""


def p90(values: list[float]) -> float:
    """The 90th percentile, linear between order statistics (numpy's default)."""
    ordered = sorted(values)
    at = 0.9 * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def host_times(db: Path) -> dict[tuple, float]:
    """Host ms of each ok point with one: (variant, dtype, m, n, k, config_key) -> host_ms."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT variant, dtype, m, n, k, config_key, host_ms FROM measurements "
            "WHERE status = 'ok' AND host_ms IS NOT NULL"
        )
        return {tuple(r[:6]): r[6] for r in rows}


def sweep_row(db: Path) -> dict:
    """The one sweep of a run's database: points stored, ok, loop seconds, GPU name."""
    with sqlite3.connect(db) as conn:
        started, finished, n_ok, n_failed = conn.execute(
            "SELECT started_at, finished_at, n_ok, n_failed FROM sweeps ORDER BY id DESC LIMIT 1"
        ).fetchone()
        gpus = [name for (name,) in conn.execute("SELECT DISTINCT gpu_name FROM environments")]
    loop = datetime.fromisoformat(finished) - datetime.fromisoformat(started)
    return dict(points=n_ok + n_failed, ok=n_ok, loop_s=loop.total_seconds(), gpu=" + ".join(sorted(gpus)))


def run(mode: str, spec: Path, folder: Path, backend: str | None, timeout_s: float) -> dict:
    """One sweep of `spec` on one worker with QuietHost as shipped or off; its sweep row's numbers."""
    db = folder / f"{mode}.db"
    ray_tmp = Path(tempfile.mkdtemp(prefix="qhc-ray-", dir="/tmp"))  # short: Ray's socket paths
    env = {
        **os.environ,
        "TRITON_CACHE_DIR": str(folder / f"triton-cache-{mode}"),  # empty: every kernel compiled here
        "RAY_TMPDIR": str(ray_tmp),  # no Ray head recorded there: the sweep starts its own
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    env.pop("RAY_ADDRESS", None)
    env.pop(SWITCH_ENV, None)
    if mode == "off":
        env[SWITCH_ENV] = "0"
    command = [sys.executable, str(REPO / "farm" / "sweep.py"), "--spec", str(spec), "--db", str(db)]
    command += ["--workers", "1", "--no-progress"]
    if backend:
        command += ["--backend", backend]
    log = folder / f"{mode}.log"
    start = time.monotonic()
    try:
        with log.open("w") as out:
            # its own process group: a run stopped at timeout_s takes its local Ray down with it
            proc = subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                returncode = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                stop_group(proc, 10)
                raise
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    if returncode not in (EXIT_OK, EXIT_UNMEASURED):  # a point that failed is a row: its run counts
        tail = log.read_text()[-3000:]
        raise RuntimeError(f"{mode}: the sweep exited {returncode}:\n{tail}")
    return dict(mode=mode, command_s=time.monotonic() - start, db=db, **sweep_row(db))


def rows_of(results: list[dict]) -> list[dict]:
    """One CSV row per mode, host times compared over the points ok in both runs."""
    times = {r["mode"]: host_times(r["db"]) for r in results}
    common = set.intersection(*(set(t) for t in times.values()))
    shipped = times.get("shipped", {})
    rows = []
    for order, r in enumerate(results, 1):
        mine = times[r["mode"]]
        host = [mine[key] for key in sorted(common)]
        ratios = [mine[key] / shipped[key] for key in sorted(common) if shipped.get(key)]
        cublas = [ms for key, ms in mine.items() if key[0] == "cublas"]
        rows.append(
            {
                "mode": r["mode"],
                "points": r["points"],
                "ok": r["ok"],
                "loop_s": round(r["loop_s"], 1),
                "command_s": round(r["command_s"], 1),
                "points_per_min": round(60 * r["points"] / r["loop_s"], 1) if r["loop_s"] > 0 else "",
                "common": len(common),
                "host_us_median": round(1e3 * statistics.median(host), 2) if host else "",
                "host_us_p90": round(1e3 * p90(host), 2) if host else "",
                "host_ratio_median": round(statistics.median(ratios), 3) if ratios else "",
                "cublas_host_us": round(1e3 * statistics.median(cublas), 2) if cublas else "",
                "gpu": r["gpu"],
                "run": order,
            }
        )
    return rows


def write_csv(path: Path, rows: list[dict], meta_line: str) -> None:
    """The rows and their provenance sidecar PATH.meta (tools.provenance's line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    Path(f"{path}.meta").write_text(meta_line + "\n")


def provenance_line() -> str:
    """tools.provenance's line for this command; it imports torch and Triton (and Ray here), the
    imports every run's processes make."""
    import ray  # noqa: F401

    from tools.provenance import provenance, this_command

    return provenance(this_command())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, default=SPEC, help="the sweep both runs make")
    parser.add_argument("--tiny", action="store_true", help="a three-point spec under the interpreter (CPU)")
    parser.add_argument(
        "--csv", type=Path, help="default: docs/results/quiet_host_cost.csv (--tiny: a temp file)"
    )
    parser.add_argument("--keep", metavar="DIR", type=Path, help="copy each run's database here (MODE.db)")
    parser.add_argument(
        "--timeout-s", type=float, default=300.0, help="stop a run (and the bench) after this long"
    )
    parser.add_argument("--off-first", action="store_true", help="run `off` first (default: `shipped` first)")
    args = parser.parse_args()
    csv_path = args.csv or (
        Path(tempfile.gettempdir()) / "quiet_host_cost_tiny.csv"
        if args.tiny
        else REPO / "docs" / "results" / "quiet_host_cost.csv"
    )
    # the runs' databases and Triton caches (megabytes a run on a GPU) go with the bench
    with tempfile.TemporaryDirectory(prefix="quiet-host-cost-", ignore_cleanup_errors=True) as tmp:
        folder = Path(tmp)
        spec, backend = args.spec, None
        if args.tiny:
            spec, backend = folder / "tiny.yaml", "interpreter"
            spec.write_text(TINY_SPEC)
        # The provenance line imports torch, Triton and Ray, as every run's processes do: before the first
        # run, so that its imports are not the only cold ones; --tiny's runs (no measurement) go meanwhile.
        meta = concurrent.futures.ThreadPoolExecutor(1).submit(provenance_line)
        if not args.tiny:
            meta.result()
        results, rows = [], []
        for mode in reversed(MODES) if args.off_first else MODES:
            try:
                results.append(run(mode, spec, folder, backend, args.timeout_s))
            except subprocess.TimeoutExpired:
                print(f"{mode}: the sweep ran past {args.timeout_s:.0f} s; stopping", flush=True)
                break
            r = results[-1]
            print(f"{mode}: {r['points']} points in {r['loop_s']:.1f} s of sweep", flush=True)
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(r["db"], args.keep / f"{mode}.db")
            rows = rows_of(results)
            # after every run: a later run that is stopped loses only itself
            write_csv(csv_path, rows, meta.result())
    if not rows:
        sys.exit("no run finished: no rows")
    print(f"wrote {csv_path}")
    widths = {c: max(len(c), *(len(str(row[c])) for row in rows)) for c in COLUMNS}
    print("  ".join(f"{c:>{widths[c]}}" for c in COLUMNS))
    for row in rows:
        print("  ".join(f"{row[c]!s:>{widths[c]}}" for c in COLUMNS))


if __name__ == "__main__":
    main()
