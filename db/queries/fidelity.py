"""Measurement fidelity (revision 0002's columns): eager time, energy that can be trusted, and the
timing regimes rows were measured in."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pandas as pd
from sqlalchemy import ColumnElement, Connection, case, func, select
from sqlalchemy.sql.expression import TableClause

from db.queries.counts import most_first
from db.queries.frames import frame
from db.queries.select import Filter, conditions, view
from db.queries.winners import eager_ms
from db.records import POWER_LIMIT_EXCESS


def trusted_energy(v: TableClause, column: str) -> ColumnElement[float]:
    """`column` (joules_per_launch or avg_watts) where the reading is physical; NULL where the point's
    average power exceeded POWER_LIMIT_EXCESS times its enforced limit (a misread NVML counter: rows
    stored before the farm dropped such readings; docs/design.md, "Energy")."""
    misread = v.c.avg_watts > POWER_LIMIT_EXCESS * v.c.power_limit_w
    return case((misread, None), else_=v.c[column]).label(column)


ENERGY_COLUMNS = ("avg_watts", "joules_per_launch")
DETAIL_COLUMNS = ("stream_ms", "host_ms", "timing_regime", "avg_watts", "joules_per_launch", "power_limit_w")


def measurement_details(conn: Connection, *, ids: Sequence[int]) -> pd.DataFrame:
    """Per measurement id: stream_ms, host_ms, eager_ms, timing_regime, avg_watts, joules_per_launch,
    power_limit_w (for pages whose rows come from a query that picks winners by id)."""
    r = view("results")
    wanted = sorted({int(i) for i in ids if pd.notna(i)})
    details = (trusted_energy(r, c) if c in ENERGY_COLUMNS else r.c[c] for c in DETAIL_COLUMNS)
    stmt = select(r.c.id, *details, eager_ms(r).label("eager_ms"))
    df = frame(conn, stmt.where(r.c.id.in_(wanted)).order_by(r.c.id))
    df["eager_ms"] = pd.to_numeric(df.eager_ms).astype("float64")
    return df


def timing_regimes(conn: Connection, *, status: Filter = "ok", **filters: Any) -> dict[str, int]:
    """Of the rows matching the filters (those of results(); ok rows unless `status` says otherwise):
    how many were timed in each regime, most first ("" for rows that name none: never timed)."""
    r = view("results")
    stmt = (
        select(r.c.timing_regime, func.count())
        .where(*conditions(r, status=status, **filters))
        .group_by(r.c.timing_regime)
    )
    return most_first(Counter({(regime or ""): int(n) for regime, n in conn.execute(stmt)}))
