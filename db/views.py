"""The SQL views of the design, as plain SQL that runs unchanged on SQLite >= 3.35 and PostgreSQL >= 13.

They are the query surface for sqlite3, pandas and the dashboard. A migration creates them from
the constants here; the SQL of a released revision is frozen: changing a view means a new constant
(`VIEWS_0003`, ...) and a new migration that drops and recreates it, never an edit of `VIEWS_0002`.
Revision 0001 keeps its own views as text, so downgrading to it restores them exactly.

Portable SQL only: window functions, CTE-free subqueries (PostgreSQL materialises a CTE used
twice, which stops the dashboard's gpu/dtype filter from reaching the table), `NULLIF` around
every divisor (PostgreSQL raises on division by zero where SQLite returns NULL). All views but
`results` use `ok` rows with a time; ties go to the lower ms, then the lower id.
"""

from __future__ import annotations

from db.splitk_rule import IS_SPLIT, ON_A_SIDE

# Measurement columns as of revision 0002, in MeasurementRecord's field order (0002 added the
# stream and host times, the timing regime, and the energy columns).
MEASUREMENT_COLUMNS: tuple[str, ...] = (
    "code_version",
    "variant",
    "dtype",
    "m",
    "n",
    "k",
    "config_key",
    "block_m",
    "block_n",
    "block_k",
    "group_m",
    "split_k",
    "num_warps",
    "num_stages",
    "input_precision",
    "status",
    "error",
    "ms",
    "ms_p20",
    "ms_p80",
    "reps",
    "stream_ms",
    "host_ms",
    "timing_regime",
    "tflops",
    "rel_err",
    "nondeterminism",
    "tiles",
    "programs",
    "tiles_per_sm",
    "waves",
    "occupancy",
    "operand_bytes",
    "registers",
    "shared_mem",
    "compile_s",
    "sm_clock_mhz",
    "temperature_c",
    "throttled",
    "throttle_reasons",
    "joules_per_launch",
    "avg_watts",
    "power_limit_w",
    "worker",
    "gpu_uuid",
    "backend",
    "created_at",
    "updated_at",
)
ENVIRONMENT_COLUMNS: tuple[str, ...] = (
    "gpu_name",
    "sm_count",
    "l2_bytes",
    "host",
    "peak_tflops",
    "peak_gbps",
)
RESULTS_COLUMNS: tuple[str, ...] = (
    "id",
    "environment_id",
    "sweep_id",
    *ENVIRONMENT_COLUMNS,
    *MEASUREMENT_COLUMNS,
)
# Revision 0007 adds eager_ms (db.records.eager_ms) after host_ms; the constants above stay revision
# 0002's, as the frozen SQL of revisions 0002-0006 reads them.
MEASUREMENT_COLUMNS_0007: tuple[str, ...] = tuple(
    name for c in MEASUREMENT_COLUMNS for name in ((c, "eager_ms") if c == "host_ms" else (c,))
)
RESULTS_COLUMNS_0007: tuple[str, ...] = (
    "id",
    "environment_id",
    "sweep_id",
    *ENVIRONMENT_COLUMNS,
    *MEASUREMENT_COLUMNS_0007,
)
SHAPE = ("gpu_name", "dtype", "m", "n", "k")
SPLITK_COLUMNS: tuple[str, ...] = (
    *SHAPE,
    "block_m",
    "block_n",
    "tiles",
    "sm_count",
    "tiles_per_sm",
    "unsplit_ms",
    "unsplit_variant",
    "split_ms",
    "best_split_k",
    "best_split_variant",
    "speedup",
)
GROUP_CONFIG = ("variant", "block_m", "block_n", "block_k", "split_k", "num_warps", "num_stages")
GROUPING_COLUMNS: tuple[str, ...] = (
    *SHAPE,
    *GROUP_CONFIG,
    "group_m",
    "operand_bytes",
    "l2_bytes",
    "operand_to_l2",
    "ms",
    "ms_group1",
    "speedup",
)
CUBLAS_COLUMNS: tuple[str, ...] = (
    *SHAPE,
    "triton_ms",
    "triton_variant",
    "triton_config_key",
    "triton_tflops",
    "cublas_ms",
    "cublas_tflops",
    "ratio",
)
# run_results (revision 0006): every run's rows, results' columns and `latest` (1: the newest run of
# its point, the row `results` shows).
RUN_RESULTS_COLUMNS: tuple[str, ...] = (*RESULTS_COLUMNS_0007, "latest")
VIEW_COLUMNS: dict[str, tuple[str, ...]] = {
    "results": RESULTS_COLUMNS_0007,
    "run_results": RUN_RESULTS_COLUMNS,
    "best_configs": RESULTS_COLUMNS_0007,
    "splitk_speedup": SPLITK_COLUMNS,
    "grouping_effect": GROUPING_COLUMNS,
    "vs_cublas": CUBLAS_COLUMNS,
}
VIEW_NAMES: tuple[str, ...] = tuple(VIEW_COLUMNS)

# How each column reads back into pandas, so frames look the same from either backend (SQLite
# returns timestamps as text and booleans as 0/1). Columns not named here are text.
_KINDS = {
    "int": "id environment_id sweep_id latest sm_count l2_bytes memory_bytes m n k block_m block_n block_k "
    "group_m split_k num_warps num_stages reps tiles programs occupancy operand_bytes registers shared_mem "
    "sm_clock_mhz temperature_c best_split_k n_points n_ok n_failed n_measurements n_checked n_wrong "
    "n_nondeterministic",
    "float": "peak_tflops peak_gbps ms ms_p20 ms_p80 stream_ms host_ms eager_ms joules_per_launch avg_watts "
    "power_limit_w tflops rel_err nondeterminism tiles_per_sm waves "
    "compile_s unsplit_ms split_ms speedup operand_to_l2 ms_group1 triton_ms triton_tflops cublas_ms "
    "cublas_tflops ratio rel_err_max rel_err_mean nondeterminism_max",
    "bool": "throttled",
    "time": "created_at updated_at started_at finished_at",
}
COLUMN_KINDS: dict[str, str] = {c: kind for kind, names in _KINDS.items() for c in names.split()}


def _cols(columns: tuple[str, ...], alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + c for c in columns)


_OK = "status = 'ok' AND ms IS NOT NULL"


def _with_environment(measurement_columns: tuple[str, ...], *, latest: bool = False, where: str = "") -> str:
    """Each measurement's ids, its environment's columns and these of its columns (then `latest` where
    asked): the results views' SQL of every revision."""
    shown = _cols(measurement_columns, "m") + (", m.latest" if latest else "")
    return (
        f"SELECT {_cols(('id', 'environment_id', 'sweep_id'), 'm')}, {_cols(ENVIRONMENT_COLUMNS, 'e')}, "
        f"{shown} FROM measurements m JOIN environments e ON e.id = m.environment_id{where}"
    )


_RESULTS = _with_environment(MEASUREMENT_COLUMNS)

# Each view answers the dashboard's query (one GPU and dtype) from one subquery of `results` that the
# filter reaches (SQLite pushes a WHERE term down one subquery level, into a window subquery only
# when it names PARTITION BY columns), reading ix_measurements_view alone, then fetches the few
# winning rows by id. Timings, before and after, on 1M rows: docs/results/db_views.md.

# best_configs: rank narrow rows, then fetch the whole row of each winner (ranking all 51 columns
# of the 150k ok rows of one GPU and dtype took 0.93 s of SQL, this 0.42 s).
_BEST_KEY = (*SHAPE, "variant")
_BEST_CONFIGS = (
    f"SELECT {', '.join(f'b.{c}' if c in (*_BEST_KEY, 'id') else f'r.{c}' for c in RESULTS_COLUMNS)} "
    f"FROM (SELECT id, {_cols(_BEST_KEY)}, "
    f"ROW_NUMBER() OVER (PARTITION BY {_cols(_BEST_KEY)} ORDER BY ms, id) AS rn FROM results WHERE {_OK}) b "
    "JOIN results r ON r.id = b.id WHERE b.rn = 1"
)


def _pairs(partition: tuple[str, ...], is_base: str, columns: tuple[str, ...], where: str = "") -> str:
    """One window pass that puts the best base row right before the best other row of each partition.

    Base rows (`is_base` true) sort slowest-first, the others fastest-first, so the first non-base
    row is the fastest one (lowest ms, then lowest id) and the row before it the fastest base row
    (lowest ms, then lowest id). `base_id` is the previous row's id, negated when that row is not a
    base row: the pair is the non-base row whose base_id > 0. One LAG, one sort: joining two ranked
    subqueries instead made SQLite nest-loop 6k x 6k rows (16 s for splitk_speedup on 1M rows),
    and FIRST_VALUE per column cost 0.1 s each.
    """
    sign = f"CASE WHEN {is_base} THEN -1 ELSE 1 END"
    return (
        f"SELECT {_cols(columns)}, LAG(-{sign} * id) OVER w AS base_id FROM results "
        f"WHERE {_OK}{f' AND {where}' if where else ''} "
        f"WINDOW w AS (PARTITION BY {_cols(partition)} ORDER BY {sign}, {sign} * ms, {sign} * id)"
    )


# splitk_speedup: per block shape, the best unsplit row (split_k = 1, any variant but cuBLAS) and the
# best split row. tiles, tiles_per_sm, sm_count are the unsplit row's (farm.metrics computed them).
_SPLIT_KEY = (*SHAPE, "block_m", "block_n")
_SPLIT_PASS = _pairs(
    _SPLIT_KEY, "split_k = 1", (*_SPLIT_KEY, "split_k", "variant", "ms"), "variant <> 'cublas'"
)
_SPLITK = (
    f"SELECT {_cols(_SPLIT_KEY, 'p')}, u.tiles, u.sm_count, u.tiles_per_sm, u.ms AS unsplit_ms, "
    "u.variant AS unsplit_variant, p.ms AS split_ms, p.split_k AS best_split_k, "
    "p.variant AS best_split_variant, "
    f"u.ms / NULLIF(p.ms, 0) AS speedup FROM ({_SPLIT_PASS}) p JOIN results u ON u.id = p.base_id "
    "WHERE p.split_k > 1 AND p.base_id > 0"
)

# vs_cublas: per shape, the best Triton row (any variant but cuBLAS) and the best cuBLAS row.
_CUBLAS_PASS = _pairs(SHAPE, "variant <> 'cublas'", (*SHAPE, "id", "variant", "ms"))
_VS_CUBLAS = (
    f"SELECT {_cols(SHAPE, 'p')}, t.ms AS triton_ms, t.variant AS triton_variant, "
    "t.config_key AS triton_config_key, t.tflops AS triton_tflops, "
    "p.ms AS cublas_ms, c.tflops AS cublas_tflops, "
    f"p.ms / NULLIF(t.ms, 0) AS ratio FROM ({_CUBLAS_PASS}) p JOIN results t ON t.id = p.base_id "
    "JOIN measurements c ON c.id = p.id WHERE p.variant = 'cublas' AND p.base_id > 0"
)

# grouping_effect: the best time of each group_m > 1 against the best group_m = 1 time with all else
# equal, looked up per grouped row in ix_measurements_view (0.11 s; a join of two aggregates or a
# window over every row of the GPU and dtype took 0.85 s: most rows have group_m = 1).
_GROUP_KEY = (*SHAPE, *GROUP_CONFIG)
_GROUPED = (
    f"SELECT {_cols(_GROUP_KEY)}, group_m, MIN(ms) AS ms, MAX(operand_bytes) AS operand_bytes, "
    f"MAX(l2_bytes) AS l2_bytes FROM results WHERE {_OK} AND group_m > 1 "
    f"GROUP BY {_cols(_GROUP_KEY)}, group_m"
)
_GROUP1 = (
    f"SELECT MIN(b.ms) FROM results b WHERE {' AND '.join(f'b.{c} = g.{c}' for c in _GROUP_KEY)} "
    "AND b.group_m = 1 AND b.status = 'ok'"
)
_GROUPING = (
    f"SELECT {_cols(_GROUP_KEY)}, group_m, operand_bytes, l2_bytes, "
    "CAST(operand_bytes AS DOUBLE PRECISION) / NULLIF(l2_bytes, 0) AS operand_to_l2, "
    "ms, ms_group1, ms_group1 / NULLIF(ms, 0) AS speedup "
    f"FROM (SELECT g.*, ({_GROUP1}) AS ms_group1 FROM ({_GROUPED}) g) x WHERE ms_group1 IS NOT NULL"
)

# Revision 0002's views, in creation order (each may read the ones before it). Only `results` and
# `best_configs` differ from 0001's: they carry the new columns.
VIEWS_0002: dict[str, str] = {
    "results": _RESULTS,
    "best_configs": _BEST_CONFIGS,
    "splitk_speedup": _SPLITK,
    "grouping_effect": _GROUPING,
    "vs_cublas": _VS_CUBLAS,
}

# ---- revision 0003: best_configs, splitk_speedup and vs_cublas read the per-shape summaries ----
# shape_best and split_best (db.models, kept by db.summaries) hold the fastest ok row of each
# environment's group, so the same pairing pass runs over about one row per 10-100 measurements.
# The best over a GPU's environments of their bests (by ms, then id) is the best over all its rows:
# the columns and rows are those of VIEWS_0002's views (tests/db/test_summaries.py checks it).
_SUMMARY_SHAPE = ("e.gpu_name", "s.dtype", "s.m", "s.n", "s.k")
_FROM_SUMMARY = "{table} s JOIN environments e ON e.id = s.environment_id"

_BEST_CONFIGS_0003 = (
    f"SELECT {', '.join(f'b.{c}' if c in (*_BEST_KEY, 'id') else f'r.{c}' for c in RESULTS_COLUMNS)} "
    f"FROM (SELECT s.measurement_id AS id, {', '.join(_SUMMARY_SHAPE)}, s.variant, "
    f"ROW_NUMBER() OVER (PARTITION BY {', '.join(_SUMMARY_SHAPE)}, s.variant "
    f"ORDER BY s.ms, s.measurement_id) AS rn FROM {_FROM_SUMMARY.format(table='shape_best')}) b "
    "JOIN results r ON r.id = b.id WHERE b.rn = 1"
)


def _summary_pairs(table: str, partition: tuple[str, ...], is_base: str, columns: tuple[str, ...]) -> str:
    """_pairs over a summary table: its best base row right before its best other row."""
    sign = f"CASE WHEN {is_base} THEN -1 ELSE 1 END"
    return (
        f"SELECT {', '.join(columns)}, s.measurement_id AS id, s.ms, "
        f"LAG(-{sign} * s.measurement_id) OVER w AS base_id FROM {_FROM_SUMMARY.format(table=table)} "
        f"WINDOW w AS (PARTITION BY {', '.join(partition)} ORDER BY {sign}, {sign} * s.ms, "
        f"{sign} * s.measurement_id)"
    )


_SPLIT_PASS_0003 = _summary_pairs(
    "split_best",
    (*_SUMMARY_SHAPE, "s.block_m", "s.block_n"),
    "s.is_split = 0",
    (*_SUMMARY_SHAPE, "s.block_m", "s.block_n"),
)
_SPLITK_0003 = (
    f"SELECT {_cols(_SPLIT_KEY, 'p')}, u.tiles, u.sm_count, u.tiles_per_sm, u.ms AS unsplit_ms, "
    "u.variant AS unsplit_variant, p.ms AS split_ms, x.split_k AS best_split_k, "
    "x.variant AS best_split_variant, "
    f"u.ms / NULLIF(p.ms, 0) AS speedup FROM ({_SPLIT_PASS_0003}) p JOIN results u ON u.id = p.base_id "
    "JOIN measurements x ON x.id = p.id WHERE x.split_k > 1 AND p.base_id > 0"
)

_CUBLAS_PASS_0003 = _summary_pairs(
    "shape_best", _SUMMARY_SHAPE, "s.variant <> 'cublas'", (*_SUMMARY_SHAPE, "s.variant")
)
_VS_CUBLAS_0003 = (
    f"SELECT {_cols(SHAPE, 'p')}, t.ms AS triton_ms, t.variant AS triton_variant, "
    "t.config_key AS triton_config_key, t.tflops AS triton_tflops, "
    "p.ms AS cublas_ms, c.tflops AS cublas_tflops, "
    f"p.ms / NULLIF(t.ms, 0) AS ratio FROM ({_CUBLAS_PASS_0003}) p JOIN measurements t ON t.id = p.base_id "
    "JOIN measurements c ON c.id = p.id WHERE p.variant = 'cublas' AND p.base_id > 0"
)

# Revision 0003's views, in creation order: 0002's, with the three summary readers.
VIEWS_0003: dict[str, str] = {
    **VIEWS_0002,
    "best_configs": _BEST_CONFIGS_0003,
    "splitk_speedup": _SPLITK_0003,
    "vs_cublas": _VS_CUBLAS_0003,
}
# ---- revision 0004: best_configs reads gpu_best, grouping_effect grouping_best ----
# grouping_best (db.models, kept by db.summaries) holds the rows of VIEWS_0002's grouping_effect per GPU
# model: the view only adds the two computed columns, with the same expressions.
_GROUPING_0004 = (
    f"SELECT {_cols(_GROUP_KEY)}, group_m, operand_bytes, l2_bytes, "
    "CAST(operand_bytes AS DOUBLE PRECISION) / NULLIF(l2_bytes, 0) AS operand_to_l2, "
    "ms, ms_group1, ms_group1 / NULLIF(ms, 0) AS speedup FROM grouping_best"
)

# best_configs: gpu_best holds the winner per GPU model (the best of its environments' shape_best rows),
# so no ranking pass is left: the view fetches the winners' rows by id.
_BEST_CONFIGS_0004 = (
    f"SELECT {', '.join(f'b.{c}' if c in (*_BEST_KEY, 'id') else f'r.{c}' for c in RESULTS_COLUMNS)} "
    f"FROM (SELECT measurement_id AS id, {_cols(_BEST_KEY)} FROM gpu_best) b JOIN results r ON r.id = b.id"
)

# Revision 0004's views, in creation order: 0003's, with best_configs and grouping_effect reading
# their summaries.
VIEWS_0004: dict[str, str] = {
    **VIEWS_0003,
    "best_configs": _BEST_CONFIGS_0004,
    "grouping_effect": _GROUPING_0004,
}


# ---- revision 0005: best_configs reads gpu_best alone ----
# What splitk_speedup means, over every row (tests/db/test_summaries.py holds the view to it): per
# block shape, the best unsplit row against the best split row, the sides as db.splitk_rule names them
# (from 0005 no stream-K row is an unsplit baseline).
SPLITK_OVER_ROWS = (
    f"SELECT {_cols(_SPLIT_KEY, 'p')}, u.tiles, u.sm_count, u.tiles_per_sm, u.ms AS unsplit_ms, "
    "u.variant AS unsplit_variant, p.ms AS split_ms, p.split_k AS best_split_k, "
    "p.variant AS best_split_variant, u.ms / NULLIF(p.ms, 0) AS speedup FROM ("
    + _pairs(
        _SPLIT_KEY,
        f"({IS_SPLIT}) = 0",
        (*_SPLIT_KEY, "split_k", "variant", "ms", f"{IS_SPLIT} AS is_split"),
        ON_A_SIDE,
    )
    + ") p JOIN results u ON u.id = p.base_id WHERE p.is_split = 1 AND p.base_id > 0"
)


# gpu_best keeps a copy of the winning row (db.models GPU_BEST_COPIED): the environment's columns come
# from the few rows of environments, no measurement is fetched by id.
def _best_column(name: str) -> str:
    if name == "id":
        return "g.measurement_id AS id"
    return f"e.{name}" if name in ENVIRONMENT_COLUMNS and name != "gpu_name" else f"g.{name}"


_BEST_CONFIGS_0005 = (
    f"SELECT {', '.join(_best_column(c) for c in RESULTS_COLUMNS)} "
    "FROM gpu_best g JOIN environments e ON e.id = g.environment_id"
)

# splitk_speedup: split_best keeps the columns it shows (split_k, variant, tiles, tiles_per_sm), so the
# pairing pass carries the unsplit row's columns with LAG instead of fetching both rows by id (24,300 +
# 12,150 primary-key lookups into measurements at 10M, 0.38-0.6 s on PostgreSQL).
_SPLIT_SIGN = "CASE WHEN s.is_split = 0 THEN -1 ELSE 1 END"
_SPLIT_BASE = ("ms", "variant", "tiles", "tiles_per_sm")
_SPLIT_PASS_0005 = (
    f"SELECT {', '.join(_SUMMARY_SHAPE)}, s.block_m, s.block_n, s.split_k, s.variant, s.ms, "
    f"LAG(-{_SPLIT_SIGN} * s.measurement_id) OVER w AS base_id, "
    + "".join(f"LAG(s.{c}) OVER w AS base_{c}, " for c in _SPLIT_BASE)
    + f"LAG(e.sm_count) OVER w AS base_sm_count FROM {_FROM_SUMMARY.format(table='split_best')} "
    f"WINDOW w AS (PARTITION BY {', '.join(_SUMMARY_SHAPE)}, s.block_m, s.block_n ORDER BY {_SPLIT_SIGN}, "
    f"{_SPLIT_SIGN} * s.ms, {_SPLIT_SIGN} * s.measurement_id)"
)
_SPLITK_0005 = (
    f"SELECT {_cols(_SPLIT_KEY, 'p')}, p.base_tiles AS tiles, p.base_sm_count AS sm_count, "
    "p.base_tiles_per_sm AS tiles_per_sm, p.base_ms AS unsplit_ms, p.base_variant AS unsplit_variant, "
    "p.ms AS split_ms, p.split_k AS best_split_k, p.variant AS best_split_variant, "
    f"p.base_ms / NULLIF(p.ms, 0) AS speedup FROM ({_SPLIT_PASS_0005}) p "
    "WHERE p.split_k > 1 AND p.base_id > 0"
)

# Revision 0005's views, in creation order: 0004's, with best_configs reading gpu_best's copies and
# splitk_speedup split_best's. From 0005 split_best leaves the stream-K variants out (db.summaries):
# they store split_k = 1 but split K themselves, so "best unsplit" had been stream-K on every one of the
# demo's 12 split-K shapes below one tile per SM (its speedups 0.99-1.55 against 4.38-6.91 over tiled).
VIEWS_0005: dict[str, str] = {
    **VIEWS_0004,
    "best_configs": _BEST_CONFIGS_0005,
    "splitk_speedup": _SPLITK_0005,
}

# ---- revision 0006: every sweep's rows are kept as runs of their points ----
# `results` shows the newest run of each point (latest = 1, kept by db.writes and db.merge), so every view
# that reads it, and the summaries that db.summaries computes with them, answer as before: one row per
# point. `run_results` shows every run's rows, for a chosen sweep (db.queries results(sweep=...),
# compare_runs).
_RUN_RESULTS = _with_environment(MEASUREMENT_COLUMNS, latest=True)
_RESULTS_0006 = _RESULTS + " WHERE m.latest = 1"

# Revision 0006's views, in creation order: run_results after results (no view reads it).
VIEWS_0006: dict[str, str] = {
    "results": _RESULTS_0006,
    "run_results": _RUN_RESULTS,
    **{name: sql for name, sql in VIEWS_0005.items() if name != "results"},
}
# ---- revision 0007: eager_ms, what an eager caller waits for, stored beside ms ----
# results, run_results and best_configs show it after host_ms (gpu_best copies it as every measurement
# column); the others are 0006's.
_RESULTS_0007 = _with_environment(MEASUREMENT_COLUMNS_0007, where=" WHERE m.latest = 1")
_RUN_RESULTS_0007 = _with_environment(MEASUREMENT_COLUMNS_0007, latest=True)
_BEST_CONFIGS_0007 = (
    f"SELECT {', '.join(_best_column(c) for c in RESULTS_COLUMNS_0007)} "
    "FROM gpu_best g JOIN environments e ON e.id = g.environment_id"
)
VIEWS_0007: dict[str, str] = {
    **VIEWS_0006,
    "results": _RESULTS_0007,
    "run_results": _RUN_RESULTS_0007,
    "best_configs": _BEST_CONFIGS_0007,
}
# What the code at head creates (test-only later revisions drop and recreate these).
VIEWS_HEAD = VIEWS_0007
