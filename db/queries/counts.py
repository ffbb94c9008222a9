"""Counts of what the database holds, from the summaries the writer keeps (db.summaries): the `farm
summary` command's, and the dashboard's filter options."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import Connection, and_, func, select

from db.models import UNATTRIBUTED, Environment, Sweep, SweepCount, VariantStats


def most_first(counts: Counter[str]) -> dict[str, int]:
    """Largest count first, ties by name: the same order from either backend."""
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def summary(conn: Connection) -> dict[str, Any]:
    """Counts by status, backend and GPU of each point's newest run ("measurements"), and the rows of every
    run ("rows_all_runs"); numbers of sweeps (that ran: not the unattributed sweep of rows stored without
    one) and environments; the last sweep (a dict or None).

    Counted from variant_stats (db.summaries; counting the measurements took 1.0-1.6 s at 10M); backend
    and GPU come from the environment (a row's backend is its environment's).
    """
    v, e, s = VariantStats.__table__, Environment.__table__, Sweep.__table__
    env = {row.id: row for row in conn.execute(select(e.c.id, e.c.gpu_name, e.c.backend))}
    by_status: Counter[str] = Counter()
    by_backend: Counter[str] = Counter()
    by_gpu: Counter[str] = Counter()
    keys = (v.c.environment_id, v.c.status)
    stmt = select(*keys, func.sum(v.c.n_rows)).group_by(*keys)
    for env_id, status, n in conn.execute(stmt):
        by_status[status] += n
        by_backend[env[env_id].backend] += n
        by_gpu[env[env_id].gpu_name] += n
    # The last started (a merged-in sweep gets a new id); the unattributed sweep never ran.
    ran = ~and_(*(s.c[k] == v for k, v in UNATTRIBUTED.items()))
    last = conn.execute(select(s).where(ran).order_by(s.c.started_at.desc(), s.c.id.desc()).limit(1))
    last = last.mappings().first()
    # Every run's rows, from sweep_counts (kept by the writers): "measurements" above counts each point's
    # newest run, as the views show them.
    kept = conn.scalar(select(func.coalesce(func.sum(SweepCount.__table__.c.n_rows), 0)))
    return {
        "measurements": sum(by_status.values()),
        "rows_all_runs": int(kept),
        "by_status": most_first(by_status),
        "by_backend": most_first(by_backend),
        "by_gpu": most_first(by_gpu),
        "sweeps": conn.scalar(select(func.count()).select_from(s).where(ran)),
        "environments": len(env),
        "last_sweep": dict(last) if last is not None else None,
    }


def filter_options(conn: Connection) -> dict[str, Any]:
    """What the dashboard's filters offer: gpu_names, dtypes, variants, statuses, and (min, max) of m, n, k.

    Read from variant_stats (db.summaries), one row per (environment, dtype, variant, status) with its
    range of m, n and k (grouping the measurements took 2.2-4.5 s at 10M).
    """
    v, e = VariantStats.__table__, Environment.__table__
    keys = (v.c.environment_id, v.c.status, v.c.dtype, v.c.variant)
    bounds = [v.c[f"{d}_{agg}"] for d in "mnk" for agg in ("min", "max")]
    rows = conn.execute(select(*keys, *bounds)).all()
    gpu_of = dict(conn.execute(select(e.c.id, e.c.gpu_name)).all())
    out: dict[str, Any] = {
        "gpu_names": sorted({gpu_of[r[0]] for r in rows}),
        "statuses": sorted({r[1] for r in rows}),
        "dtypes": sorted({r[2] for r in rows}),
        "variants": sorted({r[3] for r in rows}),
    }
    for i, d in enumerate("mnk"):
        lows, highs = [r[4 + 2 * i] for r in rows], [r[5 + 2 * i] for r in rows]
        out[d] = (min(lows), max(highs)) if rows else (None, None)
    return out
