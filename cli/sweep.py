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
import os
import shlex
import signal
import sys
import threading
from collections import Counter

from db.engine import display_target, mask_passwords, sqlite_file
from farm.errors import UserError, WriteFailed
from farm.ray_connect import STOP_SIGNALS

STATUS_ORDER = (
    "ok",
    "wrong",
    "compile_error",
    "launch_error",
    "crashed",
    "timeout",
    "too_large",
    "implausible",
    "instrument_error",
)
MEASURED = ("ok", "wrong")  # a wrong result is a finding: the point was measured

# `farm sweep`'s exit statuses: the one table the command, its --help and the closing summary read.
EXIT_OK, EXIT_BAD_INPUT, EXIT_UNMEASURED, EXIT_NO_GPUS, EXIT_INTERRUPTED = 0, 2, 3, 75, 130
EXIT_STATUSES = {
    EXIT_OK: "every requested point measured (ok or wrong: a wrong result is a finding)",
    EXIT_BAD_INPUT: "bad input (spec, option, plugin, database, cluster, a plan the machine cannot run); "
    "nothing was measured",
    EXIT_UNMEASURED: "some points could not be measured: compile_error, launch_error, crashed, timeout, "
    "too_large, implausible, instrument_error, no worker left to run them, or a write to the database "
    "failed (a full disk)",
    EXIT_NO_GPUS: "gave up waiting for GPUs other jobs hold (--wait-s; EX_TEMPFAIL: try again later)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGTERM): every finished point is saved; run it again to resume",
}


def exit_epilog() -> str:
    return "exit statuses:\n" + "\n".join(f"  {code:3d}  {what}" for code, what in EXIT_STATUSES.items())


def register(sub, add_db_argument) -> None:
    p = sub.add_parser(
        "sweep",
        help="measure a grid of shapes x dtypes x variants x configs into the database",
        description=__doc__,
        epilog=exit_epilog(),
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
        help="auto: CUDA where a worker sees a GPU, else Triton's interpreter on the CPU (which "
        "refuses GPU-sized shapes); interpreter: the interpreter whatever the shapes",
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
        help="measure again points stored as crashed, timeout, compile_error, launch_error, implausible or "
        "instrument_error (too_large points are decided again by every sweep)",
    )
    p.add_argument(
        "--repeat",
        action="store_true",
        help="measure every point again as a new run, keeping the earlier runs (the views show the newest; "
        "db.queries.compare_runs compares two runs)",
    )
    p.add_argument(
        "--keep-workers",
        action="store_true",
        help="leave the GPU workers running on the cluster for the next sweep, which starts in seconds "
        "(needs a running Ray: `ray start --head`; `farm workers --stop` ends them)",
    )
    p.add_argument(
        "--wait-s",
        type=float,
        metavar="S",
        help="give up after S seconds waiting for GPUs that other jobs hold (exit status 75); default: "
        "wait as long as it takes, saying every 30 s what the sweep waits for and who holds the GPUs",
    )
    p.add_argument(
        "--search",
        default="grid",
        choices=("grid", "random", "tpe", "model"),
        help="grid (default): every point; random, tpe (Optuna) or model (a cost model learned from the "
        "database): a --budget of each shape's configs, cublas always measured (docs/design.md, 'Search')",
    )
    p.add_argument(
        "--budget",
        default="10%",
        help="with --search: points per (dtype, shape), a share of its configs ('10%%') or a count ('30')",
    )
    p.add_argument(
        "--train",
        action="append",
        default=[],
        metavar="DB",
        help="with --search model: another results database to learn from (repeatable); the model always "
        "learns from --db's own rows too (every GPU's: each row carries its SMs and L2)",
    )
    p.add_argument(
        "--allow-huge",
        action="store_true",
        help="run a plan over the bounds anyway: more than a day of GPU time on its workers, or planning "
        "memory over what this machine has free (refused without it, with the estimate)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the pruned grid and an estimate, then exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")


def handle(args: argparse.Namespace) -> int:
    stop = StopSignals()
    with stop.installed():
        try:
            return run(args, stop)
        except WriteFailed as exc:  # a full disk mid-sweep: one line, the sweep left interrupted
            print(f"error: {mask_passwords(str(exc))}", file=sys.stderr)
            return EXIT_UNMEASURED


def run(args: argparse.Namespace, stop: StopSignals) -> int:
    from db.schema import check_before_writing
    from farm.gpu_wait import WaitTimeout
    from farm.options import SweepOptions
    from farm.plan import DRY_RUN_MEMORY_BYTES, estimate_gpu_seconds, expand, interpreter_refusal
    from farm.plugins import load_plugin
    from farm.price import free_memory_bytes, huge_refusal, price, priced_interpreter_refusal
    from farm.ray_connect import expected_backend
    from farm.spec import load_spec

    # Every option before anything starts: one line and exit status 2 (cli/__init__.py).
    options = SweepOptions(
        db=args.db,
        plugins=args.plugin,
        address=args.address,
        backend=args.backend,
        workers=args.workers,
        point_timeout_s=args.point_timeout,
        compile_threads=args.compile_threads,
        retry_failed=args.retry_failed,
        repeat=args.repeat,
        progress=not args.no_progress,
        keep_workers=args.keep_workers,
        wait_s=args.wait_s,
        search=args.search,
        budget=args.budget,
        train=args.train,
    )
    spec = load_spec(preset=args.preset, path=args.spec)
    plugin_sources = [load_plugin(path) for path in args.plugin]
    # The plan priced from its axes, not expanded (farm.price.price): a 12.8M-point spec had planned
    # for 140 s in 4.1 GB before anything was said. Checks the variants too.
    plan = price(spec, args.compile_threads)
    # The machine the sweep would run on, where it is known before Ray starts: a local Ray on a host
    # without a GPU runs the interpreter; a cluster's workers say so once up (the driver checks then).
    backend = expected_backend(args.address, args.backend)
    interpreted = backend == "interpreter" and args.backend != "interpreter"
    if args.dry_run:
        if plan.points > DRY_RUN_EXPAND_MAX:
            print_priced_plan(spec, plan)
            refusal = priced_interpreter_refusal(plan) if interpreted else None
        else:
            points, pruned = expand(spec)
            seconds = estimate_gpu_seconds(
                points,
                args.compile_threads,
                spec.timing.regime,
                spec.timing.limit_passes,
                spec.timing.energy_window_s,
            )
            print_plan(spec, points, pruned, seconds, DRY_RUN_MEMORY_BYTES)
            if args.search != "grid":
                print_search(args.search, args.budget, points, seconds)
            refusal = interpreter_refusal(points, seconds) if interpreted else None
        if refusal:
            print(f"this machine has no GPU; a sweep would stop here: {refusal}")
        return EXIT_OK
    if not args.allow_huge:
        refusal = huge_refusal(plan, workers_before_ray(args.address, args.workers), free_memory_bytes())
        if refusal:
            raise UserError(refusal)
    if interpreted:
        refusal = priced_interpreter_refusal(plan)
        if refusal:
            raise UserError(refusal)
    # The database too: a wrong URL, an unreachable server, a damaged file or one at a newer schema
    # revision fails in well under a second here, not after Ray and the workers have started (5.6-6.5 s
    # on the 2-core VM; 6-20 s on an H200 host: docs/design.md, "Start-up").
    check_before_writing(args.db)
    check_training_databases(args.train)
    # Ray and the workers first, before the driver imports its database modules (1.5-1.9 s on the
    # 2-core VM: SQLAlchemy's ORM, pandas, Alembic): the workers take longer to come up (import
    # torch, open the GPU: 4.3 s on an H200 host) and the driver's set-up hides behind them.
    # A stop while Ray starts waits until it is up, then stops it whole: ray.init interrupted half-way
    # left its head's dashboard and runtime-env agents running for good (StopSignals).
    try:
        with stop.deferred():
            launched = options.launch(plugin_sources)
    except Exception:
        if stop.received:  # asked to stop while Ray failed to start: stopped, as asked (exit 130)
            raise KeyboardInterrupt from None
        raise
    if stop.received:
        launched.stop()
        raise KeyboardInterrupt
    try:
        from farm.driver import run_sweep
    except BaseException:
        launched.stop()
        raise
    command = mask_passwords(shlex.join(sys.argv))  # stored with the sweep: no passwords
    try:
        result = run_sweep(spec, options, command, launched)  # stops the workers and the Ray it started
    except WaitTimeout as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NO_GPUS
    code = exit_status(result)
    print_summary(result, display_target(args.db), code)
    return code


def check_training_databases(targets) -> None:
    """Each --train database, before Ray starts: it is read, never written or created, so it must exist,
    be a farm results database and stand at a revision this code reads (DatabaseError: one line, exit
    2). Found by the model strategy only after Ray and the workers had started, seconds later."""
    from db.errors import DatabaseError
    from db.schema import open_engine

    for target in targets:
        path = sqlite_file(target)
        if path is not None and not path.exists():
            raise DatabaseError(
                f"--train {display_target(target)}: no such database (--train reads a results database; "
                "it creates none)"
            )
        try:
            open_engine(target, readonly=True).dispose()
        except DatabaseError as exc:
            raise DatabaseError(f"--train: {exc}") from None


# Up to this many points `--dry-run` lists the plan exactly (expand: the full preset's 243,552 points
# in 3-4 s on the 2-core VM); above, it prints the price alone (farm.price.price), in about a second.
DRY_RUN_EXPAND_MAX = 400_000


class StopSignals:
    """Ctrl-C (SIGINT) and SIGTERM as one stop, exit status 130 whenever it comes.

    The first signal raises KeyboardInterrupt where the sweep is: it ends `interrupted`, its workers
    and the Ray it started are stopped. A later one, while that clean-up runs, is said and otherwise
    ignored: a second Ctrl-C 0.3 s after the first had interrupted the clean-up itself (exit 1, Ray's
    processes left running for 1-2 minutes). SIGTERM raises as Ctrl-C does (its default killed the
    command with status 15 and no word during Ray's start-up). While Ray starts (`deferred`), a signal
    is noted and the sweep stops once Ray is up: ray.init interrupted half-way left the head's agents
    running for good, and ray.init's own SIGTERM handler (sys.exit(15)) is kept out meanwhile; Ray's
    shutdown holds a signal likewise (farm.ray_connect.shutdown). SIGKILL stays the way to stop the
    command at once."""

    SIGNALS = STOP_SIGNALS  # the ones farm.ray_connect.shutdown holds

    def __init__(self) -> None:
        self.received = 0
        self.deferring = False  # Ray is starting: stop once it is up (`deferred`)
        self.previous: dict[int, object] = {}

    def __call__(self, signum: int, frame) -> None:
        self.received += 1
        if self.received == 1 and self.deferring:
            print("stopping once Ray has started (a few seconds)", file=sys.stderr, flush=True)
            return
        if self.received == 1:
            raise KeyboardInterrupt
        print(
            f"{signal.Signals(signum).name} again: already stopping (the workers and Ray are shut down, "
            "every finished point is saved); SIGKILL stops at once",
            file=sys.stderr,
            flush=True,
        )

    def installed(self):
        """A context: the handler set for SIGINT and SIGTERM, the previous ones back afterwards."""
        import contextlib

        @contextlib.contextmanager
        def scope():
            if threading.current_thread() is not threading.main_thread():
                yield  # only the main thread may set handlers; a caller's thread keeps Python's
                return
            self.previous = {sig: signal.signal(sig, self) for sig in self.SIGNALS}
            try:
                yield
            finally:
                if not self.received:  # once stopping, later signals stay ignored until the exit
                    for sig, handler in self.previous.items():
                        signal.signal(sig, handler)

        return scope()

    def deferred(self):
        """A context in which a signal is noted, not raised (the caller stops after it), and ray.init
        keeps this handler instead of setting its own SIGTERM handler (sys.exit(15) wherever it lands)."""
        import contextlib

        @contextlib.contextmanager
        def scope():
            self.deferring = True
            try:
                import ray._private.utils as ray_utils
            except ImportError:
                ray_utils = None
            original = getattr(ray_utils, "set_sigterm_handler", None)
            if original is not None:
                ray_utils.set_sigterm_handler = lambda handler: None
            try:
                yield
            finally:
                self.deferring = False
                if original is not None:
                    ray_utils.set_sigterm_handler = original

        return scope()


def workers_before_ray(address: str | None, workers: int | None) -> int | None:
    """How many workers the sweep will have, where it is known before Ray starts: --workers, else on a
    local Ray this host's GPUs (2 logical ones without a GPU: cluster.connect); None when it joins a
    cluster (its GPUs are known once Ray is up)."""
    from farm.ray_connect import local_head, nvml_gpu_count, plan_ray_init, visible_gpus

    if workers:
        return workers
    if plan_ray_init(address, os.environ.get("RAY_ADDRESS"), local_head()).joins:
        return None
    return visible_gpus(nvml_gpu_count(), os.environ.get("CUDA_VISIBLE_DEVICES")) or 2


def exit_status(result) -> int:
    """The sweep's exit status (EXIT_STATUSES) from how it ended and what it stored."""
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    unmeasured = sum(n for status, n in result.counts.items() if status not in MEASURED)
    return EXIT_UNMEASURED if unmeasured or result.status == "failed" else EXIT_OK


def print_plan(spec, points, pruned: Counter, seconds: float, memory_bytes: int) -> None:
    from farm.plan import point_bytes, split_too_large

    per_variant = Counter(p.variant for p in points)
    shapes = {p.shape for p in points}
    print(
        f"sweep {spec.name!r}: {len(points)} points over {len(shapes)} shapes x {len(spec.dtypes)} dtype(s)"
    )
    print_variant_table(spec.variants, per_variant, pruned, "7d")
    # Start-up measured on an H200 host (docs/results/startup_probe.csv, benchmarks/startup_probe.py):
    # from the command to a one-point sweep's record, 23.5 s starting a local Ray, 15.4 s joining a
    # running head, 3.5-4.3 s on workers a previous `--keep-workers` sweep left running.
    print(
        f"estimated GPU time: {seconds / 60:.1f} min on one H100-class GPU "
        f"({seconds / 60 / 8:.1f} min on 8), plus about 20 s of start-up "
        "(15 s joining a running Ray: `ray start --head`; 4 s on workers kept by --keep-workers)"
    )
    large = split_too_large(points, memory_bytes)[1]
    if large:
        worst = max(large, key=point_bytes)
        print(
            f"{len(large)} points cannot fit in an {memory_bytes / 1e9:.0f} GB GPU (the largest, "
            f"{worst.label()}, needs {point_bytes(worst) / 1e12:,.2f} TB): a sweep stores them as "
            "too_large without running them"
        )


def print_variant_table(variants, points, pruned, count_format: str) -> None:
    """`--dry-run`'s table: each variant's points to run and points its rules pruned, `count_format` the
    format of a count (thousands separated where a priced plan runs to millions)."""
    width = max(len("variant"), *(len(name) for name in variants))
    column = len(format(0, count_format))
    print(f"  {'variant':{width}s} {'points':>{column}s} {'pruned':>{column}s}")
    for name in variants:
        print(f"  {name:{width}s} {points[name]:{count_format}} {pruned[name]:{count_format}}")


def print_priced_plan(spec, plan) -> None:
    """`--dry-run` for a plan too large to list (DRY_RUN_EXPAND_MAX): its price from the axes."""
    print(
        f"sweep {spec.name!r}: about {plan.points:,} points over {plan.shapes:,} shapes x {len(spec.dtypes)} "
        "dtype(s) (estimated from a sample of shapes and configs; not expanded)"
    )
    print_variant_table(spec.variants, plan.per_variant, plan.pruned, "11,d")
    print(
        f"estimated GPU time: {plan.gpu_seconds / 60:,.0f} min on one H100-class GPU "
        f"({plan.gpu_seconds / 60 / 8:,.0f} min on 8); planning it takes about "
        f"{plan.plan_bytes / 1e9:,.1f} GB of memory"
    )


def print_search(strategy: str, budget: str, points, grid_seconds: float) -> None:
    """What a search of the plan measures: its budget of each shape's configs and every baseline; the
    time estimate scaled from the grid's by the share of points (compiles scale alike: one per point)."""
    from farm.search import parse_budget
    from farm.source import search_size

    searched = search_size(points, parse_budget(budget))
    share = searched / max(1, len(points))
    print(
        f"search {strategy!r} at {budget} of each shape's configs, cublas always: {searched} of "
        f"{len(points)} points ({share:.0%}), about {grid_seconds * share / 60:.1f} min on one H100-class GPU"
    )


def print_summary(result, db: str, code: int | None = None) -> None:
    code = exit_status(result) if code is None else code
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
    for line in unmeasured_lines(result.failures) + restart_lines(result.faults):
        print("  " + line)
    for f in result.faults:
        back = f"back after {f.recovery_s:.1f} s" if f.recovery_s is not None else "not back"
        print(f"  fault: worker {f.worker} {f.kind} on {f.point or 'a batch'}; {back}")
    if result.status == "interrupted":
        print("  interrupted: every finished point is saved; run the same command again to resume")
    print(f"exit status {code}: {EXIT_STATUSES[code]}")
    print(f"next: farm best --db {db}    |    farm dashboard --db {db}")


def restart_lines(faults) -> list[str]:
    """The worker processes restarted for the instrument (farm.faults.INSTRUMENT): it failed twice in a
    batch, which a fresh process then timed (an instrument that fails there too stores instrument_error)."""
    from farm.faults import INSTRUMENT

    restarts = [f for f in faults if f.kind == INSTRUMENT]
    if not restarts:
        return []
    processes = "worker process" if len(restarts) == 1 else "worker processes"
    first = restarts[0].detail.splitlines()[0][:200] if restarts[0].detail else ""
    return [
        f"{len(restarts)} {processes} restarted for the instrument, which failed twice in a batch "
        f"(its points timed again in the fresh process): {first}"
    ]


def unmeasured_lines(failures) -> list[str]:
    """What the summary says in words of points no kernel is to blame for: the instrument failed
    (farm.instrument), or physics forbade their time twice (db.physics). Both are measured again by
    --retry-failed."""
    lines = []
    for status, said in (
        ("instrument_error", "the instrument failed (profiler/CUPTI/NVML), not the kernels"),
        ("implausible", "times physics forbids, twice (db.physics); stored implausible"),
    ):
        rows = [r for r in failures if r.status == status]
        if rows:
            first = rows[0].error.splitlines()[0][:200] if rows[0].error else ""
            lines.append(f"{len(rows)} points: {said}: {first}; --retry-failed measures them again")
    return lines
