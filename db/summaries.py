"""Per-shape summaries that every writer of measurements keeps: `shape_best` and `split_best`
(db.models), which the views best_configs, vs_cublas and splitk_speedup read (db.views VIEWS_0003).

Why: those views ranked every ok measurement of a GPU and dtype (0.8-1.0 s each on 1M rows, ten
times that at 10M). Their answers only need the best row of small groups, and one flush of the
driver touches a handful of shapes, so the writer recomputes the groups it touched, in its own
transaction: recomputing (not min-merging) keeps them right when an upsert makes the best row
slower or no longer ok. Revision 0003 backfills them from the measurements already stored.

Each group is recomputed from an exact range of ix_measurements_view (environment, status, dtype,
variant, m, n, k): shape_best per (dtype, m, n, k, variant) with ORDER BY ms, id LIMIT 1;
split_best per (dtype, m, n, k) over the variants that shape_best lists for that shape (the
variants with an ok row), so the index is sought per variant instead of scanned across variants.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, text

# (dtype, m, n, k, variant): one shape_best group of an environment.
Group = tuple[str, int, int, int, str]

_OK = "status = 'ok' AND ms IS NOT NULL"
_SHAPE = "environment_id = :e AND dtype = :d AND m = :m AND n = :n AND k = :k"

_DELETE_SHAPE_BEST = text(f"DELETE FROM shape_best WHERE {_SHAPE} AND variant = :v")
_FILL_SHAPE_BEST = text(
    "INSERT INTO shape_best (environment_id, dtype, m, n, k, variant, measurement_id, ms) "
    "SELECT environment_id, dtype, m, n, k, variant, id, ms FROM measurements "
    f"WHERE {_SHAPE} AND variant = :v AND {_OK} ORDER BY ms, id LIMIT 1"
)
_DELETE_SPLIT_BEST = text(f"DELETE FROM split_best WHERE {_SHAPE}")
# is_split 1 for any split_k but 1, as the view it replaces pairs split_k = 1 against all others. The
# variants come from shape_best (refreshed first): those with an ok row of the shape.
_FILL_SPLIT_BEST = text(
    "INSERT INTO split_best (environment_id, dtype, m, n, k, block_m, block_n, is_split, measurement_id, ms) "
    "SELECT environment_id, dtype, m, n, k, block_m, block_n, is_split, id, ms FROM ("
    "SELECT environment_id, dtype, m, n, k, block_m, block_n, "
    "CASE WHEN split_k = 1 THEN 0 ELSE 1 END AS is_split, id, ms, ROW_NUMBER() OVER ("
    "PARTITION BY block_m, block_n, CASE WHEN split_k = 1 THEN 0 ELSE 1 END ORDER BY ms, id) AS rn "
    f"FROM measurements WHERE {_SHAPE} AND {_OK} AND variant IN "
    f"(SELECT variant FROM shape_best WHERE {_SHAPE} AND variant <> 'cublas')) x WHERE rn = 1"
)

_SPLIT = "CASE WHEN split_k = 1 THEN 0 ELSE 1 END"
# The whole tables from every measurement: one window pass each (revision 0003's backfill, whose
# frozen copy is in the revision).
_REBUILD = (
    "INSERT INTO shape_best (environment_id, dtype, m, n, k, variant, measurement_id, ms) "
    "SELECT environment_id, dtype, m, n, k, variant, id, ms FROM (SELECT environment_id, dtype, m, n, k, "
    "variant, id, ms, ROW_NUMBER() OVER (PARTITION BY environment_id, dtype, m, n, k, variant "
    f"ORDER BY ms, id) AS rn FROM measurements WHERE {_OK}) x WHERE rn = 1",
    "INSERT INTO split_best (environment_id, dtype, m, n, k, block_m, block_n, is_split, measurement_id, ms) "
    "SELECT environment_id, dtype, m, n, k, block_m, block_n, is_split, id, ms FROM (SELECT environment_id, "
    f"dtype, m, n, k, block_m, block_n, {_SPLIT} AS is_split, id, ms, ROW_NUMBER() OVER (PARTITION BY "
    f"environment_id, dtype, m, n, k, block_m, block_n, {_SPLIT} ORDER BY ms, id) AS rn "
    f"FROM measurements WHERE {_OK} AND variant <> 'cublas') x WHERE rn = 1",
)


def rebuild(conn: Connection) -> None:
    """Both tables from scratch: after a bulk load that bypassed db.writes (bench/db_views.py's fill)."""
    conn.execute(text("DELETE FROM shape_best"))
    conn.execute(text("DELETE FROM split_best"))
    for fill in _REBUILD:
        conn.execute(text(fill))


def refresh(conn: Connection, environment_id: int, groups: Iterable[Group]) -> None:
    """Recompute the summary rows of these (dtype, m, n, k, variant) groups of one environment.

    Call it in the transaction that wrote their measurements, after the write. Four statements,
    each run for all groups or shapes at once (executemany: psycopg pipelines them).
    """
    groups = sorted(set(groups))
    if not groups:
        return
    per_group = [{"e": environment_id, "d": d, "m": m, "n": n, "k": k, "v": v} for d, m, n, k, v in groups]
    conn.execute(_DELETE_SHAPE_BEST, per_group)
    conn.execute(_FILL_SHAPE_BEST, per_group)
    shapes = sorted({(d, m, n, k) for d, m, n, k, v in groups if v != "cublas"})
    if shapes:
        per_shape = [{"e": environment_id, "d": d, "m": m, "n": n, "k": k} for d, m, n, k in shapes]
        conn.execute(_DELETE_SPLIT_BEST, per_shape)
        conn.execute(_FILL_SPLIT_BEST, per_shape)
