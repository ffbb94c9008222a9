"""The views' rows as the dashboard's tables and the `farm` commands list them: results, the best
configs per objective, Triton against cuBLAS, accuracy, sweeps and environments."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import Connection, case, func, select, union_all

from db.errors import DatabaseError
from db.models import Environment, Measurement, Sweep, SweepCount, VariantStats
from db.queries.frames import frame, normalize, view_frame
from db.queries.select import SHAPE_ORDER, Filter, Range, Shape, conditions, view
from db.queries.winners import eager_winners, rank_winners, winner_order
from db.views import VIEW_COLUMNS

# What "best" means (best_configs): the least kernel time (ms), or the least eager_ms, what an eager
# caller waits for per call (kernels.dispatch.OBJECTIVES holds the same words for the dispatcher).
OBJECTIVES = ("kernel", "eager")


def results(
    conn: Connection,
    *,
    gpu_name: Filter = None,
    dtype: Filter = None,
    variant: Filter = None,
    status: Filter = None,
    m_range: Range | None = None,
    n_range: Range | None = None,
    k_range: Range | None = None,
    limit: int | None = None,
    sweep: int | None = None,
) -> pd.DataFrame:
    """Measurements with their environment, newest first (ranges are inclusive): the newest run of each
    point, or with `sweep` that sweep's run of its points (view run_results; it has a `latest` column).

    With a limit, the ids come first: each environment of the GPU filter gives its newest `limit`
    ids from ix_measurements_recent (environment, dtype, id), the newest `limit` of those are fetched
    whole. One ORDER BY id over the GPU's environments read and sorted every row of the GPU and dtype
    (1.7-2.4 s for 5,000 rows at 10M; docs/results/db_views.md), and PostgreSQL, asked for whole rows
    per environment, walked the primary key backwards through other environments' rows instead.
    """
    filters = dict(gpu_name=gpu_name, dtype=dtype, variant=variant, status=status)
    ranges = dict(m_range=m_range, n_range=n_range, k_range=k_range)
    v = view("results" if sweep is None else "run_results")
    stmt = select(v).where(*conditions(v, **filters, **ranges, sweep_id=sweep)).order_by(v.c.id.desc())
    if limit is None or sweep is not None:  # one sweep's rows: the sweep_id index finds them
        return frame(conn, stmt if limit is None else stmt.limit(limit))
    e, t = Environment.__table__, Measurement.__table__
    env_ids = conn.scalars(select(e.c.id).where(*conditions(e, gpu_name=gpu_name)).order_by(e.c.id)).all()
    ids = select(t.c.id).where(
        *conditions(t, dtype=dtype, variant=variant, status=status, **ranges), t.c.latest == 1
    )
    newest = [
        select(ids.where(t.c.environment_id == i).order_by(t.c.id.desc()).limit(limit).subquery())
        for i in env_ids
    ]
    if not newest:
        return frame(conn, stmt.limit(limit))
    both = union_all(*newest).subquery()
    winners = select(both.c.id).order_by(both.c.id.desc()).limit(limit)
    return frame(conn, stmt.where(v.c.id.in_(winners)))


def best_configs(
    conn: Connection,
    *,
    gpu_name: Filter = None,
    dtype: Filter = None,
    variant: Filter = None,
    shape: Shape | None = None,
    limit: int | None = None,
    objective: str = "kernel",
) -> pd.DataFrame:
    """The best ok row per (gpu_name, dtype, m, n, k, variant) for `objective` (OBJECTIVES), per shape
    best first (its first row is the shape's winner), the columns of the best_configs view.

    "kernel": the least kernel time (ms), ties in WINNER_ORDER; the best_configs view, which the
    writer's summaries keep. "eager": the least eager_ms, what an eager caller waits for per call
    (db.records.eager_ms), where it is host-bound the rows within winners.HOST_TIE of it tie and the
    least kernel time wins (db.queries.winners.eager_winners); rows without one (no host time: stored
    before revision 0002) are left out. It ranks the results view's ok rows of the filters (no summary
    keeps it), so a filter on GPU and dtype keeps it to their rows."""
    filters = dict(gpu_name=gpu_name, dtype=dtype, variant=variant, shape=shape)
    if objective == "kernel":
        order = (*SHAPE_ORDER, "ms", "variant")
        df = view_frame(conn, "best_configs", order, limit, **filters)
        return rank_winners(df, by=SHAPE_ORDER)
    if objective != "eager":
        raise DatabaseError(f"unknown objective {objective!r}; one of: {', '.join(OBJECTIVES)}")
    r = view("results")
    ok = (
        select(r)
        .where(*conditions(r, **filters, status="ok"), r.c.ms.is_not(None), r.c.eager_ms.is_not(None))
        .subquery()
    )
    cols = VIEW_COLUMNS["best_configs"]
    per_variant = eager_winners(ok, (*SHAPE_ORDER, "variant"))
    variant_best = select(*(per_variant.c[c.key] for c in ok.c)).where(per_variant.c.rn == 1).subquery()
    per_shape = eager_winners(variant_best, SHAPE_ORDER)  # the shape's winner first, by the same rule
    stmt = select(*(per_shape.c[c] for c in cols)).order_by(
        *(per_shape.c[c] for c in SHAPE_ORDER), per_shape.c.rn
    )
    df = frame(conn, stmt if limit is None else stmt.limit(limit))
    return frame(conn, select(view("best_configs")).limit(0)) if df.empty else df


# A config measured in several runs (points that differ only by environment or code version: each has
# its own newest run, latest = 1) is read from its newest ok row: the newest measurement, then the higher
# id, as db.merge picks a point's newest run.
CONFIG_RUNS = (*SHAPE_ORDER, "variant", "config_key")


def export_best(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, objective: str = "kernel"
) -> pd.DataFrame:
    """What `farm export-best` writes for `objective`: exactly one row per (gpu_name, dtype, m, n, k,
    variant), the best under best_configs' rule over each config's newest ok run (`CONFIG_RUNS`), in
    best_configs' columns, by shape and then kernel time.

    best_configs ranks every point's newest run, and a point holds its environment and code version: a
    study and its rerun under new code are two points of each config, both latest. In
    dashboard/demo/h100-study.db (an exhaustive study, its resume, a search run under new code) 12 of
    its 26 shapes had two cuBLAS rows that way, the kernel objective taking the old run's and the eager
    one the new run's, and the export carried both. Here a config's older runs drop out, so a slower
    newer run displaces a faster older one, as the views do for one point; configs that only an older
    run measured (a resume measures the points no run holds yet) still compete."""
    if objective not in OBJECTIVES:
        raise DatabaseError(f"unknown objective {objective!r}; one of: {', '.join(OBJECTIVES)}")
    r = view("results")
    ok = select(r).where(*conditions(r, gpu_name=gpu_name, dtype=dtype, status="ok"), r.c.ms.is_not(None))
    ok = ok.subquery()
    newest_first = func.row_number().over(
        partition_by=[ok.c[c] for c in CONFIG_RUNS], order_by=[ok.c.created_at.desc(), ok.c.id.desc()]
    )
    runs = select(ok, newest_first.label("run_rn")).subquery()
    newest = select(*(runs.c[c.key] for c in ok.c)).where(runs.c.run_rn == 1)
    key = (*SHAPE_ORDER, "variant")
    if objective == "eager":
        ranked = eager_winners(newest.where(runs.c.eager_ms.is_not(None)).subquery(), key)
    else:
        rows = newest.subquery()
        rank = func.row_number().over(partition_by=[rows.c[c] for c in key], order_by=winner_order(rows))
        ranked = select(rows, rank.label("rn")).subquery()
    cols = VIEW_COLUMNS["best_configs"]
    stmt = select(*(ranked.c[c] for c in cols)).where(ranked.c.rn == 1)
    df = frame(conn, stmt)
    if df.empty:
        return frame(conn, select(view("best_configs")).limit(0))
    return rank_winners(df, by=SHAPE_ORDER)


def vs_cublas(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, shape: Shape | None = None
) -> pd.DataFrame:
    """Per shape with both: the best Triton row (any variant but cuBLAS; a tie by WINNER_ORDER, as every
    page names it) against the best cuBLAS row; ratio = cublas_ms / triton_ms (> 1: Triton wins).

    From best_configs' rows, not the vs_cublas view: the view breaks a tie between variants by id."""
    best = best_configs(conn, gpu_name=gpu_name, dtype=dtype, shape=shape)
    key = list(SHAPE_ORDER)
    triton = best[best.variant != "cublas"].drop_duplicates(key)  # best_configs ranks: first is the winner
    cublas = best[best.variant == "cublas"].drop_duplicates(key)
    out = triton[[*key, "ms", "variant", "config_key", "tflops"]].merge(
        cublas[[*key, "ms", "tflops"]], on=key, suffixes=("", "_cublas")
    )
    names = ("triton_ms", "triton_variant", "triton_config_key", "triton_tflops", "cublas_ms")
    out.columns = [*key, *names, "cublas_tflops"]
    out["ratio"] = out.cublas_ms / out.triton_ms
    return out.sort_values(key).reset_index(drop=True)


def accuracy(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, variant: Filter = None
) -> pd.DataFrame:
    """Per (variant, dtype), over the rows that were checked (ok or wrong): errors and nondeterminism.

    nondeterminism_max is the largest stored max |c1 - c2| of repeated runs; nondeterminism_rel_max
    the largest of it over the output's scale. The scale is not stored: the farm's inputs are standard
    normal (docs/design.md, "Inputs and the accuracy check"), so each output element is a sum of K
    unit-variance products, rms sqrt(K), and nondeterminism / sqrt(K) is the difference in units of a
    typical output element.

    Read from variant_stats (db.summaries): a few dozen rows, where aggregating every checked row of
    the GPU and dtype took 1.8-2.9 s at 10M. rel_err_mean is their sum over their count.
    """
    s, e = VariantStats.__table__, Environment.__table__
    stmt = (
        select(
            s.c.variant,
            s.c.dtype,
            func.sum(s.c.n_rows).label("n_checked"),
            func.sum(case((s.c.status == "wrong", s.c.n_rows), else_=0)).label("n_wrong"),
            func.max(s.c.rel_err_max).label("rel_err_max"),
            (func.sum(s.c.rel_err_sum) / func.nullif(func.sum(s.c.rel_err_n), 0)).label("rel_err_mean"),
            func.max(s.c.nondet_max).label("nondeterminism_max"),
            func.max(s.c.nondet_sq_per_k_max).label("_nondet_sq_per_k"),
            func.sum(s.c.n_nondet).label("n_nondeterministic"),
        )
        .join(e, e.c.id == s.c.environment_id)
        .where(*conditions(s, dtype=dtype, variant=variant, status=("ok", "wrong")))
        .where(*conditions(e, gpu_name=gpu_name))
        .group_by(s.c.variant, s.c.dtype)
        .order_by(s.c.variant, s.c.dtype)
    )
    df = frame(conn, stmt)
    df["nondeterminism_rel_max"] = np.sqrt(pd.to_numeric(df.pop("_nondet_sq_per_k")).astype("float64"))
    return df


def sweeps(conn: Connection) -> pd.DataFrame:
    """All sweeps, newest first, with n_measurements: the rows they wrote (every run is kept)."""
    df = frame(conn, select(Sweep.__table__).order_by(Sweep.id.desc()))
    c = SweepCount.__table__  # kept by the writers (db.summaries): counting took 0.4-0.6 s at 10M
    rows = conn.execute(select(c.c.sweep_id, c.c.n_rows)).all()
    counts = pd.DataFrame(rows, columns=["id", "n_measurements"])
    return normalize(df.merge(counts, on="id", how="left").fillna({"n_measurements": 0}))


def environments(conn: Connection) -> pd.DataFrame:
    """All environments with their number of measurements (from variant_stats: 1.1-1.3 s at 10M
    counted from the measurements)."""
    df = frame(conn, select(Environment.__table__).order_by(Environment.id))
    s = VariantStats.__table__
    stmt = select(s.c.environment_id, func.sum(s.c.n_rows)).group_by(s.c.environment_id)
    counts = pd.DataFrame(conn.execute(stmt).all(), columns=["id", "n_measurements"])
    return normalize(df.merge(counts, on="id", how="left").fillna({"n_measurements": 0}))
