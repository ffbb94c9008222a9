"""`farm` subcommands for the results database: schema revisions, summary, best configs, exports.

Read commands open the database read-only and never create it. Problems a user can fix raise
DatabaseError; cli/__init__.py prints "error: ..." and exits 2. The data work lives in db
(db/queries.py, db/export.py); the best-configs file format in kernels/tuned.py.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from db import check, queries, schema
from db.engine import display_target, make_engine
from db.errors import DatabaseError
from db.export import (
    OutputFailed,
    atomic_output,
    check_output,
    export_format,
    reading,
    write_csv,
    write_parquet,
)
from db.merge import merge
from db.views import VIEW_NAMES
from kernels.tuned import TunedConfigs, TunedEntry, stored_config

# What `farm best` prints (a display choice; the export writes every config field).
BEST_TABLE = (
    "gpu_name",
    "dtype",
    "m",
    "n",
    "k",
    "variant",
    "ms",
    "eager_ms",
    "tflops",
    "block_m",
    "block_n",
    "block_k",
    "group_m",
    "split_k",
    "num_warps",
    "num_stages",
)


# The line above `farm best`'s table: which objective "best" means there.
OBJECTIVE_HEADERS = {
    "kernel": "best by kernel time (ms); eager_ms: what an eager caller waits for per call",
    "eager": "best by eager time (eager_ms: what an eager caller waits for per call); ms: kernel time",
}


def register(
    subparsers: argparse._SubParsersAction, add_db_argument: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Add `db upgrade|downgrade|current|check|merge`, `summary`, `best`, `export`, `export-best`."""

    def command(parent, name: str, handler: Callable[[argparse.Namespace], int], help: str):
        p = parent.add_parser(name, help=help, description=help)
        add_db_argument(p)
        p.set_defaults(handler=handler)
        return p

    db = subparsers.add_parser("db", help="schema revisions of the results database")
    actions = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    p = command(
        actions, "upgrade", cmd_upgrade, "create the database, or bring it to the code's schema revision"
    )
    p.add_argument("--revision", default="head", help="target revision (default: head)")
    p = command(actions, "downgrade", cmd_downgrade, "take the schema back to an older revision")
    # --revision, as `db upgrade` takes it; the bare argument of earlier versions still works.
    p.add_argument(
        "--revision",
        dest="revision_option",
        metavar="REVISION",
        help="target revision, e.g. 0001, -1, or base (drops everything)",
    )
    p.add_argument("revision", nargs="?", help=argparse.SUPPRESS)
    p.add_argument(
        "--delete-data", action="store_true", help="allow a downgrade that drops stored measurements"
    )
    command(actions, "current", cmd_current, "print the database's schema revision and the code's")
    p = command(
        actions,
        "check",
        cmd_check,
        "list the ok rows whose time physics forbids or whose columns disagree (exit 1 if any); read-only, "
        "at any schema revision",
    )
    p.add_argument(
        "--mark",
        action="store_true",
        help="store those rows as `implausible` (their times kept, never read as times), upgrading the "
        "database to this code's revision first",
    )
    p = actions.add_parser(
        "merge",
        help="bring the sweeps and measurements of other databases into one (idempotent; every run kept)",
        description="Bring the sweeps, environments and measurements of other results databases "
        "(SQLite paths or URLs) into one. Merging twice adds nothing. Every run of a point is kept: "
        "two databases that measured a point in their own sweeps give it two runs, the newer one its "
        "latest (what the views show); a run both hold keeps its newer row.",
    )
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="databases to read (SQLite path or URL)")
    p.add_argument("--into", required=True, metavar="TARGET", help="the database to merge into")
    p.set_defaults(handler=cmd_merge)

    command(
        subparsers,
        "summary",
        cmd_summary,
        "counts of measurements by status, backend and GPU; the last sweep",
    )

    p = command(
        subparsers,
        "best",
        cmd_best,
        "the best ok config per GPU, dtype, shape and variant, by kernel time or by eager time",
    )
    p.add_argument(
        "--objective",
        choices=queries.OBJECTIVES,
        default="kernel",
        help="kernel: least kernel time (ms, the default); eager: least eager_ms, what an eager caller "
        "waits for per call (the longer of the stream and the launcher's host time)",
    )
    p.add_argument("--gpu", help="GPU name, as in `farm summary`")
    p.add_argument("--dtype", help="float16 | bfloat16 | float32")
    p.add_argument("--variant")
    p.add_argument("--shape", type=parse_shape, metavar="MxNxK")
    p.add_argument("--limit", type=int, help="print at most this many rows")

    p = command(subparsers, "export", cmd_export, "write a view to CSV or Parquet")
    p.add_argument("view", metavar="VIEW", help=f"one of: {', '.join(VIEW_NAMES)}")
    p.add_argument("--out", required=True, type=Path, help="output file (.csv, .parquet)")
    p.add_argument("--format", choices=("csv", "parquet"), help="default: from the file's extension")

    p = command(
        subparsers,
        "export-best",
        cmd_export_best,
        "write the best configs as JSON for kernels.matmul: each variant's best by kernel time and by "
        "eager time, each entry with both times",
    )
    p.add_argument("--out", required=True, type=Path, help="output file (.json)")
    p.add_argument("--gpu", help="only this GPU")
    p.add_argument("--dtype", help="only this dtype")
    p.add_argument(
        "--include-interpreter", action="store_true", help="keep rows measured by the Triton interpreter"
    )


def shown(args: argparse.Namespace) -> str:
    """The --db target as messages may show it: a URL's password masked."""
    return display_target(args.db)


def cmd_merge(args: argparse.Namespace) -> int:
    print(merge(args.sources, args.into))
    return 0


def parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(
            f"shape {text!r} is not MxNxK with positive integers (e.g. 4096x4096x512)"
        )
    m, n, k = (int(p) for p in parts)
    return m, n, k


def cmd_upgrade(args: argparse.Namespace) -> int:
    engine = make_engine(args.db)
    try:
        before = schema.current(engine)
        schema.upgrade(engine, args.revision)
        after = schema.current(engine)
    finally:
        engine.dispose()
    if before == after:
        print(f"{shown(args)}: already at revision {after}")
    else:
        print(f"{shown(args)}: upgraded from {before or 'empty'} to {after}")
    return 0


def cmd_downgrade(args: argparse.Namespace) -> int:
    revision = downgrade_revision(args.revision_option, args.revision)
    engine = make_engine(args.db)
    try:
        before = schema.current(engine)
        if before is None:
            raise DatabaseError(f"{shown(args)} has no schema to downgrade")
        schema.downgrade(engine, revision, delete_data=args.delete_data)
        after = schema.current(engine)
    finally:
        engine.dispose()
    print(f"{shown(args)}: downgraded from {before} to {after or 'empty (base)'}")
    return 0


def downgrade_revision(option: str | None, positional: str | None) -> str:
    """`db downgrade`'s target: --revision X, or the bare X of earlier versions; one of them, once."""
    if option and positional and option != positional:
        raise DatabaseError(f"two target revisions: --revision {option} and {positional}; give one")
    if not (option or positional):
        raise DatabaseError("give the target revision: `farm db downgrade --revision 0005` (or -1, or base)")
    return option or positional


def cmd_current(args: argparse.Namespace) -> int:
    engine = make_engine(args.db, readonly=True)
    try:
        rev = schema.current(engine)
    finally:
        engine.dispose()
    expected = schema.head()
    if rev == expected:
        print(f"{shown(args)}: revision {rev} (current)")
    elif rev is None:
        print(f"{shown(args)}: no schema (empty); create it with `farm db upgrade --db {shown(args)}`")
    elif not schema.known(rev):  # an upgrade would refuse it: say what does work
        print(
            f"{shown(args)}: revision {rev}, newer than this code knows (it expects {expected}): written by "
            "a newer version of triton-matmul-farm; use that version or later (upgrading this package, not "
            "the database)"
        )
    else:
        target = shown(args)
        print(f"{target}: revision {rev}; this code expects {expected} (`farm db upgrade --db {target}`)")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """`farm db check`: the failing rows as a table and a verdict; exit 1 while any is stored ok."""
    report = check.read(args.db)
    where = f"{shown(args)} (revision {report.revision})"
    if not report.findings:
        print(f"{where}: all {report.n_ok:,} ok rows pass the physics and consistency checks")
        return 0
    print(check_table(report.findings))
    said = f"{where}: {len(report.findings):,} of {report.n_ok:,} ok rows are impossible or inconsistent"
    if not args.mark:
        print(f"{said}; `farm db check --db {shown(args)} --mark` stores them as implausible")
        return 1
    before, after, marked = check.mark_target(args.db)
    upgraded = f", upgraded from {before} to {after}" if before != after else ""
    left = check.read(args.db).findings
    print(f"{said}: marked {marked:,} implausible{upgraded}; {len(left):,} left")
    return 1 if left else 0


def check_table(findings: list[check.Finding]) -> str:
    """One line per failing row: where it is, its times in us (numbers right-aligned), and why."""
    header = ("id", "sweep", "variant", "shape", "config", "us", "stream_us", "reason")
    rows = [
        (
            str(f.id),
            "-" if f.sweep_id is None else str(f.sweep_id),
            *(f.variant, f.shape, f.config_key, _us(f.ms), _us(f.stream_ms), f.reason),
        )
        for f in findings
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    numbers = {"id", "sweep", "us", "stream_us"}
    lines = []
    for r in (header, *rows):
        cells = (c.rjust(w) if name in numbers else c.ljust(w) for name, c, w in zip(header, r, widths))
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:.4g}"


def cmd_summary(args: argparse.Namespace) -> int:
    with reading(args.db) as conn:
        s = queries.summary(conn)

    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v:,}" for k, v in d.items()) or "-"

    n, envs, sweeps = s["measurements"], s["environments"], s["sweeps"]
    kept = s["rows_all_runs"]
    runs = f" (each point's newest run; {kept:,} kept over all runs)" if kept > n else ""
    print(f"{shown(args)}: {n:,} measurements{runs}, {envs} environments, {sweeps} sweeps")
    print(f"  by status:  {counts(s['by_status'])}")
    print(f"  by backend: {counts(s['by_backend'])}")
    print(f"  by GPU:     {counts(s['by_gpu'])}")
    last = s["last_sweep"]
    if last:
        started = f"{last['started_at']:%Y-%m-%d %H:%M} UTC"
        points = f"{last['n_points']:,} points ({last['n_ok']:,} ok, {last['n_failed']:,} failed)"
        print(f"  last sweep: #{last['id']} {last['name']!r} {last['status']}, started {started}, {points}")
    return 0


def cmd_best(args: argparse.Namespace) -> int:
    with reading(args.db) as conn:
        df = queries.best_configs(
            conn,
            gpu_name=args.gpu,
            dtype=args.dtype,
            variant=args.variant,
            shape=args.shape,
            limit=args.limit,
            objective=args.objective,
        )
    if df.empty:
        print("no ok measurement matches")
        return 0
    print(OBJECTIVE_HEADERS[args.objective])
    table = df[list(BEST_TABLE)].copy()
    for column in ("ms", "eager_ms"):
        table[column] = table[column].map(lambda x: "-" if pd.isna(x) else f"{x:.4f}")
    table["tflops"] = table["tflops"].map(lambda x: "-" if pd.isna(x) else f"{x:.1f}")
    print(table.to_string(index=False))
    return 0


# An output file that could not be written whole (a full disk): `farm sweep`'s status for a failed write.
EXIT_WRITE_FAILED = 3


def output_failed_exits_3(handler: Callable[[argparse.Namespace], int]):
    """An export whose file could not be written (db.export.OutputFailed): its one line, exit status 3."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except OutputFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_WRITE_FAILED

    return run


@output_failed_exits_3
def cmd_export(args: argparse.Namespace) -> int:
    queries.view(args.view)  # an unknown view is an error before anything is opened
    check_output(args.out, [args.db])  # never onto a database: refused before it is opened
    fmt = export_format(args.out, args.format)
    with reading(args.db) as conn, atomic_output(args.out, [args.db]) as tmp:
        chunks = queries.iter_view(conn, args.view)
        n = write_csv(tmp, chunks) if fmt == "csv" else write_parquet(tmp, chunks)
    print(f"wrote {n:,} rows of {args.view} to {args.out}")
    return 0


def best_entries(df: pd.DataFrame, *, include_interpreter: bool) -> list[TunedEntry]:
    """Rows of best_configs as entries of the best-configs file (kernels/tuned.py owns its format)."""
    if not include_interpreter:
        df = df[df.backend != "interpreter"]
    return [
        TunedEntry(
            row["gpu_name"],
            row["dtype"],
            int(row["m"]),
            int(row["n"]),
            int(row["k"]),
            row["variant"],
            float(row["ms"]),
            stored_config(row, row["config_key"]),
            None if pd.isna(row["tflops"]) else float(row["tflops"]),
            None if pd.isna(row["host_ms"]) else float(row["host_ms"]),
            eager_ms=None if pd.isna(row["eager_ms"]) else float(row["eager_ms"]),
        )
        for row in df.to_dict("records")
    ]


@output_failed_exits_3
def cmd_export_best(args: argparse.Namespace) -> int:
    """Each variant's best row per shape by kernel time and, where another, by eager time: the dispatcher
    ranks them by either objective (kernels.dispatch), so it needs both rows. One row per variant and
    objective, from each config's newest ok run (db.queries.export_best)."""
    check_output(args.out, [args.db])  # never onto a database: refused before it is opened
    with reading(args.db) as conn:
        bests = [
            queries.export_best(conn, gpu_name=args.gpu, dtype=args.dtype, objective=objective)
            for objective in queries.OBJECTIVES
        ]
    df = pd.concat([b for b in bests if not b.empty] or bests[:1]).drop_duplicates("id")
    entries = best_entries(df, include_interpreter=args.include_interpreter)
    with atomic_output(args.out, [args.db]) as tmp:
        tmp.write_text(TunedConfigs(entries).dumps())
    print(f"wrote {len(entries):,} best configs to {args.out}")
    left_out = 0 if args.include_interpreter else int((df.backend == "interpreter").sum()) if len(df) else 0
    if left_out:
        print(
            f"left out {left_out:,} best configs measured by Triton's interpreter (CPU times, not a GPU's): "
            "--include-interpreter keeps them"
        )
    return 0
