"""Winners: one tie rule for every table and chart that names a best row.

When two rows tie on kernel time, the one with the lower eager time per call wins (a row with no eager
time after one with it), then the lower variant name, then the lower config key, then the lower id (the
same config measured twice). Ranking by ms and id alone let each query break ties its own way: at
2500^3 two tables of one page named persistent_tma_bands and persistent_tma_pad, 0.07175 ms each. The
summaries (db.summaries' shape_best, gpu_best) still break a tie inside one variant by id.

Ranked by eager time (`eager_winners`), rows tie where the least eager time is the host's and another
row's is within HOST_TIE of it: the tie goes to kernel time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from sqlalchemy import ColumnElement, Subquery, and_, case, func, or_, select
from sqlalchemy.sql.expression import TableClause

WINNER_ORDER = ("ms", "eager_ms", "variant", "config_key", "id")

# Host-bound eager times within this share of the least tie. At 2999x1501x1234 on an H100 the 12 best
# persistent_tma_pad configs by eager time all read 71.5-73.2 us of host a call (the same launcher's
# work, 2.4% apart: noise), over kernels of 39.8-50.0 us; ranked by eager time alone the farm picked the
# 50.0 us kernel, which do_bench read 0.82x as fast eagerly as the 39.8 us one
# (docs/results/eager_pick.csv).
HOST_TIE = 0.05


# What a caller without CUDA graphs waits for per call: the host issuing the launcher's kernels or the
# GPU running them (idle gaps included), whichever is longer. NULL unless both were measured: rows
# from before revision 0002 have no host time (docs/database.md, "Eager time"). Stored per row since
# revision 0007, from db.records.eager_ms, the one definition.
def eager_ms(v: TableClause) -> ColumnElement[float]:
    return v.c.eager_ms


def winner_order(v: TableClause) -> list[ColumnElement[Any]]:
    """WINNER_ORDER as ORDER BY terms over a view's columns (for ROW_NUMBER() OVER (... ORDER BY ...))."""
    eager = eager_ms(v)
    return [v.c.ms, case((eager.is_(None), 1), else_=0), eager, v.c.variant, v.c.config_key, v.c.id]


def eager_of(df: pd.DataFrame) -> pd.Series:
    """eager_ms (the SQL expression's rule) of fetched rows with stream_ms and host_ms; NaN without both."""
    stream = pd.to_numeric(df["stream_ms"], errors="coerce").astype("float64")
    host = pd.to_numeric(df["host_ms"], errors="coerce").astype("float64")
    return stream.where(stream >= host, host).where(stream.notna() & host.notna())


def rank_winners(df: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """df's rows ordered by `by`, then WINNER_ORDER (eager_ms from stream_ms and host_ms where df has no
    eager_ms; a missing time sorts last): the first row of each `by` group is its winner."""
    key = df.assign(_eager=df["eager_ms"] if "eager_ms" in df else eager_of(df))
    for c in ("ms", "_eager"):
        key[c] = pd.to_numeric(key[c], errors="coerce").astype("float64")
    order = [*by, "ms", "_eager", "variant", "config_key", "id"]
    order = [c for c in order if c in key]
    key = key.sort_values(order, kind="stable", na_position="last")
    return df.loc[key.index].reset_index(drop=True)


def eager_winners(rows: Subquery, partition: Sequence[str]) -> Subquery:
    """`rows` (ok rows with ms and eager_ms) with `rn`, their rank by eager time within each `partition`
    group: the least eager time first, except that where it is host-bound (host_ms >= stream_ms) the rows
    within HOST_TIE of it tie and rank by kernel time; then WINNER_ORDER."""
    part = [rows.c[c] for c in partition]
    by_eager = [rows.c.eager_ms, rows.c.ms, rows.c.variant, rows.c.config_key, rows.c.id]
    host_bound = case((rows.c.host_ms >= rows.c.stream_ms, 1), else_=0)
    marked = select(
        rows,
        func.min(rows.c.eager_ms).over(partition_by=part).label("least_eager"),
        func.first_value(host_bound).over(partition_by=part, order_by=by_eager).label("least_host_bound"),
    ).subquery()
    m = marked
    within = m.c.eager_ms <= m.c.least_eager * (1 + HOST_TIE)
    tied = case((or_(m.c.eager_ms == m.c.least_eager, and_(m.c.least_host_bound == 1, within)), 0), else_=1)
    order = [tied, case((tied == 0, m.c.ms), else_=m.c.eager_ms), m.c.eager_ms, *winner_order(m)]
    return select(
        *(m.c[col.key] for col in rows.c),
        func.row_number().over(partition_by=[m.c[c] for c in partition], order_by=order).label("rn"),
    ).subquery()
