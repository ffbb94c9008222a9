"""`farm` subcommands for the results database: schema revisions, summary, best configs, exports.

Read commands open the database read-only and never create it. Problems a user can fix raise
DatabaseError; farm/cli.py prints "error: ..." and exits 2. Output files are written to a temporary
file next to the target and renamed at the end, so a failed export leaves no partial file.
"""

from __future__ import annotations

import argparse
import json
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from db import queries, schema
from db.engine import describe, make_engine
from db.errors import DatabaseError
from db.views import VIEW_NAMES

BEST_FORMAT = "triton-matmul-farm/best-configs"
BEST_VERSION = 1
CONFIG_FIELDS = ("block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages")
EXPORT_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
BEST_TABLE = ("gpu_name", "dtype", "m", "n", "k", "variant", "ms", "tflops", *CONFIG_FIELDS)


def register(
    subparsers: argparse._SubParsersAction, add_db_argument: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Add `db upgrade|downgrade|current`, `summary`, `best`, `export`, `export-best` to the farm CLI."""

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
    p.add_argument("revision", help="target revision, e.g. 0001, -1, or base (drops everything)")
    p.add_argument(
        "--delete-data", action="store_true", help="allow a downgrade that drops stored measurements"
    )
    command(actions, "current", cmd_current, "print the database's schema revision and the code's")

    command(
        subparsers,
        "summary",
        cmd_summary,
        "counts of measurements by status, backend and GPU; the last sweep",
    )

    p = command(subparsers, "best", cmd_best, "the fastest ok config per GPU, dtype, shape and variant")
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
        subparsers, "export-best", cmd_export_best, "write the best configs as JSON for the kernel launchers"
    )
    p.add_argument("--out", required=True, type=Path, help="output file (.json)")
    p.add_argument("--gpu", help="only this GPU")
    p.add_argument("--dtype", help="only this dtype")
    p.add_argument(
        "--include-interpreter", action="store_true", help="keep rows measured by the Triton interpreter"
    )


def parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(
            f"shape {text!r} is not MxNxK with positive integers (e.g. 4096x4096x512)"
        )
    m, n, k = (int(p) for p in parts)
    return m, n, k


# ---- helpers ----


@contextmanager
def reading(target: str) -> Iterator[Connection]:
    """A read-only connection to a farm results database at head (DatabaseError otherwise)."""
    engine = schema.open_engine(target, readonly=True)
    try:
        with engine.connect() as conn:
            yield conn
    except DBAPIError as exc:  # e.g. the server went away mid-query
        raise DatabaseError(f"{describe(engine)}: {str(exc.orig).strip()}") from exc
    finally:
        engine.dispose()


@contextmanager
def atomic_output(out: Path) -> Iterator[Path]:
    """A temporary path next to `out`, renamed to `out` if the block succeeds, deleted if not."""
    out = out.expanduser()
    if not out.parent.is_dir():
        raise DatabaseError(f"cannot write {out}: folder {out.parent} does not exist")
    # Not mkstemp: its 0600 mode would stick to the export; open(..., "x") honours the umask.
    tmp = out.parent / f".{out.name}.{uuid.uuid4().hex[:8]}.part"
    try:
        tmp.open("xb").close()
    except OSError as exc:
        raise DatabaseError(f"cannot write {out}: {exc.strerror}") from exc
    try:
        yield tmp
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


# ---- schema ----


def cmd_upgrade(args: argparse.Namespace) -> int:
    engine = make_engine(args.db)
    try:
        before = schema.current(engine)
        schema.upgrade(engine, args.revision)
        after = schema.current(engine)
    finally:
        engine.dispose()
    if before == after:
        print(f"{args.db}: already at revision {after}")
    else:
        print(f"{args.db}: upgraded from {before or 'empty'} to {after}")
    return 0


def cmd_downgrade(args: argparse.Namespace) -> int:
    engine = make_engine(args.db)
    try:
        before = schema.current(engine)
        if before is None:
            raise DatabaseError(f"{args.db} has no schema to downgrade")
        schema.downgrade(engine, args.revision, delete_data=args.delete_data)
        after = schema.current(engine)
    finally:
        engine.dispose()
    print(f"{args.db}: downgraded from {before} to {after or 'empty (base)'}")
    return 0


def cmd_current(args: argparse.Namespace) -> int:
    engine = make_engine(args.db, readonly=True)
    try:
        rev = schema.current(engine)
    finally:
        engine.dispose()
    expected = schema.head()
    if rev == expected:
        print(f"{args.db}: revision {rev} (current)")
    elif rev is None:
        print(f"{args.db}: no schema (empty); create it with `farm db upgrade --db {args.db}`")
    else:
        print(f"{args.db}: revision {rev}; this code expects {expected} (`farm db upgrade --db {args.db}`)")
    return 0


# ---- queries ----


def cmd_summary(args: argparse.Namespace) -> int:
    with reading(args.db) as conn:
        s = queries.summary(conn)

    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v:,}" for k, v in d.items()) or "-"

    n, envs, sweeps = s["measurements"], s["environments"], s["sweeps"]
    print(f"{args.db}: {n:,} measurements, {envs} environments, {sweeps} sweeps")
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
        )
    if df.empty:
        print("no ok measurement matches")
        return 0
    table = df[list(BEST_TABLE)].copy()
    table["ms"] = table["ms"].map("{:.4f}".format)
    table["tflops"] = table["tflops"].map(lambda x: "-" if pd.isna(x) else f"{x:.1f}")
    print(table.to_string(index=False))
    return 0


def export_format(out: Path, fmt: str | None) -> str:
    if fmt:
        return fmt
    found = EXPORT_FORMATS.get(out.suffix.lower())
    if found is None:
        raise DatabaseError(
            f"cannot tell the format of {out} from its extension; pass --format csv or --format parquet"
        )
    return found


def cmd_export(args: argparse.Namespace) -> int:
    queries.view(args.view)  # an unknown view is an error before anything is opened
    fmt = export_format(args.out, args.format)
    with reading(args.db) as conn, atomic_output(args.out) as tmp:
        chunks = queries.iter_view(conn, args.view)
        n = write_csv(tmp, chunks) if fmt == "csv" else write_parquet(tmp, chunks)
    print(f"wrote {n:,} rows of {args.view} to {args.out}")
    return 0


def write_csv(path: Path, chunks: Iterator[pd.DataFrame]) -> int:
    n = 0
    with path.open("w", newline="") as f:
        for i, df in enumerate(chunks):
            df.to_csv(f, header=i == 0, index=False)
            n += len(df)
    return n


def write_parquet(path: Path, chunks: Iterator[pd.DataFrame]) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise DatabaseError(
            "Parquet export needs pyarrow: pip install 'triton-matmul-farm[parquet]'"
        ) from exc
    n, writer = 0, None
    try:
        for df in chunks:
            table = pa.Table.from_pandas(df, preserve_index=False)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table.cast(writer.schema))
            n += len(df)
    finally:
        if writer is not None:
            writer.close()
    return n


def best_entries(df: pd.DataFrame, *, include_interpreter: bool) -> list[dict[str, Any]]:
    """Rows of best_configs as entries of the best-configs JSON (the kernels package reads them)."""
    if not include_interpreter:
        df = df[df.backend != "interpreter"]
    return [
        {
            "gpu_name": row.gpu_name,
            "dtype": row.dtype,
            "m": int(row.m),
            "n": int(row.n),
            "k": int(row.k),
            "variant": row.variant,
            "ms": float(row.ms),
            "tflops": None if pd.isna(row.tflops) else float(row.tflops),
            "config": {
                **{f: int(getattr(row, f)) for f in CONFIG_FIELDS},
                "input_precision": row.input_precision,
            },
        }
        for row in df.itertuples(index=False)
    ]


def cmd_export_best(args: argparse.Namespace) -> int:
    with reading(args.db) as conn:
        df = queries.best_configs(conn, gpu_name=args.gpu, dtype=args.dtype)
    entries = best_entries(df, include_interpreter=args.include_interpreter)
    doc = {"format": BEST_FORMAT, "version": BEST_VERSION, "entries": entries}
    with atomic_output(args.out) as tmp:
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {len(entries):,} best configs to {args.out}")
    return 0
