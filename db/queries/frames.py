"""Rows as pandas DataFrames whose column types are the same from SQLite and PostgreSQL: integers as
Int64, timestamps as UTC datetimes, booleans as boolean (db.views.COLUMN_KINDS names each column's)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Select, select

from db.fetch import fetch, without_gc
from db.queries.select import conditions, view
from db.views import COLUMN_KINDS


def normalize(df: pd.DataFrame, kind_of=COLUMN_KINDS.get) -> pd.DataFrame:
    """Give known columns one pandas type whichever backend produced them (db.views.COLUMN_KINDS);
    `kind_of` maps a column's name to its kind."""
    for col in df.columns:
        kind = kind_of(col)
        if kind == "int":
            df[col] = pd.to_numeric(df[col]).astype("Int64")
        elif kind == "float":
            df[col] = pd.to_numeric(df[col]).astype("float64")
        elif kind == "bool":
            df[col] = df[col].astype("boolean")
        elif kind == "time":
            df[col] = pd.to_datetime(df[col], utc=True, format="ISO8601")
    return df


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _column(name: str, values: tuple) -> Any:
    """One column of a frame, built in the type normalize() gives it where the values allow: pandas'
    inference per value cost 0.11 s of best_configs' 8,293 x 57 values, mostly for the timestamps.
    Anything else (SQLite's timestamps as text, a value these types refuse) is left to normalize()."""
    kind = COLUMN_KINDS.get(name)
    try:
        if kind == "float":
            return np.array(values, dtype="float64")  # None -> NaN
        if kind == "int":
            return pd.array(values, dtype="Int64")
        first = next((v for v in values if v is not None), None)
        if kind == "time" and isinstance(first, datetime) and first.tzinfo is not None:
            # PostgreSQL's timestamptz as microseconds since the epoch: pandas reads each object else.
            us = [None if v is None else (v - _EPOCH) // _MICROSECOND for v in values]
            return pd.to_datetime(pd.array(us, dtype="Int64"), unit="us", utc=True)
    except (TypeError, ValueError):
        pass
    return values


def frame(conn: Connection, stmt: Select) -> pd.DataFrame:
    keys, rows = fetch(conn, stmt)
    if not rows:
        return normalize(pd.DataFrame(rows, columns=keys))
    with without_gc():
        return normalize(pd.DataFrame({k: _column(k, v) for k, v in zip(keys, zip(*rows))}, columns=keys))


def iter_view(conn: Connection, name: str, *, chunk_rows: int = 50_000) -> Iterator[pd.DataFrame]:
    """A whole view in DataFrames of up to chunk_rows rows (exports never hold 1M rows at once)."""
    v = view(name)
    # A server-side cursor on PostgreSQL; SQLite's cursor steps through the rows anyway.
    result = conn.execution_options(yield_per=chunk_rows).execute(select(v))
    try:
        keys = list(result.keys())
        empty = True
        for part in result.partitions():
            empty = False
            yield normalize(pd.DataFrame([tuple(r) for r in part], columns=keys))
        if empty:
            yield normalize(pd.DataFrame(columns=keys))
    finally:
        result.close()


def view_frame(
    conn: Connection, name: str, order_by: Sequence[str], limit: int | None = None, **filters: Any
) -> pd.DataFrame:
    """frame() of a view's rows. A text column that a filter fixes to one value (the dashboard's GPU and
    dtype) is filled in, not fetched: they were 0.05 s of grouping_effect's 54,577 rows at 10M."""
    v = view(name)
    fixed = {c: value for c, value in filters.items() if isinstance(value, str) and c in v.c}
    stmt = select(*(c for c in v.c if c.name not in fixed)).where(*conditions(v, **filters))
    stmt = stmt.order_by(*(v.c[c] for c in order_by))
    df = frame(conn, stmt if limit is None else stmt.limit(limit))
    if df.empty:  # the types of an empty frame, as every column fetched gives them
        return frame(conn, select(v).limit(0))
    for position, c in enumerate(v.c.keys()):
        if c in fixed:
            df.insert(position, c, fixed[c])
    return df
