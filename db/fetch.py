"""Rows straight from the DBAPI cursor: what both the read side (db.queries) and the writer's resume
query (db.writes.done_keys) fetch many rows with.

Plain tuples, no pandas: building SQLAlchemy Row objects doubled the fetch of 450k rows (0.9 s -> 2.2 s
on a 2-core machine; docs/results/db_views.md).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, Select, event
from sqlalchemy.engine.cursor import CursorFetchStrategy

# The execution option that asks PostgreSQL for results in binary format: psycopg then reads numbers
# and timestamps without parsing text (best_configs' 8,293 rows x 57 columns at 1M rows: 0.23 -> 0.13 s
# of fetching). SQLite ignores it.
_BINARY = "farm_binary_results"


@event.listens_for(Engine, "before_cursor_execute")
def _binary_results(conn, cursor, statement, parameters, context, executemany) -> None:
    if context is not None and context.execution_options.get(_BINARY) and conn.dialect.driver == "psycopg":
        from psycopg.pq import Format  # only with PostgreSQL: psycopg is an optional dependency

        cursor.format = Format.BINARY


@contextmanager
def without_gc() -> Iterator[None]:
    """Python's cyclic collector paused while a result's rows and columns are built: every 700 new tuples
    start a collection, and the older generations' passes walk every live object (grouping_effect and
    best_configs at 10M, 69k rows: 0.73-0.80 s median with it, 0.58-0.63 s without)."""
    if not gc.isenabled():  # paused by the caller or another thread: theirs to restart
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def fetch(conn: Connection, stmt: Select) -> tuple[list[str], list[tuple]]:
    """Column names and rows as the driver's plain tuples.

    Read straight from the DBAPI cursor. No value needs a result processor here: db.queries' normalize()
    converts the types of a frame.
    """
    result = conn.execute(stmt, execution_options={_BINARY: True})
    try:
        keys = list(result.keys())
        with without_gc():
            # Only an unbuffered result leaves every row to the cursor (stream_results prefetches some).
            if type(getattr(result, "cursor_strategy", None)) is CursorFetchStrategy:
                rows = result.cursor.fetchall()
            else:
                rows = [tuple(r) for r in result]
    finally:
        result.close()
    return keys, rows
