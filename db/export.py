"""Data out of the results database: a read-only connection, and files written whole or not at all.

Problems a user can fix raise DatabaseError (the CLI prints "error: ..." and exits 2). Output files
are written to a temporary file next to the target and renamed at the end, so a failed export
leaves no partial file; a write that fails part-way (a full disk) raises OutputFailed, one line that
the CLI prints with exit status 3, as a sweep whose database write failed.

An output file is never a database: not one the command reads (the same path, a symlink to it, a
hard link of it) and not any other farm results database. `farm export results --out results.db`
exited 0 having replaced the results database with a CSV file; now it is refused before anything is
opened, and the database stays byte for byte as it was.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from db import schema
from db.engine import describe, display_target, is_farm_database, same_file, sqlite_file
from db.errors import DatabaseError

EXPORT_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
# The OS's words for a full disk: no space left, or the user's quota spent.
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


class OutputFailed(Exception):
    """Writing an output file failed part-way (a full disk, an I/O error): nothing was left at the
    output path, which is as it was. The message is one line naming the file, the OS's reason and
    the free space there."""


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


def check_output(out: Path, reads: Sequence[str] = ()) -> None:
    """Refuse (DatabaseError) an output path that is one of the databases `reads` names (path, symlink
    or hard link) or any farm results database: writing there would replace the database."""
    out = Path(out).expanduser()
    for target in reads:
        source = sqlite_file(target)
        if source is not None and same_file(out, source):
            raise DatabaseError(
                f"refusing to write {out}: it is the database this command reads ({display_target(target)}); "
                "give another --out path (nothing was written)"
            )
    if out.exists() and is_farm_database(out):
        raise DatabaseError(
            f"refusing to write {out}: it is a farm results database; give another --out path (nothing was "
            "written)"
        )


@contextmanager
def atomic_output(out: Path, reads: Sequence[str] = ()) -> Iterator[Path]:
    """A temporary path next to `out`, renamed to `out` if the block succeeds, deleted if not.
    `out` is checked first (`check_output`) against the databases the command reads, `reads`."""
    out = out.expanduser()
    check_output(out, reads)
    if not out.parent.is_dir():
        raise DatabaseError(f"cannot write {out}: folder {out.parent} does not exist")
    # Not mkstemp: its 0600 mode would stick to the export; open(..., "x") honours the umask.
    tmp = out.parent / f".{out.name}.{uuid.uuid4().hex[:8]}.part"
    try:
        tmp.open("xb").close()
    except OSError as exc:
        if exc.errno in _FULL:
            raise _output_failed(out, exc) from None
        raise DatabaseError(f"cannot write {out}: {exc.strerror}") from exc
    try:
        yield tmp
        os.replace(tmp, out)
    except OSError as exc:  # a write of the block's (pandas', pyarrow's) or the rename
        raise _output_failed(out, exc) from None
    finally:
        tmp.unlink(missing_ok=True)


def _output_failed(out: Path, exc: OSError) -> OutputFailed:
    text = str(exc).strip()
    reason = exc.strerror or (text.splitlines()[0] if text else type(exc).__name__)
    try:
        free = f" ({_size(shutil.disk_usage(out.parent).free)} free in {out.parent})"
    except OSError:
        free = ""
    return OutputFailed(
        f"cannot write {out}: {reason}{free}; it is left as it was (no partial file). Free space (or give "
        "another --out), then run the same command again"
    )


def _size(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n / 2**10:,.0f} KiB"


def export_format(out: Path, fmt: str | None) -> str:
    if fmt:
        return fmt
    found = EXPORT_FORMATS.get(out.suffix.lower())
    if found is None:
        raise DatabaseError(
            f"cannot tell the format of {out} from its extension; pass --format csv or --format parquet"
        )
    return found


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
