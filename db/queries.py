"""Read side: the queries that the `farm` CLI and the dashboard share.

Each function takes an open Connection (the caller owns its lifecycle) and returns a pandas
DataFrame (unless said otherwise) whose column types are the same from SQLite and PostgreSQL:
integers as Int64, timestamps as UTC datetimes, booleans as boolean. Filters take one value or a
list of values; None means no filter. They filter the views by columns the views partition by, so
both databases push the filter down to the `ix_measurements_view` index (timings on 1M rows in
docs/results/db_views.md).
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Integer,
    Select,
    and_,
    case,
    column,
    event,
    func,
    select,
    table,
    true,
    tuple_,
    union_all,
    values,
)
from sqlalchemy.engine.cursor import CursorFetchStrategy
from sqlalchemy.sql.expression import TableClause

from db.errors import DatabaseError
from db.models import UNATTRIBUTED, Environment, Measurement, Sweep, SweepCount, VariantStats
from db.records import POWER_LIMIT_EXCESS, Backend
from db.views import COLUMN_KINDS, STREAM_K, VIEW_COLUMNS, VIEW_NAMES

Filter = str | int | Sequence[str] | Sequence[int] | None
# What "best" means (best_configs): the least kernel time (ms), or the least eager_ms, what an eager
# caller waits for per call (kernels.dispatch.OBJECTIVES holds the same words for the dispatcher).
OBJECTIVES = ("kernel", "eager")
Shape = tuple[int, int, int]
Range = tuple[int, int]


def view(name: str) -> TableClause:
    """A selectable for one of the views; an unknown name is a DatabaseError listing the views."""
    if name not in VIEW_COLUMNS:
        raise DatabaseError(f"unknown view {name!r}; the views are: {', '.join(VIEW_NAMES)}")
    return _view(name)


@cache
def _view(name: str) -> TableClause:
    return table(name, *(column(c) for c in VIEW_COLUMNS[name]))


def _plain(value: Any) -> Any:
    """A Python scalar: numpy scalars (from DataFrames) bind as BLOBs on SQLite and match nothing."""
    return value.item() if hasattr(value, "item") else value


def conditions(v: TableClause, **filters: Any) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    for name, value in filters.items():
        if value is None:
            continue
        if name == "shape":
            conds += [v.c[d] == _plain(x) for d, x in zip("mnk", value)]
        elif name.endswith("_range"):
            col = v.c[name.removesuffix("_range")]
            low, high = _plain(value[0]), _plain(value[1])
            # One value as equality: an index then seeks m, n and k (a range stops the seek at m).
            conds += [col == low] if low == high else [col >= low, col <= high]
        elif isinstance(value, str) or not isinstance(value, Iterable):
            conds.append(v.c[name] == _plain(value))
        else:
            conds.append(v.c[name].in_([_plain(x) for x in value]))
    return conds


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
def _without_gc() -> Iterator[None]:
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

    Read straight from the DBAPI cursor: building SQLAlchemy Row objects doubled the fetch of
    450k rows (0.9 s -> 2.2 s on this 2-core machine). No value needs a result processor here:
    normalize() converts the types.
    """
    result = conn.execute(stmt, execution_options={_BINARY: True})
    try:
        keys = list(result.keys())
        with _without_gc():
            # Only an unbuffered result leaves every row to the cursor (stream_results prefetches some).
            if type(getattr(result, "cursor_strategy", None)) is CursorFetchStrategy:
                rows = result.cursor.fetchall()
            else:
                rows = [tuple(r) for r in result]
    finally:
        result.close()
    return keys, rows


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
    with _without_gc():
        return normalize(pd.DataFrame({k: _column(k, v) for k, v in zip(keys, zip(*rows))}, columns=keys))


def _view_frame(
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


_SHAPE_ORDER = ("gpu_name", "dtype", "m", "n", "k")


# ---- the views, filtered as the dashboard and the CLI ask ----


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
    (db.records.eager_ms), ties by ms, variant, config key, id; rows without one (no host time: stored
    before revision 0002) are left out. It ranks the results view's ok rows of the filters (no summary
    keeps it), so a filter on GPU and dtype keeps it to their rows."""
    filters = dict(gpu_name=gpu_name, dtype=dtype, variant=variant, shape=shape)
    if objective == "kernel":
        order = (*_SHAPE_ORDER, "ms", "variant")
        df = _view_frame(conn, "best_configs", order, limit, **filters)
        return rank_winners(df, by=_SHAPE_ORDER)
    if objective != "eager":
        raise DatabaseError(f"unknown objective {objective!r}; one of: {', '.join(OBJECTIVES)}")
    r = view("results")
    eager_order = (r.c.eager_ms, r.c.ms, r.c.variant, r.c.config_key, r.c.id)
    ranked = (
        select(
            r,
            func.row_number()
            .over(partition_by=[*(r.c[c] for c in _SHAPE_ORDER), r.c.variant], order_by=eager_order)
            .label("rn"),
        )
        .where(*conditions(r, **filters, status="ok"), r.c.ms.is_not(None), r.c.eager_ms.is_not(None))
        .subquery()
    )
    cols = VIEW_COLUMNS["best_configs"]
    stmt = select(*(ranked.c[c] for c in cols)).where(ranked.c.rn == 1)
    stmt = stmt.order_by(*(ranked.c[c] for c in (*_SHAPE_ORDER, "eager_ms", "ms", "variant", "config_key")))
    df = frame(conn, stmt if limit is None else stmt.limit(limit))
    return frame(conn, select(view("best_configs")).limit(0)) if df.empty else df


def splitk_speedup(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, shape: Shape | None = None
) -> pd.DataFrame:
    order = (*_SHAPE_ORDER, "block_m", "block_n")
    return _view_frame(conn, "splitk_speedup", order, gpu_name=gpu_name, dtype=dtype, shape=shape)


def grouping_effect(
    conn: Connection,
    *,
    gpu_name: Filter = None,
    dtype: Filter = None,
    variant: Filter = None,
    shape: Shape | None = None,
) -> pd.DataFrame:
    order = (*_SHAPE_ORDER, "variant", "block_m", "block_n", "block_k", "split_k", "num_warps", "num_stages")
    filters = dict(gpu_name=gpu_name, dtype=dtype, variant=variant, shape=shape)
    return _view_frame(conn, "grouping_effect", (*order, "group_m"), **filters)


def vs_cublas(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, shape: Shape | None = None
) -> pd.DataFrame:
    """Per shape with both: the best Triton row (any variant but cuBLAS; a tie by WINNER_ORDER, as every
    page names it) against the best cuBLAS row; ratio = cublas_ms / triton_ms (> 1: Triton wins).

    From best_configs' rows, not the vs_cublas view: the view breaks a tie between variants by id."""
    best = best_configs(conn, gpu_name=gpu_name, dtype=dtype, shape=shape)
    key = list(_SHAPE_ORDER)
    triton = best[best.variant != "cublas"].drop_duplicates(key)  # best_configs ranks: first is the winner
    cublas = best[best.variant == "cublas"].drop_duplicates(key)
    out = triton[[*key, "ms", "variant", "config_key", "tflops"]].merge(
        cublas[[*key, "ms", "tflops"]], on=key, suffixes=("", "_cublas")
    )
    names = ("triton_ms", "triton_variant", "triton_config_key", "triton_tflops", "cublas_ms")
    out.columns = [*key, *names, "cublas_tflops"]
    out["ratio"] = out.cublas_ms / out.triton_ms
    return out.sort_values(key).reset_index(drop=True)


def splitk_curve(conn: Connection, *, gpu_name: str, dtype: str, m: int, n: int, k: int) -> pd.DataFrame:
    """The best Triton time per split_k for one shape (stream-K left out), with its speedup over the best
    split_k = 1 time: the same numbers as splitk_best's row for the shape."""
    r = view("results")
    ranked = (
        select(
            r.c.split_k,
            r.c.ms,
            r.c.ms_p20,
            r.c.ms_p80,
            r.c.tflops,
            r.c.variant,
            r.c.config_key,
            func.row_number().over(partition_by=r.c.split_k, order_by=winner_order(r)).label("rn"),
        )
        .where(*conditions(r, gpu_name=gpu_name, dtype=dtype, shape=(m, n, k), status="ok"))
        # The same baseline as splitk_best: stream-K is no SPLIT_K = 1 point of this curve.
        .where(r.c.ms.is_not(None), r.c.variant.not_in(("cublas", *STREAM_K)))
        .subquery()
    )
    cols = [c for c in ranked.c if c.name != "rn"]
    df = frame(conn, select(*cols).where(ranked.c.rn == 1).order_by(ranked.c.split_k))
    unsplit = df.loc[df.split_k == 1, "ms"]
    df["speedup"] = (unsplit.iloc[0] if len(unsplit) else float("nan")) / df["ms"]
    return df


def accuracy(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, variant: Filter = None
) -> pd.DataFrame:
    """Per (variant, dtype), over the rows that were checked (ok or wrong): errors and nondeterminism.

    nondeterminism_max is the largest stored max |c1 - c2| of repeated runs; nondeterminism_rel_max
    the largest of it over the output's scale. The scale is not stored: the farm's inputs are standard
    normal (farm.measure), so each output element is a sum of K unit-variance products, rms sqrt(K),
    and nondeterminism / sqrt(K) is the difference in units of a typical output element.

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


# ---- sweeps, environments, comparisons ----


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


# ---- two runs (sweeps) of the same study ----

# What pairs two runs' rows: the point without its environment and code version (a run on another host
# of the same GPU model, or of changed code, is what one compares).
RUN_POINT = ("gpu_name", "variant", "dtype", "m", "n", "k", "config_key")
RUN_POINT_COLUMNS = (
    *RUN_POINT, "ms_a", "ms_p20_a", "ms_p80_a", "ms_b", "ms_p20_b", "ms_p80_b", "ratio_b_over_a", "verdict",
)  # fmt: skip
_RUN_CONFIG = ("block_m", "block_n", "block_k", "split_k", "num_warps", "num_stages", "group_m")
_RUN_SHAPE = ("gpu_name", "dtype", "m", "n", "k")
_GROUP_PAIR = (*_RUN_SHAPE, "variant", *_RUN_CONFIG[:-1])


@dataclass(frozen=True)
class RunComparison:
    """compare_runs' answer: run b against run a, every ratio and difference b over (or minus) a."""

    points: pd.DataFrame
    splitk: pd.DataFrame
    grouping: pd.DataFrame
    summary: dict[str, Any]


def compare_runs(conn: Connection, run_a: int, run_b: int) -> RunComparison:
    """Run b against run a (two sweeps, usually of the same study: `farm sweep --repeat`) on every ok
    point both measured, and the split-K and grouping effects of each run over those points.

    Points pair on RUN_POINT (gpu_name, variant, dtype, m, n, k, config_key): not on the environment or
    code version. Each run's row of a point is its own run's (view run_results), whichever run is newest;
    a run over several hosts of one GPU model keeps its fastest row of the point.

    points: one row per common point, sorted by RUN_POINT; columns RUN_POINT_COLUMNS:
      gpu_name, variant, dtype, m, n, k, config_key, ms_a, ms_p20_a, ms_p80_a, ms_b, ms_p20_b, ms_p80_b,
      ratio_b_over_a = ms_b / ms_a (< 1: b is faster), verdict: "same" when the p20-p80 intervals
      overlap (a missing p20 or p80 is taken as ms), else "faster" (ms_b < ms_a) or "slower": run b's.
    splitk: per shape (gpu_name, dtype, m, n, k) with both kinds of row in both runs: speedup_a,
      speedup_b (best unsplit ms / best split ms: split_k = 1 of any variant but cuBLAS and stream-K,
      against split_k > 1; > 1: split-K pays, as splitk_best) and diff_b_minus_a.
    grouping: per shape, variant, block config (block_m, block_n, block_k, split_k, num_warps,
      num_stages) and group_m > 1 with a group_m = 1 row of the same config in both runs: gain_a, gain_b
      (best group_m = 1 ms / best ms of the group_m; > 1: grouping pays, as grouping_effect's speedup)
      and diff_b_minus_a.
    summary: run_a, run_b; n_a, n_b (each run's ok points with a time); n_points (common), n_same,
      n_faster, n_slower (verdicts), share_same = n_same / n_points (the share within noise);
      median_ratio_b_over_a; n_splitk_shapes, median_splitk_diff_b_minus_a; n_grouping_pairs,
      median_grouping_diff_b_minus_a. Medians and share_same are NaN where nothing pairs.

    A run id that is no sweep raises DatabaseError.
    """
    s = Sweep.__table__
    known = set(conn.scalars(select(s.c.id).where(s.c.id.in_([int(run_a), int(run_b)]))))
    missing = [str(r) for r in (run_a, run_b) if int(r) not in known]
    if missing:
        raise DatabaseError(f"no sweep with id {', '.join(missing)}")
    a, b = _run_rows(conn, int(run_a)), _run_rows(conn, int(run_b))
    out = a.merge(b[[*RUN_POINT, "ms", "ms_p20", "ms_p80"]], on=list(RUN_POINT), suffixes=("_a", "_b"))
    out["ratio_b_over_a"] = out.ms_b / out.ms_a
    lo_a, hi_a = out.ms_p20_a.fillna(out.ms_a), out.ms_p80_a.fillna(out.ms_a)
    lo_b, hi_b = out.ms_p20_b.fillna(out.ms_b), out.ms_p80_b.fillna(out.ms_b)
    overlap = (lo_a <= hi_b) & (lo_b <= hi_a)
    faster = out.ms_b < out.ms_a
    out["verdict"] = ["same" if o else ("faster" if f else "slower") for o, f in zip(overlap, faster)]
    out = out.sort_values(list(RUN_POINT)).reset_index(drop=True)
    common = out[list(RUN_POINT)]
    effects = [
        (
            _splitk_effect(r.merge(common, on=list(RUN_POINT))),
            _grouping_effect(r.merge(common, on=list(RUN_POINT))),
        )
        for r in (a, b)
    ]
    splitk = _pair_effect(effects[0][0], effects[1][0], list(_RUN_SHAPE), "speedup")
    grouping = _pair_effect(effects[0][1], effects[1][1], [*_GROUP_PAIR, "group_m"], "gain")
    n = len(out)
    verdicts = Counter(out.verdict)
    summary = {
        "run_a": int(run_a),
        "run_b": int(run_b),
        "n_a": len(a),
        "n_b": len(b),
        "n_points": n,
        "n_same": verdicts["same"],
        "n_faster": verdicts["faster"],
        "n_slower": verdicts["slower"],
        "share_same": verdicts["same"] / n if n else float("nan"),
        "median_ratio_b_over_a": _median(out.ratio_b_over_a),
        "n_splitk_shapes": len(splitk),
        "median_splitk_diff_b_minus_a": _median(splitk.diff_b_minus_a),
        "n_grouping_pairs": len(grouping),
        "median_grouping_diff_b_minus_a": _median(grouping.diff_b_minus_a),
    }
    points = out[list(RUN_POINT_COLUMNS)]
    return RunComparison(points=points, splitk=splitk, grouping=grouping, summary=summary)


def _median(values: pd.Series) -> float:
    return float(values.median()) if len(values) else float("nan")


def _run_rows(conn: Connection, sweep_id: int) -> pd.DataFrame:
    """A run's ok rows with a time: one per RUN_POINT (the fastest, then the lowest id)."""
    r = view("run_results")
    cols = (*RUN_POINT, *_RUN_CONFIG, "ms", "ms_p20", "ms_p80", "id")
    stmt = select(*(r.c[c] for c in cols)).where(
        r.c.sweep_id == sweep_id, r.c.status == "ok", r.c.ms.is_not(None)
    )
    df = frame(conn, stmt).sort_values(["ms", "id"])
    return df.drop_duplicates(list(RUN_POINT)).drop(columns="id").reset_index(drop=True)


def _splitk_effect(rows: pd.DataFrame) -> pd.DataFrame:
    """Per shape: best unsplit ms over best split ms (splitk_best's speedup)."""
    unsplit = rows[(rows.split_k == 1) & ~rows.variant.isin(("cublas", *STREAM_K))]
    split = rows[rows.split_k > 1]
    both = pd.concat(
        [
            unsplit.groupby(list(_RUN_SHAPE)).ms.min().rename("unsplit"),
            split.groupby(list(_RUN_SHAPE)).ms.min().rename("split"),
        ],
        axis=1,
        join="inner",
    )
    return (both.unsplit / both.split).rename("speedup").reset_index()


def _grouping_effect(rows: pd.DataFrame) -> pd.DataFrame:
    """Per block config and group_m > 1: best group_m = 1 ms over best ms of the group_m."""
    best = rows.groupby([*_GROUP_PAIR, "group_m"]).ms.min().reset_index()
    base = best[best.group_m == 1].drop(columns="group_m").rename(columns={"ms": "ms_group1"})
    pairs = best[best.group_m > 1].merge(base, on=list(_GROUP_PAIR))
    pairs["gain"] = pairs.ms_group1 / pairs.ms
    return pairs[[*_GROUP_PAIR, "group_m", "gain"]]


def _pair_effect(a: pd.DataFrame, b: pd.DataFrame, key: list[str], name: str) -> pd.DataFrame:
    """An effect of both runs side by side: {name}_a, {name}_b, diff_b_minus_a, sorted by key."""
    both = a.merge(b, on=key, suffixes=("_a", "_b"))
    both["diff_b_minus_a"] = both[f"{name}_b"] - both[f"{name}_a"]
    return both.sort_values(key).reset_index(drop=True)


# ---- summaries ----


def _most_first(counts: Counter[str]) -> dict[str, int]:
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
        "by_status": _most_first(by_status),
        "by_backend": _most_first(by_backend),
        "by_gpu": _most_first(by_gpu),
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


# ---- the sweep's resume and bulk export ----


def done_keys(
    conn: Connection,
    environment_ids: Iterable[int],
    *,
    statuses: Iterable[str] | None = None,
    code_versions: Iterable[str] | None = None,
    variants: Iterable[str] | None = None,
    dtypes: Iterable[str] | None = None,
    shapes: Iterable[Shape] | None = None,
) -> set[tuple]:
    """The point keys (db.records.point_key) stored for these environments, in any status unless given.

    code_versions, variants, dtypes and shapes (m, n, k) narrow it to a sweep's own points, what a
    resume needs: then it reads one range of ix_measurements_shape per (environment, dtype, shape,
    variant, code version), so its cost follows the sweep, not the database (10M rows:
    docs/results/db_views.md).
    Unscoped, it reads the unique index alone; the cost is Python building the tuples, about
    1.4 µs a key here.
    """
    ids = [int(i) for i in environment_ids]
    if not ids:
        return set()
    t = Measurement.__table__
    stmt = select(t.c.code_version, t.c.variant, t.c.dtype, t.c.m, t.c.n, t.c.k, t.c.config_key).where(
        t.c.environment_id.in_(ids)
    )
    scoped = variants is not None or dtypes is not None or shapes is not None
    if statuses is not None:
        stmt = stmt.where(t.c.status.in_([str(s) for s in statuses]))
    if code_versions is not None:
        stmt = stmt.where(t.c.code_version.in_(sorted({str(v) for v in code_versions})))
    # Scoped: ix_measurements_shape (environment, dtype, m, n, k, variant, code version, config key,
    # status) answers alone; unscoped, the unique index (environment first). SQLite, without statistics,
    # may otherwise pick an index that leaves a table read per row.
    index = "ix_measurements_shape" if scoped else "uq_measurements_point"
    stmt = stmt.with_hint(t, f"INDEXED BY {index}", "sqlite")
    if variants is not None:
        stmt = stmt.where(t.c.variant.in_(sorted({str(v) for v in variants})))
    if dtypes is not None:
        stmt = stmt.where(t.c.dtype.in_(sorted({str(d) for d in dtypes})))
    if shapes is not None:
        wanted = sorted({tuple(int(x) for x in s) for s in shapes})
        if not wanted:
            return set()
        if conn.dialect.name == "postgresql":
            # PostgreSQL cannot use a row-value IN list as an index condition (130 shapes of a full
            # preset: 1.5 s on 1M rows, a filter), and a plain join with the list may hash-join every
            # row of the environment: a LATERAL subquery seeks the index once per shape (OFFSET 0 keeps
            # the planner from flattening it into that join).
            listed = values(*(column(d, Integer) for d in "mnk"), name="wanted").data(wanted)
            found = stmt.where(*(t.c[d] == listed.c[d] for d in "mnk")).offset(0).lateral("found")
            stmt = select(found).select_from(listed).join(found, true())
        elif code_versions is None:
            # Without code versions SQLite seeks the index with a row-value IN list only up to dtype,
            # then tests every row of the environment and dtype (10M rows: 2.4 s for 130 shapes); joined
            # with the shapes as a table, it seeks (environment, dtype, m, n, k, variant) per shape
            # (1.0 s, most of it building 193k keys). With them the IN list is faster (0.03 s vs 0.07 s).
            listed = values(*(column(d, Integer) for d in "mnk"), name="wanted").data(wanted).cte("wanted")
            stmt = stmt.where(*(t.c[d] == listed.c[d] for d in "mnk"))
        else:
            stmt = stmt.where(tuple_(t.c.m, t.c.n, t.c.k).in_(wanted))
    return set(fetch(conn, stmt)[1])


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


# ---- split-K per shape: best split against best unsplit ----

# What each kind of row is, for splitk_best: `split` any variant with split_k > 1; `unsplit` any
# tiled-grid variant with split_k = 1 (not the library, which has no blocks, and not stream-K, which
# splits K its own way and is reported beside split-K, not as its baseline).
SPLITK_KINDS = ("unsplit", "split", "streamk")
_KIND_COLUMNS = (
    "id", "variant", "config_key", "block_m", "block_n", "block_k", "split_k", "ms", "ms_p20", "ms_p80",
    "tiles_per_sm", "waves", "sm_clock_mhz", "throttled",
)  # fmt: skip


def splitk_best(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, shape: Shape | None = None
) -> pd.DataFrame:
    """Per (gpu_name, dtype, m, n, k): the fastest split row (split_k > 1, any blocks) against the fastest
    unsplit row (split_k = 1, any variant but cuBLAS and stream-K, any blocks), and the fastest stream-K row.

    Columns: the shape, then for each of unsplit_, split_, streamk_: id, variant, config_key, block_m,
    block_n, block_k, split_k, ms, ms_p20, ms_p80, tiles_per_sm, waves, sm_clock_mhz, throttled (NULL
    where the shape has no such row); speedup = unsplit_ms / split_ms (> 1: split-K pays; what a user
    asks, unlike splitk_speedup's per-block ratio, whose best can sit on a slow unsplit baseline) and
    streamk_speedup = unsplit_ms / streamk_ms. Shapes with neither a split nor a stream-K row are left out.
    """
    r = view("results")
    kind = case(
        (r.c.split_k > 1, "split"),
        (r.c.variant.in_(STREAM_K), "streamk"),
        else_="unsplit",
    ).label("kind")
    ranked = (
        select(
            *(r.c[c] for c in _SHAPE_ORDER),
            kind,
            *(r.c[c] for c in _KIND_COLUMNS),
            func.row_number()
            .over(partition_by=[*(r.c[c] for c in _SHAPE_ORDER), kind], order_by=winner_order(r))
            .label("rn"),
        )
        .where(*conditions(r, gpu_name=gpu_name, dtype=dtype, shape=shape, status="ok"))
        .where(r.c.ms.is_not(None), r.c.variant != "cublas")
        .subquery()
    )
    cols = [c for c in ranked.c if c.name != "rn"]
    best = frame(conn, select(*cols).where(ranked.c.rn == 1).order_by(*(ranked.c[c] for c in _SHAPE_ORDER)))
    wide = best.pivot(index=list(_SHAPE_ORDER), columns="kind", values=list(_KIND_COLUMNS))
    out = pd.DataFrame(index=wide.index)
    for k in SPLITK_KINDS:
        for c in _KIND_COLUMNS:
            out[f"{k}_{c}"] = wide[(c, k)] if (c, k) in wide.columns else pd.NA
    out = _normalize_prefixed(out.reset_index())
    out = out[out.split_ms.notna() | out.streamk_ms.notna()].reset_index(drop=True)
    out["speedup"] = out.unsplit_ms / out.split_ms
    out["streamk_speedup"] = out.unsplit_ms / out.streamk_ms
    return out


def _normalize_prefixed(df: pd.DataFrame) -> pd.DataFrame:
    """normalize() for columns named PREFIX_COLUMN (unsplit_ms, split_block_m, ...) too."""

    def kind_of(col: str) -> str | None:
        prefix, _, base = col.partition("_")
        return COLUMN_KINDS.get(base if prefix in SPLITK_KINDS else col)

    return normalize(df, kind_of)


# ---- what the dashboard asks beyond the views ----


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


def sweep_gpus(conn: Connection) -> pd.DataFrame:
    """Per sweep and GPU model: its ok rows with a time (what compare_runs can match)."""
    r = view("run_results")
    stmt = (
        select(r.c.sweep_id, r.c.gpu_name, func.count().label("n_ok"))
        .where(r.c.status == "ok", r.c.ms.is_not(None), r.c.sweep_id.is_not(None))
        .group_by(r.c.sweep_id, r.c.gpu_name)
        .order_by(r.c.sweep_id, r.c.gpu_name)
    )
    return frame(conn, stmt)


def default_comparison(conn: Connection) -> tuple[int, int] | None:
    """(a, b) to compare first: two runs of one study where there are (b the newest sweep with ok rows
    that an older sweep of the same name shares a GPU model with, a the newest such older one), else
    two sweeps sharing a GPU model, else the two newest sweeps with ok rows; None with fewer."""
    df = sweep_gpus(conn)
    gpus = {int(i): set(g.gpu_name) for i, g in df.groupby("sweep_id")}
    names = dict(sweeps(conn)[["id", "name"]].itertuples(index=False))
    ids = sorted(gpus, reverse=True)
    if len(ids) < 2:
        return None
    for same_study in (True, False):
        for pos, b in enumerate(ids):
            older = [
                a for a in ids[pos + 1 :] if gpus[a] & gpus[b] and (not same_study or names[a] == names[b])
            ]
            if older:
                return older[0], b
    return ids[1], ids[0]


# ---- measurement fidelity: eager time, energy, timing regimes (revision 0002's columns) ----


# What a caller without CUDA graphs waits for per call: the host issuing the launcher's kernels or the
# GPU running them (idle gaps included), whichever is longer. NULL unless both were measured: rows
# from before revision 0002 have no host time (docs/database.md, "Eager time"). Stored per row since
# revision 0007, from db.records.eager_ms, the one definition.
def eager_ms(v: TableClause) -> ColumnElement[float]:
    return v.c.eager_ms


def trusted_energy(v: TableClause, column: str) -> ColumnElement[float]:
    """`column` (joules_per_launch or avg_watts) where the reading is physical; NULL where the point's
    average power exceeded POWER_LIMIT_EXCESS times its enforced limit (a misread NVML counter: rows
    stored before farm.timing dropped such readings)."""
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


# What a grouping gain pairs on (besides group_m): the shape and the block config.
GAIN_KEY = (*_SHAPE_ORDER, "variant", "block_m", "block_n", "block_k", "split_k", "num_warps", "num_stages")
_GAIN_ROW = ("id", "ms", "joules_per_launch", "avg_watts", "timing_regime")


def grouping_gain(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, shape: Shape | None = None
) -> pd.DataFrame:
    """Per (gpu_name, dtype, shape, block config) and group_m > 1: what grouped program order gains over
    group_m = 1 with the same block config, in time and in energy.

    Each side is the fastest ok row of its group_m (as the grouping_effect view picks it). Columns: the
    key, group_m, operand_bytes, l2_bytes, operand_to_l2, then for the group_m row (no prefix) and the
    group_m = 1 row (suffix `_group1`): id, ms, joules_per_launch, avg_watts, timing_regime; time_gain =
    ms_group1 / ms (the view's speedup) and energy_gain = joules_group1 / joules, NULL unless both rows
    have a trusted energy reading (`trusted_energy`; > 1: grouping saves).
    """
    r = view("results")
    scope = conditions(r, gpu_name=gpu_name, dtype=dtype, shape=shape, status="ok")
    # Only variants that ran some group_m > 1 can pair: most rows (tiled, split-K) never do. Ranking them
    # too took 0.26 s on the 100k-row sample's H200 bfloat16, this 0.20 s (grouping_effect: 0.16 s).
    grouped = select(r.c.variant).where(*scope, r.c.group_m > 1).distinct()
    ranked = (
        select(
            *(r.c[c] for c in GAIN_KEY),
            r.c.group_m,
            *(trusted_energy(r, c) if c in ENERGY_COLUMNS else r.c[c] for c in _GAIN_ROW),
            r.c.operand_bytes,
            r.c.l2_bytes,
            func.row_number()
            .over(partition_by=[*(r.c[c] for c in GAIN_KEY), r.c.group_m], order_by=winner_order(r))
            .label("rn"),
        )
        .where(*scope, r.c.ms.is_not(None), r.c.variant.in_(grouped))
        .subquery()
    )
    cols = [c for c in ranked.c if c.name != "rn"]
    best = frame(conn, select(*cols).where(ranked.c.rn == 1))
    base = best[best.group_m == 1][[*GAIN_KEY, *_GAIN_ROW]]
    out = best[best.group_m > 1].merge(base, on=list(GAIN_KEY), suffixes=("", "_group1"))
    out = out.rename(columns={"joules_per_launch_group1": "joules_group1"})
    out["operand_to_l2"] = out.operand_bytes.astype("float64") / out.l2_bytes.astype("float64")
    out["time_gain"] = out.ms_group1 / out.ms
    # Rows stored with 0 J (NVML's counter did not tick in a short block) have no known energy.
    metered = (out.joules_group1 > 0) & (out.joules_per_launch > 0)
    out["energy_gain"] = (out.joules_group1 / out.joules_per_launch).where(metered)
    return out.sort_values([*GAIN_KEY, "group_m"]).reset_index(drop=True)


SIDES = ("unsplit", "split")
_EAGER_COLUMNS = ("id", "variant", "config_key", "split_k", "stream_ms", "host_ms", "eager_ms")


def _eager_names(kind: str) -> dict[str, str]:
    """unsplit_eager_ms, unsplit_eager_id, unsplit_eager_host_ms, ... for one side of splitk_eager."""
    return {c: f"{kind}_{c}" if c == "eager_ms" else f"{kind}_eager_{c}" for c in _EAGER_COLUMNS}


def splitk_eager(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, shape: Shape | None = None
) -> pd.DataFrame:
    """Per (gpu_name, dtype, m, n, k): splitk_best's comparison in eager time per call (eager_ms).

    The fastest unsplit row (split_k = 1, any variant but cuBLAS and stream-K) and the fastest split row
    (split_k > 1) by eager time, each side's own best (the config an eager caller would pick): for each
    of `unsplit_` and `split_`: eager_ms, eager_id, eager_variant, eager_config_key, eager_split_k,
    eager_stream_ms, eager_host_ms; eager_speedup = unsplit_eager_ms / split_eager_ms. Rows without
    host time are left out, so shapes measured before revision 0002 have no row.
    """
    r = view("results")
    eager = eager_ms(r)  # the expression itself in OVER and WHERE: PostgreSQL sees no select-list alias there
    kind = case((r.c.split_k > 1, "split"), else_="unsplit").label("kind")
    ranked = (
        select(
            *(r.c[c] for c in _SHAPE_ORDER),
            kind,
            *(r.c[c] for c in _EAGER_COLUMNS if c != "eager_ms"),
            eager.label("eager_ms"),
            func.row_number()
            .over(partition_by=[*(r.c[c] for c in _SHAPE_ORDER), kind], order_by=(eager, *winner_order(r)))
            .label("rn"),
        )
        .where(*conditions(r, gpu_name=gpu_name, dtype=dtype, shape=shape, status="ok"))
        .where(r.c.ms.is_not(None), r.c.variant.not_in(("cublas", *STREAM_K)), eager.is_not(None))
        .subquery()
    )
    cols = [c for c in ranked.c if c.name != "rn"]
    best = frame(conn, select(*cols).where(ranked.c.rn == 1))
    best["eager_ms"] = pd.to_numeric(best.eager_ms).astype("float64")
    sides = [best[best.kind == k].drop(columns="kind").rename(columns=_eager_names(k)) for k in SIDES]
    out = sides[0].merge(sides[1], on=list(_SHAPE_ORDER))
    out["eager_speedup"] = out.unsplit_eager_ms / out.split_eager_ms
    return out.sort_values(list(_SHAPE_ORDER)).reset_index(drop=True)


def timing_regimes(conn: Connection, *, status: Filter = "ok", **filters: Any) -> dict[str, int]:
    """Of the rows matching the filters (those of results(); ok rows unless `status` says otherwise):
    how many were timed in each regime, most first ("" for rows that name none: never timed)."""
    r = view("results")
    stmt = (
        select(r.c.timing_regime, func.count())
        .where(*conditions(r, status=status, **filters))
        .group_by(r.c.timing_regime)
    )
    return _most_first(Counter({(regime or ""): int(n) for regime, n in conn.execute(stmt)}))


# ---- winners: one tie rule for every table and chart that names a best row ----

# When two rows tie on kernel time, the one with the lower eager time per call wins (a row with no
# eager time after one with it), then the lower variant name, then the lower config key, then the lower
# id (the same config measured twice). Ranking by ms and id alone let each query break ties its own
# way: at 2500^3 two tables of one page named persistent_tma_bands and persistent_tma_pad, 0.07175 ms
# each. The summaries (db.summaries' shape_best, gpu_best) still break a tie inside one variant by id.
WINNER_ORDER = ("ms", "eager_ms", "variant", "config_key", "id")


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
