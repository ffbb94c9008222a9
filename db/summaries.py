"""Summaries that every writer of measurements keeps: `shape_best` and `split_best` (db.models), which
the views best_configs, vs_cublas and splitk_speedup read (db.views VIEWS_0003, revision 0003), and
`gpu_best`, `shape_stats`, `variant_stats`, `grouping_best` and `sweep_counts` (revision 0004), which
the best_configs and grouping_effect views (VIEWS_0004; from revision 0005 gpu_best holds a copy of
each winning row and best_configs reads it alone) and summary, filter_options, environments, accuracy
and sweeps (db.queries) read.

Why: those views ranked every ok measurement of a GPU and dtype (0.8-1.0 s each on 1M rows, ten
times that at 10M). Their answers only need the best row of small groups, and one flush of the
driver touches a handful of shapes, so the writer recomputes the groups it touched, in its own
transaction: recomputing (not min-merging) keeps them right when an upsert makes the best row
slower or no longer ok. Revision 0003 backfills them from the measurements already stored.

Every sweep's rows are kept as runs of their points (revision 0006); the summaries read the newest run
of each point (latest = 1), so a newer slower measurement of a point displaces an older faster one.

Each group is recomputed from an exact range of ix_measurements_view (environment, status, latest,
dtype, variant, m, n, k): shape_best per (dtype, m, n, k, variant) with ORDER BY ms, id LIMIT 1;
split_best per (dtype, m, n, k) over the variants that shape_best lists for that shape (the
variants with an ok row), so the index is sought per variant instead of scanned across variants.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, text

from db.models import GPU_BEST_COPIED, GPU_BEST_KEY
from db.splitk_rule import IS_SPLIT, PAIRED_VARIANT
from db.views import VIEWS_0002

# (dtype, m, n, k, variant): one shape_best group of an environment.
Group = tuple[str, int, int, int, str]
# (code_version, dtype, m, n, k, variant): the points of a group written by one code version.
Point = tuple[str, str, int, int, int, str]

_OK = "status = 'ok' AND latest = 1 AND ms IS NOT NULL"
_SHAPE = "environment_id = :e AND dtype = :d AND m = :m AND n = :n AND k = :k"

_DELETE_SHAPE_BEST = text(f"DELETE FROM shape_best WHERE {_SHAPE} AND variant = :v")
_FILL_SHAPE_BEST = text(
    "INSERT INTO shape_best (environment_id, dtype, m, n, k, variant, measurement_id, ms) "
    "SELECT environment_id, dtype, m, n, k, variant, id, ms FROM measurements "
    f"WHERE {_SHAPE} AND variant = :v AND {_OK} ORDER BY ms, id LIMIT 1"
)
_DELETE_SPLIT_BEST = text(f"DELETE FROM split_best WHERE {_SHAPE}")
# The best row of each side of split-K (db.splitk_rule: is_split, and the variants with a side). The
# variants come from shape_best (refreshed first): those with an ok row of the shape.
_SPLIT_COPIED = "split_k, variant, tiles, tiles_per_sm"  # revision 0005: what splitk_speedup shows
_SPLIT_BEST = "environment_id, dtype, m, n, k, block_m, block_n, is_split, measurement_id, ms"


def _fill_split_best(where: str, partition: str) -> str:
    """split_best's rows from the measurements `where` selects: the best (ms, then id) per `partition`,
    block shape and side."""
    return (
        f"INSERT INTO split_best ({_SPLIT_BEST}, {_SPLIT_COPIED}) SELECT environment_id, dtype, m, n, k, "
        f"block_m, block_n, is_split, id, ms, {_SPLIT_COPIED} FROM (SELECT environment_id, dtype, m, n, k, "
        f"block_m, block_n, {IS_SPLIT} AS is_split, id, ms, {_SPLIT_COPIED}, ROW_NUMBER() OVER (PARTITION BY "
        f"{partition}block_m, block_n, {IS_SPLIT} ORDER BY ms, id) AS rn FROM measurements WHERE {where}) x "
        "WHERE rn = 1"
    )


_SHAPE_VARIANTS = f"SELECT variant FROM shape_best WHERE {_SHAPE} AND {PAIRED_VARIANT}"
_FILL_SPLIT_BEST = text(_fill_split_best(f"{_SHAPE} AND {_OK} AND variant IN ({_SHAPE_VARIANTS})", ""))

# ---- revision 0004 ----
# shape_stats per group and status: counts and the accuracy aggregates (db.queries.accuracy).
_STATS = "n_rows, rel_err_max, rel_err_sum, rel_err_n, nondet_max, nondet_sq_per_k_max, n_nondet"
# Squared over K: max(x^2 / k) = max(x / sqrt(k))^2, and SQLite may lack SQRT.
_MEASURED_STATS = (
    "COUNT(*), MAX(rel_err), SUM(rel_err), COUNT(rel_err), MAX(nondeterminism), "
    "MAX(nondeterminism * nondeterminism / k), SUM(CASE WHEN nondeterminism > 0 THEN 1 ELSE 0 END)"
)
_STATS_KEY = "environment_id, dtype, variant, m, n, k, status"
_DELETE_SHAPE_STATS = text(f"DELETE FROM shape_stats WHERE {_SHAPE} AND variant = :v")
_FILL_SHAPE_STATS = text(
    f"INSERT INTO shape_stats ({_STATS_KEY}, {_STATS}) SELECT {_STATS_KEY}, {_MEASURED_STATS} "
    f"FROM measurements WHERE {_SHAPE} AND variant = :v AND latest = 1 GROUP BY {_STATS_KEY}"
)
# variant_stats per (environment, dtype, variant, status) from its shapes' shape_stats (about 1,000
# shapes x a few statuses: the variant's 10^5 measurements are not read again).
_VARIANT = "environment_id = :e AND dtype = :d AND variant = :v"
_VARIANT_KEY = "environment_id, dtype, variant, status"
_COMBINED_STATS = (
    "SUM(n_rows), MAX(rel_err_max), SUM(rel_err_sum), SUM(rel_err_n), MAX(nondet_max), "
    "MAX(nondet_sq_per_k_max), SUM(n_nondet)"
)
_DELETE_VARIANT_STATS = text(f"DELETE FROM variant_stats WHERE {_VARIANT}")
_FILL_VARIANT_STATS = text(
    f"INSERT INTO variant_stats ({_VARIANT_KEY}, m_min, m_max, n_min, n_max, k_min, k_max, {_STATS}) "
    f"SELECT {_VARIANT_KEY}, MIN(m), MAX(m), MIN(n), MAX(n), MIN(k), MAX(k), {_COMBINED_STATS} "
    f"FROM shape_stats WHERE {_VARIANT} GROUP BY {_VARIANT_KEY}"
)
# grouping_best: the grouping_effect view's rows of one GPU model, dtype, shape and variant, computed
# by revision 0002's SQL of that view (db.views VIEWS_0002) over every environment of the GPU.
GROUPING_COLUMNS = (
    "gpu_name, dtype, m, n, k, variant, block_m, block_n, block_k, split_k, num_warps, num_stages, "
    "group_m, ms, ms_group1, operand_bytes, l2_bytes"
)
_GPU_GROUP = "gpu_name = :g AND dtype = :d AND m = :m AND n = :n AND k = :k AND variant = :v"
_DELETE_GROUPING = text(f"DELETE FROM grouping_best WHERE {_GPU_GROUP}")
_FILL_GROUPING = text(
    f"INSERT INTO grouping_best ({GROUPING_COLUMNS}) SELECT {GROUPING_COLUMNS} "
    f"FROM ({VIEWS_0002['grouping_effect']}) x WHERE {_GPU_GROUP}"
)

# gpu_best: per GPU model, the best of its environments' shape_best rows (lowest ms, then id), which is
# the best over all its rows: what best_configs ranked shape_best for on every read. It keeps a copy of
# the winning row (revision 0005), which refresh re-copies whenever a write touches the group.
_GPU_BEST = ", ".join(("gpu_name", *GPU_BEST_KEY, "measurement_id", *GPU_BEST_COPIED))
_WINNER = ", ".join(
    ("e.gpu_name", *(f"r.{c}" for c in GPU_BEST_KEY), "r.id", *(f"r.{c}" for c in GPU_BEST_COPIED))
)
_WINNER_FROM = "measurements r JOIN environments e ON e.id = r.environment_id"
_DELETE_GPU_BEST = text(f"DELETE FROM gpu_best WHERE {_GPU_GROUP}")
_FILL_GPU_BEST = text(
    f"INSERT INTO gpu_best ({_GPU_BEST}) SELECT {_WINNER} FROM {_WINNER_FROM} WHERE r.id = ("
    "SELECT s.measurement_id FROM shape_best s JOIN environments se ON se.id = s.environment_id "
    "WHERE se.gpu_name = :g AND s.dtype = :d AND s.m = :m AND s.n = :n AND s.k = :k AND s.variant = :v "
    "ORDER BY s.ms, s.measurement_id LIMIT 1)"
)

# sweep_counts: per sweep, its rows (db.queries.sweeps). Every run's rows are kept (revision 0006), so a
# write changes the count of the sweep that writes only: the writers mark it (mark_sweeps) and refresh
# recounts the marked ones from the sweep_id index (up to 25k rows).
_MARK_SWEEPS = text(
    "INSERT INTO sweep_counts (sweep_id, n_rows, stale) VALUES (:s, 0, 1) "
    "ON CONFLICT (sweep_id) DO UPDATE SET stale = 1"
)
_RECOUNT_SWEEPS = text(
    "UPDATE sweep_counts SET n_rows = (SELECT COUNT(*) FROM measurements m "
    "WHERE m.sweep_id = sweep_counts.sweep_id), stale = 0 WHERE stale = 1"
)

# The whole tables from every measurement: one window pass each (revision 0003's backfill, whose
# frozen copy is in the revision).
_REBUILD = (
    "INSERT INTO shape_best (environment_id, dtype, m, n, k, variant, measurement_id, ms) "
    "SELECT environment_id, dtype, m, n, k, variant, id, ms FROM (SELECT environment_id, dtype, m, n, k, "
    "variant, id, ms, ROW_NUMBER() OVER (PARTITION BY environment_id, dtype, m, n, k, variant "
    f"ORDER BY ms, id) AS rn FROM measurements WHERE {_OK}) x WHERE rn = 1",
    _fill_split_best(f"{_OK} AND {PAIRED_VARIANT}", "environment_id, dtype, m, n, k, "),
    f"INSERT INTO shape_stats ({_STATS_KEY}, {_STATS}) SELECT {_STATS_KEY}, {_MEASURED_STATS} "
    f"FROM measurements WHERE latest = 1 GROUP BY {_STATS_KEY}",
    f"INSERT INTO variant_stats ({_VARIANT_KEY}, m_min, m_max, n_min, n_max, k_min, k_max, {_STATS}) "
    f"SELECT {_VARIANT_KEY}, MIN(m), MAX(m), MIN(n), MAX(n), MIN(k), MAX(k), {_COMBINED_STATS} "
    f"FROM shape_stats GROUP BY {_VARIANT_KEY}",
    f"INSERT INTO grouping_best ({GROUPING_COLUMNS}) SELECT {GROUPING_COLUMNS} "
    f"FROM ({VIEWS_0002['grouping_effect']}) x",
    "INSERT INTO sweep_counts (sweep_id, n_rows, stale) SELECT sweep_id, COUNT(*), 0 FROM measurements "
    "WHERE sweep_id IS NOT NULL GROUP BY sweep_id",
    f"INSERT INTO gpu_best ({_GPU_BEST}) SELECT {_WINNER} FROM (SELECT s.measurement_id, ROW_NUMBER() OVER ("
    "PARTITION BY e.gpu_name, s.dtype, s.m, s.n, s.k, s.variant ORDER BY s.ms, s.measurement_id) AS rn "
    "FROM shape_best s JOIN environments e ON e.id = s.environment_id) x "
    "JOIN measurements r ON r.id = x.measurement_id JOIN environments e ON e.id = r.environment_id "
    "WHERE x.rn = 1",
)
TABLES = (
    "shape_best", "split_best", "shape_stats", "variant_stats", "grouping_best", "sweep_counts", "gpu_best",
)  # fmt: skip


def rebuild(conn: Connection) -> None:
    """Every summary from scratch: after a bulk load that bypassed db.writes (benchmarks/db_views.py's
    fill)."""
    for table in TABLES:
        conn.execute(text(f"DELETE FROM {table}"))
    for fill in _REBUILD:
        conn.execute(text(fill))


def mark_sweeps(conn: Connection, sweep_ids: Iterable[int]) -> None:
    """Mark for refresh's recount the sweeps whose rows a write in this transaction adds or changes."""
    params = [{"s": int(s)} for s in sorted(set(sweep_ids))]
    if params:
        conn.execute(_MARK_SWEEPS, params)


def refresh(conn: Connection, environment_id: int, groups: Iterable[Group]) -> None:
    """Recompute the summary rows of these (dtype, m, n, k, variant) groups of one environment.

    Call it in the transaction that wrote their measurements, after the write. Each statement runs
    for all groups, shapes or variants at once (executemany: psycopg pipelines them).
    """
    groups = sorted(set(groups))
    if not groups:
        return
    per_group = [{"e": environment_id, "d": d, "m": m, "n": n, "k": k, "v": v} for d, m, n, k, v in groups]
    conn.execute(_DELETE_SHAPE_BEST, per_group)
    conn.execute(_FILL_SHAPE_BEST, per_group)
    gpu = conn.scalar(text("SELECT gpu_name FROM environments WHERE id = :e"), {"e": environment_id})
    per_gpu_group = [{**p, "g": gpu} for p in per_group]
    conn.execute(_DELETE_GPU_BEST, per_gpu_group)
    conn.execute(_FILL_GPU_BEST, per_gpu_group)
    shapes = sorted({(d, m, n, k) for d, m, n, k, v in groups if v != "cublas"})
    if shapes:
        per_shape = [{"e": environment_id, "d": d, "m": m, "n": n, "k": k} for d, m, n, k in shapes]
        conn.execute(_DELETE_SPLIT_BEST, per_shape)
        conn.execute(_FILL_SPLIT_BEST, per_shape)
    conn.execute(_DELETE_SHAPE_STATS, per_group)
    conn.execute(_FILL_SHAPE_STATS, per_group)
    per_variant = [{"e": environment_id, "d": d, "v": v} for d, v in sorted({(g[0], g[4]) for g in groups})]
    conn.execute(_DELETE_VARIANT_STATS, per_variant)
    conn.execute(_FILL_VARIANT_STATS, per_variant)
    conn.execute(_DELETE_GROUPING, per_gpu_group)
    conn.execute(_FILL_GROUPING, per_gpu_group)
    conn.execute(_RECOUNT_SWEEPS)
