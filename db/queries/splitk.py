"""Split-K per shape and per block shape: what splitting K gains over the unsplit baseline, in kernel
time and in eager time per call. Which rows are a split and which its baseline is db.splitk_rule's rule,
read here as SQL (`side`)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from sqlalchemy import CTE, ColumnElement, Connection, Subquery, and_, func, literal_column, select
from sqlalchemy.sql.expression import TableClause

from db.queries.frames import frame, normalize, view_frame
from db.queries.select import SHAPE_ORDER, Filter, Shape, conditions, view
from db.queries.winners import HOST_TIE, eager_winners, winner_order
from db.splitk_rule import SIDES, side_sql
from db.views import COLUMN_KINDS


def side(v: TableClause) -> ColumnElement[str]:
    """db.splitk_rule's side of each row of a one-view statement over v: 'unsplit', 'split', 'streamk'
    (beside the comparison) or NULL (cuBLAS)."""
    return literal_column(f"({side_sql(v.name)})")


def near_least(rows: CTE, partition: Sequence[str], column: str, within: float = 0.0) -> Subquery:
    """The rows of `rows` whose `column` is at most (1 + within) times its least in their `partition`
    group: the only rows a winner ranked on that column can come from, so a window over them alone ranks
    the same winner first. On 100,000 rows (21,542 ok ones on the H200 in bfloat16) the window over every
    row took 0.115 s of splitk_best's SQL and 0.26 s of splitk_eager's; over these (392 rows; 10,779
    within 5% of the least eager time) 0.06 and 0.19 s. `rows` is a CTE, read once for both passes."""
    part = [rows.c[c] for c in partition]
    least = select(*part, func.min(rows.c[column]).label("least")).group_by(*part).subquery()
    joined = and_(*(rows.c[c] == least.c[c] for c in partition))
    bound = rows.c[column] == least.c.least if within == 0 else rows.c[column] <= least.c.least * (1 + within)
    return select(rows).join(least, and_(joined, bound)).subquery()


def splitk_speedup(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, shape: Shape | None = None
) -> pd.DataFrame:
    """The splitk_speedup view: per block shape, the best unsplit row against the best split row."""
    order = (*SHAPE_ORDER, "block_m", "block_n")
    return view_frame(conn, "splitk_speedup", order, gpu_name=gpu_name, dtype=dtype, shape=shape)


# splitk_best's kinds of row: the two sides, and stream-K reported beside them.
SPLITK_KINDS = (*SIDES, "streamk")
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
    kind = side(r)
    rows = (
        select(
            *(r.c[c] for c in SHAPE_ORDER), kind.label("kind"), *(r.c[c] for c in _KIND_COLUMNS), r.c.eager_ms
        )
        .where(*conditions(r, gpu_name=gpu_name, dtype=dtype, shape=shape, status="ok"))
        .where(r.c.ms.is_not(None), kind.is_not(None))
        .cte("paired_rows")
    )
    # The winner's ms is its group's least: winner_order breaks ties among those rows alone.
    c = near_least(rows, (*SHAPE_ORDER, "kind"), "ms")
    ranked = select(
        *(c.c[col] for col in (*SHAPE_ORDER, "kind", *_KIND_COLUMNS)),
        func.row_number()
        .over(partition_by=[c.c[col] for col in (*SHAPE_ORDER, "kind")], order_by=winner_order(c))
        .label("rn"),
    ).subquery()
    cols = [c for c in ranked.c if c.name != "rn"]
    best = frame(conn, select(*cols).where(ranked.c.rn == 1).order_by(*(ranked.c[c] for c in SHAPE_ORDER)))
    wide = best.pivot(index=list(SHAPE_ORDER), columns="kind", values=list(_KIND_COLUMNS))
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


def splitk_curve(conn: Connection, *, gpu_name: str, dtype: str, m: int, n: int, k: int) -> pd.DataFrame:
    """The best Triton time per split_k for one shape (stream-K left out), with its speedup over the best
    split_k = 1 time: the same numbers as splitk_best's row for the shape."""
    r = view("results")
    kind = side(r)
    ranked = (
        select(
            r.c.split_k,
            r.c.ms,
            r.c.ms_p20,
            r.c.ms_p80,
            r.c.tflops,
            r.c.variant,
            r.c.config_key,
            kind.label("kind"),
            func.row_number().over(partition_by=r.c.split_k, order_by=winner_order(r)).label("rn"),
        )
        .where(*conditions(r, gpu_name=gpu_name, dtype=dtype, shape=(m, n, k), status="ok"))
        .where(r.c.ms.is_not(None), kind.in_(SIDES))  # the same sides as splitk_best
        .subquery()
    )
    cols = [c for c in ranked.c if c.name != "rn"]
    df = frame(conn, select(*cols).where(ranked.c.rn == 1).order_by(ranked.c.split_k))
    unsplit = df.loc[df.pop("kind") == SIDES[0], "ms"]
    df["speedup"] = (unsplit.iloc[0] if len(unsplit) else float("nan")) / df["ms"]
    return df


_EAGER_COLUMNS = ("id", "variant", "config_key", "split_k", "stream_ms", "host_ms", "eager_ms")


def _eager_names(kind: str) -> dict[str, str]:
    """unsplit_eager_ms, unsplit_eager_id, unsplit_eager_host_ms, ... for one side of splitk_eager."""
    return {c: f"{kind}_{c}" if c == "eager_ms" else f"{kind}_eager_{c}" for c in _EAGER_COLUMNS}


def splitk_eager(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, shape: Shape | None = None
) -> pd.DataFrame:
    """Per (gpu_name, dtype, m, n, k): splitk_best's comparison in eager time per call (eager_ms).

    The fastest unsplit row (split_k = 1, any variant but cuBLAS and stream-K) and the fastest split row
    (split_k > 1) by eager time, each side's own best (the config an eager caller would pick, host-bound
    times within winners.HOST_TIE of the least tied and ranked by kernel time: eager_winners): for each
    of `unsplit_` and `split_`: eager_ms, eager_id, eager_variant, eager_config_key, eager_split_k,
    eager_stream_ms, eager_host_ms; eager_speedup = unsplit_eager_ms / split_eager_ms. Rows without
    host time are left out, so shapes measured before revision 0002 have no row.
    """
    r = view("results")
    kind = side(r)
    rows = (
        select(*(r.c[c] for c in SHAPE_ORDER), kind.label("kind"), r.c.ms, *(r.c[c] for c in _EAGER_COLUMNS))
        .where(*conditions(r, gpu_name=gpu_name, dtype=dtype, shape=shape, status="ok"))
        .where(r.c.ms.is_not(None), kind.in_(SIDES), r.c.eager_ms.is_not(None))
        .cte("eager_rows")
    )
    # Each side's pick by best_configs(objective="eager")'s rule, the one the drop-in follows. Its winner
    # is the least eager time or one within HOST_TIE of it, and the least is among those rows, so the rule
    # ranks them alone and picks the same row.
    partition = (*SHAPE_ORDER, "kind")
    ranked = eager_winners(near_least(rows, partition, "eager_ms", HOST_TIE), partition)
    cols = [c for c in ranked.c if c.name not in ("rn", "ms")]
    best = frame(conn, select(*cols).where(ranked.c.rn == 1))
    best["eager_ms"] = pd.to_numeric(best.eager_ms).astype("float64")
    sides = [best[best.kind == k].drop(columns="kind").rename(columns=_eager_names(k)) for k in SIDES]
    out = sides[0].merge(sides[1], on=list(SHAPE_ORDER))
    out["eager_speedup"] = out.unsplit_eager_ms / out.split_eager_ms
    return out.sort_values(list(SHAPE_ORDER)).reset_index(drop=True)
