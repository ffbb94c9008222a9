"""Builders for hand-made rows, and the bodies of the worker processes the concurrency tests start.

Plain functions in an importable module (not conftest) so spawned processes can import them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path

import pytest

# The tests' short name for the one record builder; the environments they import from here.
from samples import A100, H200, INTERPRETER  # noqa: F401
from samples import record as rec
from sqlalchemy import Engine, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from db.engine import make_engine
from db.models import Measurement
from db.records import EnvironmentInfo, MeasurementRecord
from db.schema import ensure_current, head
from db.writes import environment_id, upsert_measurements

# The revision the package's migrations end at (tests that name it keep passing as revisions are added).
HEAD = head()


# A SQLite file migrated to head once a process, which `create` copies to a new file target (a
# migration is 0.2-0.3 s); its folder goes when the process exits.
_at_head: Path | None = None


def _sqlite_at_head() -> Path:
    global _at_head
    if _at_head is None:
        folder = tempfile.mkdtemp(prefix="farm-at-head-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        path = Path(folder) / "head.db"
        engine = make_engine(str(path))
        ensure_current(engine)
        engine.dispose()  # the last connection checkpoints the WAL into the file and removes it
        assert not path.with_name(path.name + "-wal").exists()
        _at_head = path
    return _at_head


def create(target: str) -> None:
    """A database at head at `target`: a new SQLite file is a copy of one migrated once a process;
    ensure_current then finds it (or any other target) at head, migrating what is not."""
    if "://" not in target and not Path(target).exists():
        shutil.copyfile(_sqlite_at_head(), target)
    engine = make_engine(target)
    ensure_current(engine)
    engine.dispose()


def store(
    engine: Engine,
    records: Sequence[MeasurementRecord],
    env: EnvironmentInfo = H200,
    sweep_id: int | None = None,
) -> int:
    """Write records in one transaction; returns the environment id."""
    with Session(engine) as session:
        env_id = environment_id(session, env)
        upsert_measurements(session, environment_id=env_id, sweep_id=sweep_id, records=records)
        session.commit()
    return env_id


def grid(n_rows: int, *, offset: int = 0, code_version: str = "c0ffee") -> list[MeasurementRecord]:
    """n_rows distinct points over ragged shapes and a config grid (index i -> a fixed point)."""
    out = []
    for i in range(offset, offset + n_rows):
        shape = (64 + 17 * (i % 97), 128 + 31 * (i // 97 % 89), 16 * (1 + i // 8633))
        out.append(
            rec(
                ("grouped", "splitk", "tiled")[i % 3],
                shape,
                group_m=(1, 8)[i // 3 % 2],
                split_k=(1, 4)[i // 6 % 2] if i % 3 == 1 else 1,
                ms=0.1 + (i % 1000) / 1000,
                code_version=code_version,
            )
        )
    return out


# ---- checks shared by the test modules ----


def run_together(n: int, fn: Callable[[], object]) -> tuple[list, list[Exception]]:
    """Run fn in n threads released at the same moment; (results, exceptions)."""
    barrier, results, errors = threading.Barrier(n), [], []

    def run() -> None:
        try:
            barrier.wait(30)
            results.append(fn())
        except Exception as exc:  # returned to the test
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results, errors


NOT_A_DB = b"gpu,ms\nH200,0.5\n" * 20


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes: 'nothing created or damaged' means this does not change."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """A file or folder nobody may write, root included (root ignores mode bits, not chattr +i)."""
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            pytest.skip("running as root on a file system without chattr +i: nothing is read-only to root")
        undo = ["chattr", "-i", str(path)]
    else:
        mode = path.stat().st_mode & 0o777
        path.chmod(0o555 if path.is_dir() else 0o444)
        undo = ["chmod", oct(mode)[2:], str(path)]
    try:
        yield path
    finally:
        subprocess.run(undo, check=True)


def snapshot(engine: Engine) -> list[tuple]:
    """Every measurement column but updated_at (the write time), in id order."""
    cols = [c for c in Measurement.__table__.c if c.name != "updated_at"]
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(*cols).order_by(Measurement.id))]


def count(engine: Engine, table: str = "measurements") -> int:
    with engine.connect() as conn:
        return conn.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one()


# ---- worker process bodies (tests/db/test_concurrency.py) ----


def _is_locked(exc: Exception) -> bool:
    return "locked" in str(exc).lower() or "busy" in str(exc).lower()


def _worker(kind: str, target: str, readonly: bool, start, queue, units: Iterable[Callable]) -> None:
    """After `start`, run each unit on one engine, counting "database is locked" failures.

    Reports (kind, n_units_done, n_locked, error, sorted values the units returned).
    """
    done, locked, error, seen = 0, 0, "", set()
    engine = make_engine(target, readonly=readonly)
    try:
        start.wait(60)
        for unit in units:
            try:
                seen.add(unit(engine))
                done += 1
            except OperationalError as exc:
                if not _is_locked(exc):
                    raise
                locked += 1
    except Exception as exc:
        error = repr(exc)
    finally:
        engine.dispose()
    queue.put((kind, done, locked, error, tuple(sorted(v for v in seen if v is not None))))


def _write_batch(offset: int, batch: int, engine: Engine) -> None:
    store(engine, grid(batch, offset=offset))


def write_in_batches(target: str, n_rows: int, batch: int, start, queue) -> None:
    """Write n_rows points in transactions of `batch` rows."""
    units = (partial(_write_batch, offset, batch) for offset in range(0, n_rows, batch))
    _worker("writer", target, False, start, queue, units)


# What the dashboard asks while a sweep writes (db.queries, filtered by GPU and dtype).
DASHBOARD_QUERIES = (
    "SELECT COUNT(*) FROM results WHERE gpu_name = 'NVIDIA H200' AND dtype = 'bfloat16'",
    "SELECT * FROM best_configs WHERE gpu_name = 'NVIDIA H200' AND dtype = 'bfloat16'",
    "SELECT * FROM splitk_speedup WHERE gpu_name = 'NVIDIA H200' AND dtype = 'bfloat16'",
    "SELECT * FROM grouping_effect WHERE gpu_name = 'NVIDIA H200' AND dtype = 'bfloat16'",
    "SELECT * FROM vs_cublas WHERE gpu_name = 'NVIDIA H200' AND dtype = 'bfloat16'",
)


def _query(sql: str, engine: Engine) -> int | None:
    """Run one dashboard query; the row count it saw for the COUNT query (readers see whole batches only)."""
    with engine.connect() as conn:
        rows = conn.execute(text(sql)).all()
    return rows[0][0] if sql.startswith("SELECT COUNT") else None


def read_views_until(target: str, start, stop, queue) -> None:
    """Query every view, round after round, until `stop`."""

    def units() -> Iterator[Callable]:
        while not stop.is_set():
            yield from (partial(_query, sql) for sql in DASHBOARD_QUERIES)

    _worker("reader", target, True, start, queue, units())


def write_then_hang(target: str, n_rows: int, inside) -> None:
    """Upsert a batch, flush it to the database file, signal `inside` before the commit, wait to be killed."""
    engine = make_engine(target)
    with Session(engine) as session:
        env_id = environment_id(session, H200)
        upsert_measurements(session, environment_id=env_id, sweep_id=None, records=grid(n_rows))
        session.flush()
        inside.set()
        time.sleep(600)
        session.commit()


def write_batches_forever(target: str, batch: int, started) -> None:
    """Commit batch after batch (batch i holds grid points i*batch ...) until killed."""
    engine = make_engine(target)
    started.set()
    for i in range(10**6):
        store(engine, grid(batch, offset=i * batch))
