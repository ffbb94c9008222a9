"""PROTOTYPE (not wired in): per-shape summaries the writer keeps, so the dashboard's heavy views
read thousands of summary rows instead of ranking every measurement of a GPU and dtype.

Why: at 1M rows the views take 0.83 s (best_configs), 0.96 s (splitk_speedup), 0.88 s (vs_cublas),
each a window pass over the ~150k ok rows of one GPU and dtype; at 10M rows that is ten times as
much. The answers only ever need the best row of small groups, and a flush of the driver touches
a handful of shapes, so the writer can keep those bests up to date:

- `shape_best`: per (environment, dtype, m, n, k, variant) the fastest ok row (id and ms). It
  answers best_configs and vs_cublas. About one row per 100 measurements.
- `split_best`: per (environment, dtype, m, n, k, block_m, block_n, is_split) the fastest ok row
  of any variant but cuBLAS, split_k = 1 (is_split 0) or > 1 (is_split 1). It answers
  splitk_speedup. About one row per 10 measurements.

Keeping them: after each upsert, in the same transaction, `refresh(conn, environment_id, shapes)`
recomputes the summary rows of the (dtype, m, n, k) the flush touched from their measurements
(an index range each). Recomputing, not min-merging, keeps them right when an upsert makes a row
slower or no longer ok. `rebuild(conn)` fills them from scratch (the migration's backfill).

Reading: the same LAG pairing trick as db/views.py, over the summaries; the gpu_name and dtype
filter goes inside the window pass. Measured with bench/db_views.py --summaries (numbers in the
report of the branch `scale`; docs/cluster.md has the design in short).
"""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Column, Connection, Float, Integer, MetaData, String, Table, text

metadata = MetaData()
_SHAPE = (
    Column("environment_id", Integer, primary_key=True),
    Column("dtype", String(16), primary_key=True),
    Column("m", Integer, primary_key=True),
    Column("n", Integer, primary_key=True),
    Column("k", Integer, primary_key=True),
)
shape_best = Table(
    "shape_best",
    metadata,
    *(c.copy() for c in _SHAPE),
    Column("variant", String(64), primary_key=True),
    Column("measurement_id", Integer, nullable=False),
    Column("ms", Float, nullable=False),
)
split_best = Table(
    "split_best",
    metadata,
    *(c.copy() for c in _SHAPE),
    Column("block_m", Integer, primary_key=True),
    Column("block_n", Integer, primary_key=True),
    Column("is_split", Integer, primary_key=True),
    Column("measurement_id", Integer, nullable=False),
    Column("ms", Float, nullable=False),
)

_OK = "status = 'ok' AND ms IS NOT NULL"
_KEY = "environment_id, dtype, m, n, k"
_SHAPE_FILTER = "environment_id = :e AND dtype = :d AND m = :m AND n = :n AND k = :k"


def _fill(table: str, group: str, exprs: str, where: str) -> str:
    """INSERT the best ok row of each group of measurements matching `where`; `exprs` computes the
    `group` columns (a window's PARTITION BY cannot name a column alias of its own SELECT)."""
    return (
        f"INSERT INTO {table} ({_KEY}, {group}, measurement_id, ms) "
        f"SELECT {_KEY}, {group}, id, ms FROM (SELECT {_KEY}, {_aliased(exprs, group)}, id, ms, "
        f"ROW_NUMBER() OVER (PARTITION BY {_KEY}, {exprs} ORDER BY ms, id) AS rn "
        f"FROM measurements WHERE {where}) x WHERE rn = 1"
    )


def _aliased(exprs: str, names: str) -> str:
    return ", ".join(f"{e} AS {n}" for e, n in zip(exprs.split(", "), names.split(", ")))


_FILLS = {
    "shape_best": ("variant", "variant", _OK),
    "split_best": (
        "block_m, block_n, is_split",
        "block_m, block_n, CASE WHEN split_k > 1 THEN 1 ELSE 0 END",
        f"{_OK} AND variant <> 'cublas'",
    ),
}


def create(conn: Connection) -> None:
    metadata.create_all(conn)


def rebuild(conn: Connection) -> None:
    """Every summary row from the measurements (a backfill: one window pass per table)."""
    for name, (group, select, where) in _FILLS.items():
        conn.execute(text(f"DELETE FROM {name}"))
        conn.execute(text(_fill(name, group, select, where)))


def refresh(conn: Connection, environment_id: int, shapes: set[tuple[str, int, int, int]]) -> None:
    """Recompute the summary rows of these (dtype, m, n, k) of one environment: what a flush touched."""
    for name, (group, select, where) in _FILLS.items():
        delete, fill = (
            text(f"DELETE FROM {name} WHERE {_SHAPE_FILTER}"),
            text(_fill(name, group, select, f"{where} AND {_SHAPE_FILTER}")),
        )
        for dtype, m, n, k in sorted(shapes):
            params = {"e": environment_id, "d": dtype, "m": m, "n": n, "k": k}
            conn.execute(delete, params)
            conn.execute(fill, params)


# -- reading: what the views of a revision 0003 would be --------------------------------------------

_FILTER = "e.gpu_name = :gpu AND s.dtype = :dtype"


def best_configs(conn: Connection, *, gpu_name: str, dtype: str) -> pd.DataFrame:
    """best_configs' rows for one GPU and dtype."""
    sql = (
        "SELECT r.* FROM (SELECT s.measurement_id, ROW_NUMBER() OVER (PARTITION BY s.dtype, s.m, s.n, s.k, "
        "s.variant ORDER BY s.ms, s.measurement_id) AS rn FROM shape_best s "
        f"JOIN environments e ON e.id = s.environment_id WHERE {_FILTER}) b "
        "JOIN results r ON r.id = b.measurement_id WHERE b.rn = 1"
    )
    return pd.read_sql_query(text(sql), conn, params={"gpu": gpu_name, "dtype": dtype})


def _pairs(table: str, partition: str, is_base: str, columns: str) -> str:
    """db/views.py's one-pass pairing (the best base row right before the best other row), over a summary."""
    sign = f"CASE WHEN {is_base} THEN -1 ELSE 1 END"
    return (
        f"SELECT {columns}, s.measurement_id AS id, LAG(-{sign} * s.measurement_id) OVER w AS base_id "
        f"FROM {table} s JOIN environments e ON e.id = s.environment_id WHERE {_FILTER} "
        f"WINDOW w AS (PARTITION BY {partition} ORDER BY {sign}, {sign} * s.ms, {sign} * s.measurement_id)"
    )


def splitk_speedup(conn: Connection, *, gpu_name: str, dtype: str) -> pd.DataFrame:
    passed = _pairs(
        "split_best",
        "s.dtype, s.m, s.n, s.k, s.block_m, s.block_n",
        "s.is_split = 0",
        "e.gpu_name, s.dtype, s.m, s.n, s.k, s.block_m, s.block_n, s.is_split",
    )
    sql = (
        "SELECT p.gpu_name, p.dtype, p.m, p.n, p.k, p.block_m, p.block_n, u.tiles, eu.sm_count, "
        "u.tiles_per_sm, "
        "u.ms AS unsplit_ms, u.variant AS unsplit_variant, s.ms AS split_ms, s.split_k AS best_split_k, "
        "s.variant AS best_split_variant, u.ms / NULLIF(s.ms, 0) AS speedup "
        f"FROM ({passed}) p JOIN measurements u ON u.id = p.base_id JOIN measurements s ON s.id = p.id "
        "JOIN environments eu ON eu.id = u.environment_id WHERE p.is_split = 1 AND p.base_id > 0"
    )
    return pd.read_sql_query(text(sql), conn, params={"gpu": gpu_name, "dtype": dtype})


def vs_cublas(conn: Connection, *, gpu_name: str, dtype: str) -> pd.DataFrame:
    passed = _pairs(
        "shape_best",
        "s.dtype, s.m, s.n, s.k",
        "s.variant <> 'cublas'",
        "e.gpu_name, s.dtype, s.m, s.n, s.k, s.variant",
    )
    sql = (
        "SELECT p.gpu_name, p.dtype, p.m, p.n, p.k, t.ms AS triton_ms, t.variant AS triton_variant, "
        "t.config_key AS triton_config_key, t.tflops AS triton_tflops, c.ms AS cublas_ms, "
        "c.tflops AS cublas_tflops, c.ms / NULLIF(t.ms, 0) AS ratio "
        f"FROM ({passed}) p JOIN measurements t ON t.id = p.base_id JOIN measurements c ON c.id = p.id "
        "WHERE p.variant = 'cublas' AND p.base_id > 0"
    )
    return pd.read_sql_query(text(sql), conn, params={"gpu": gpu_name, "dtype": dtype})
