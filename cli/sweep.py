"""Run a sweep: `farm sweep ...`, `python farm/sweep.py ...`, or on a cluster
`ray submit cluster.yaml farm/sweep.py -- ...` / `ray job submit --working-dir . -- python farm/sweep.py ...`.

    farm sweep --preset smoke                     # the Ray running here, else a local one; results.db
    farm sweep --spec my.yaml --db results.db --plugin my_variants.py
    farm sweep --preset splitk --dry-run          # the pruned grid, counts and a time estimate
    ray start --head; farm sweep --preset smoke --keep-workers   # later sweeps start in seconds

Points the database already holds for the same environment and code version are skipped, so a
sweep that was stopped (Ctrl-C, a killed driver) resumes where it was when run again.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections import Counter

from db.engine import check_target, display_target, mask_passwords
from farm.errors import UserError

STATUS_ORDER = ("ok", "wrong", "compile_error", "launch_error", "crashed", "timeout")


def register(sub, add_db_argument) -> None:
    p = sub.add_parser(
        "sweep",
        help="measure a grid of shapes x dtypes x variants x configs into the database",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p, add_db_argument)
    p.set_defaults(handler=handle)


def add_arguments(p: argparse.ArgumentParser, add_db_argument) -> None:
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset", help="a built-in grid: smoke, splitk, grouping, llm, full")
    source.add_argument("--spec", help="a grid spec in YAML (format: README)")
    add_db_argument(p)
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="FILE.py",
        help="register extra variants from this file (repeatable)",
    )
    p.add_argument(
        "--address",
        help="a Ray cluster to join; default: $RAY_ADDRESS, else the Ray head running on this node, "
        "else a new local Ray",
    )
    p.add_argument(
        "--backend",
        choices=("auto", "cuda", "interpreter"),
        default="auto",
        help="auto: CUDA where a worker sees a GPU, else Triton's interpreter on the CPU",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="at most N workers; without a GPU, N logical GPUs for the interpreter (default 2)",
    )
    p.add_argument(
        "--point-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="the floor of each point's deadline in seconds; deadlines scale with expected time",
    )
    p.add_argument("--compile-threads", type=int, default=8, help="compiler threads per worker (default 8)")
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="measure again points stored as crashed, timeout, compile_error or launch_error",
    )
    p.add_argument(
        "--keep-workers",
        action="store_true",
        help="leave the GPU workers running on the cluster for the next sweep, which starts in seconds "
        "(needs a running Ray: `ray start --head`; `farm workers --stop` ends them)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the pruned grid and an estimate, then exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")


def handle(args: argparse.Namespace) -> int:
    from farm.options import SweepOptions
    from farm.plan import check_variants, estimate_gpu_seconds, expand
    from farm.plugins import load_plugin
    from farm.spec import load_spec

    spec = load_spec(preset=args.preset, path=args.spec)
    if args.workers is not None and args.workers < 1:
        raise UserError("--workers must be at least 1")
    plugin_sources = [load_plugin(path) for path in args.plugin]
    if args.dry_run:
        points, pruned = expand(spec)
        print_plan(
            spec,
            points,
            pruned,
            estimate_gpu_seconds(points, args.compile_threads, spec.timing.regime, spec.timing.limit_passes),
        )
        return 0
    check_variants(spec)  # before anything starts
    # The database too: a wrong URL or an unreachable server fails in well under a second here, not
    # after Ray and the workers have started (6-20 s on an H200 host; docs/design.md, "Start-up").
    check_target(args.db)
    options = SweepOptions(
        db=args.db,
        plugins=args.plugin,
        address=args.address,
        backend=args.backend,
        workers=args.workers,
        point_timeout_s=args.point_timeout,
        compile_threads=args.compile_threads,
        retry_failed=args.retry_failed,
        progress=not args.no_progress,
        keep_workers=args.keep_workers,
    )
    # Ray and the workers first, before the driver imports its database modules (1.5-1.9 s on the
    # 2-core VM: SQLAlchemy's ORM, pandas, Alembic): the workers take longer to come up (import
    # torch, open the GPU: 4.3 s on an H200 host) and the driver's set-up hides behind them.
    launched = options.launch(plugin_sources)
    try:
        from farm.driver import run_sweep
    except BaseException:
        launched.stop()
        raise
    command = mask_passwords(shlex.join(sys.argv))  # stored with the sweep: no passwords
    result = run_sweep(spec, options, command, launched)  # stops the workers and the Ray it started
    print_summary(result, display_target(args.db))
    return 130 if result.status == "interrupted" else (1 if result.status == "failed" else 0)


def print_plan(spec, points, pruned: Counter, seconds: float) -> None:
    per_variant = Counter(p.variant for p in points)
    shapes = {p.shape for p in points}
    print(
        f"sweep {spec.name!r}: {len(points)} points over {len(shapes)} shapes x {len(spec.dtypes)} dtype(s)"
    )
    width = max(len("variant"), *(len(name) for name in spec.variants))
    print(f"  {'variant':{width}s} {'points':>7s} {'pruned':>7s}")
    for name in spec.variants:
        print(f"  {name:{width}s} {per_variant[name]:7d} {pruned[name]:7d}")
    # Start-up measured on an H200 host (docs/results/startup_probe.csv, benchmarks/startup_probe.py): from the
    # command to a one-point sweep's record, 23.5 s starting a local Ray, 15.4 s joining a running
    # head, 3.5-4.3 s on workers a previous `--keep-workers` sweep left running.
    print(
        f"estimated GPU time: {seconds / 60:.1f} min on one H100-class GPU "
        f"({seconds / 60 / 8:.1f} min on 8), plus about 20 s of start-up "
        "(15 s joining a running Ray: `ray start --head`; 4 s on workers kept by --keep-workers)"
    )


def print_summary(result, db: str) -> None:
    minutes = max(result.seconds, 1e-9) / 60
    print(
        f"\nsweep {result.status}: {result.measured} points measured in {result.seconds:.0f} s "
        f"({result.measured / minutes:.0f} points/min); {result.skipped} already in the database"
    )
    print("  " + ", ".join(f"{s} {result.counts[s]}" for s in STATUS_ORDER if result.counts[s]))
    failed = [r for r in result.failures if r.status != "wrong"]
    wrong = [r for r in result.failures if r.status == "wrong"]
    for title, rows in (("wrong results", wrong), ("failed points", failed)):
        if rows:
            print(f"  {title} ({len(rows)}):")
            for r in rows[:15]:
                print(
                    f"    {r.status:13s} {r.variant} {r.dtype} {r.m}x{r.n}x{r.k} {r.config_key}: "
                    f"{r.error.splitlines()[0][:120] if r.error else ''}"
                )
            if len(rows) > 15:
                print(f"    ... {len(rows) - 15} more: farm export results --out failed.csv")
    for f in result.faults:
        back = f"back after {f.recovery_s:.1f} s" if f.recovery_s is not None else "not back"
        print(f"  fault: worker {f.worker} {f.kind} on {f.point or 'a batch'}; {back}")
    if result.status == "interrupted":
        print("  interrupted: every finished point is saved; run the same command again to resume")
    print(f"next: farm best --db {db}    |    farm dashboard --db {db}")
