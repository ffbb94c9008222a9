"""What the dashboard's pages ask beyond the views: the GPUs' roofs and backends, shape sizes and
options, row counts and the throttled share."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Connection, case, func, select

from db.models import Environment, VariantStats
from db.queries.frames import frame
from db.queries.select import Filter, conditions, view
from db.records import Backend


def interpreter_gpus(conn: Connection) -> list[str]:
    """GPU names whose environments ran under Triton's interpreter: their times are CPU times."""
    e = Environment.__table__
    stmt = (
        select(e.c.gpu_name).where(e.c.backend == Backend.INTERPRETER.value).distinct().order_by(e.c.gpu_name)
    )
    return list(conn.scalars(stmt))


def shape_sizes(conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None) -> pd.DataFrame:
    """Per (gpu_name, dtype, m, n, k): operand_bytes (A + B + C) as farm.metrics stored it."""
    r = view("results")
    stmt = (
        select(
            r.c.gpu_name, r.c.dtype, r.c.m, r.c.n, r.c.k, func.max(r.c.operand_bytes).label("operand_bytes")
        )
        .where(*conditions(r, gpu_name=gpu_name, dtype=dtype), r.c.operand_bytes.is_not(None))
        .group_by(r.c.gpu_name, r.c.dtype, r.c.m, r.c.n, r.c.k)
    )
    return frame(conn, stmt)


def gpu_peaks(conn: Connection, *, gpu_name: str) -> dict[str, float]:
    """The GPU's roofs: peak_tflops and peak_gbps (0 where no environment of it knows them)."""
    e = Environment.__table__
    row = conn.execute(
        select(func.max(e.c.peak_tflops), func.max(e.c.peak_gbps)).where(e.c.gpu_name == gpu_name)
    ).one()
    return {"peak_tflops": float(row[0] or 0.0), "peak_gbps": float(row[1] or 0.0)}


def count_results(conn: Connection, **filters: Any) -> int:
    """How many rows results() returns for the same filters (the explorer shows a capped page).

    Without m, n or k ranges, summed from variant_stats (db.summaries) instead of counted.
    """
    if any(filters.get(f"{d}_range") is not None for d in "mnk"):
        r = view("results")
        return int(conn.scalar(select(func.count()).select_from(r).where(*conditions(r, **filters))) or 0)
    s, e = VariantStats.__table__, Environment.__table__
    stmt = (
        select(func.sum(s.c.n_rows))
        .join(e, e.c.id == s.c.environment_id)
        .where(*conditions(s, **{k: v for k, v in filters.items() if k != "gpu_name"}))
        .where(*conditions(e, gpu_name=filters.get("gpu_name")))
    )
    return int(conn.scalar(stmt) or 0)


def throttled_share(conn: Connection, **filters: Any) -> dict[str, int]:
    """Of the ok rows matching the filters: n_ok, n_throttled (NVML said a throttle reason was active
    around the measurement) and the lowest SM clock seen (min_clock_mhz, 0 when none was recorded)."""
    r = view("results")
    stmt = select(
        func.count(),
        func.sum(case((r.c.throttled.is_(True), 1), else_=0)),
        func.min(r.c.sm_clock_mhz),
    ).where(*conditions(r, status="ok", **filters))
    n, throttled, clock = conn.execute(stmt).one()
    return {"n_ok": int(n or 0), "n_throttled": int(throttled or 0), "min_clock_mhz": int(clock or 0)}


def shape_options(conn: Connection, *, gpu_name: str, dtype: str) -> pd.DataFrame:
    """The shapes with ok rows on a GPU and dtype, with their number of ok rows, most measured first."""
    r = view("results")
    stmt = (
        select(r.c.m, r.c.n, r.c.k, func.count().label("n_ok"))
        .where(*conditions(r, gpu_name=gpu_name, dtype=dtype, status="ok"), r.c.ms.is_not(None))
        .group_by(r.c.m, r.c.n, r.c.k)
        .order_by(func.count().desc(), r.c.m, r.c.n, r.c.k)
    )
    return frame(conn, stmt)
