"""Real processes on a real SQLite file: a writer with readers never sees "database is locked";
a writer killed with SIGKILL inside a transaction leaves a sound database and no partial batch.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import sqlite3
import time

import dbkit
import pytest
from dbkit import create, grid, store

from db import writes
from db.engine import make_engine
from db.schema import ensure_current

# spawn, not fork: each process opens its own engine from scratch, as the farm's processes do.
CTX = mp.get_context("spawn")


@pytest.fixture
def db_file(sqlite_target: str) -> str:
    create(sqlite_target)
    return sqlite_target


def integrity(path: str) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def rows_in(path: str) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]


def test_writer_and_two_readers_never_locked(db_file: str) -> None:
    """10,000 rows in 100 transactions while two processes query every view: no "database is locked"."""
    queue, start, stop = CTX.Queue(), CTX.Event(), CTX.Event()
    readers = [
        CTX.Process(target=dbkit.read_views_until, args=(db_file, start, stop, queue)) for _ in range(2)
    ]
    writer = CTX.Process(target=dbkit.write_in_batches, args=(db_file, 10_000, 100, start, queue))
    for p in (*readers, writer):
        p.start()
    time.sleep(0.5)
    start.set()
    writer.join(120)
    time.sleep(0.3)  # readers see the last batch
    stop.set()
    reports = [queue.get(timeout=60) for _ in range(3)]
    for p in readers:
        p.join(30)
    by_kind = {kind: [r for r in reports if r[0] == kind] for kind in ("writer", "reader")}
    assert [r[3] for r in reports] == ["", "", ""], reports  # no other error either
    assert [r[2] for r in reports] == [0, 0, 0], reports  # zero "database is locked"
    assert by_kind["writer"][0][1] == 100 and rows_in(db_file) == 10_000  # 100 batches of 100
    for _, n_queries, _, _, seen in by_kind["reader"]:
        assert n_queries >= 10  # they really ran alongside the writer
        assert all(c % 100 == 0 for c in seen) and len(seen) >= 2  # whole batches only, while it grew


def test_sigkill_inside_a_transaction(db_file: str) -> None:
    inside = CTX.Event()
    writer = CTX.Process(target=dbkit.write_then_hang, args=(db_file, 2_000, inside))
    writer.start()
    assert inside.wait(60), "writer never reached its transaction"
    os.kill(writer.pid, signal.SIGKILL)
    writer.join(10)
    assert writer.exitcode == -signal.SIGKILL
    assert integrity(db_file) == "ok"
    assert rows_in(db_file) == 0  # nothing of the uncommitted batch, not even its environment row
    engine = make_engine(db_file)
    ensure_current(engine, create=False)
    for _ in range(2):  # rerunning writes the batch once
        store(engine, grid(2_000))
        assert rows_in(db_file) == 2_000
    engine.dispose()


def test_sigkill_at_random_moments(db_file: str) -> None:
    """Kill a writer that commits 500-row batches back to back, three times: whole batches survive."""
    rng = random.Random(7)
    batch = 500
    for _ in range(3):
        started = CTX.Event()
        writer = CTX.Process(target=dbkit.write_batches_forever, args=(db_file, batch, started))
        writer.start()
        assert started.wait(60)
        time.sleep(rng.uniform(0.2, 1.5))
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(10)
        assert integrity(db_file) == "ok"
        n = rows_in(db_file)
        assert n % batch == 0
        engine = make_engine(db_file, readonly=True)
        with engine.connect() as conn:
            assert writes.done_keys(conn, [1]) == {r.key for r in grid(n)}  # exactly the first n/500 batches
        engine.dispose()
    engine = make_engine(db_file)  # rerun: every batch again, plus one more
    for i in range(n // batch + 1):
        store(engine, grid(batch, offset=i * batch))
    engine.dispose()
    assert rows_in(db_file) == n + batch and integrity(db_file) == "ok"
