"""Summaries for the dashboard's other questions: gpu_best, shape_stats, variant_stats, grouping_best,
sweep_counts.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

At 10M measurements, summary, filter_options, environments, accuracy and sweeps counted or aggregated
every row of the table or of a GPU and dtype (0.4-4.5 s each), and grouping_effect aggregated every ok
row of a GPU and dtype (2.6-4.5 s), and best_configs ranked the per-environment bests of revision 0003
(0.54-0.60 s on PostgreSQL). Five tables that every writer of measurements keeps
(db.summaries.refresh, in the write's transaction) answer them from a few hundred to a few ten
thousand rows:

- gpu_best: per (GPU model, dtype, m, n, k, variant) the best of its environments' shape_best rows,
  whose rows the best_configs view now fetches;
- shape_stats: per (environment, dtype, variant, m, n, k, status), the row count and the accuracy
  aggregates (what variant_stats is recomputed from when a write touches one shape);
- variant_stats: the same per (environment, dtype, variant, status), with the range of m, n, k;
- grouping_best: the grouping_effect view's rows per GPU model, which the view now reads;
- sweep_counts: per sweep, its rows (what `sweeps` counted with a pass over the sweep_id index).

Two indexes serve db.queries.results: ix_measurements_recent (environment, dtype, id) for an
environment's newest rows, ix_measurements_shape (environment, dtype, m, n, k, then the rest of the
point key and the status) for one shape and for a resume's done_keys, which it covers.

They are backfilled here from the rows already stored (the SQL below, frozen); a downgrade restores
revision 0003's best_configs and grouping_effect views and drops the tables and indexes (they hold
nothing the measurements do not).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.views import VIEWS_0002, VIEWS_0003, VIEWS_0004

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_STATS = "n_rows, rel_err_max, rel_err_sum, rel_err_n, nondet_max, nondet_sq_per_k_max, n_nondet"
_SHAPE_KEY = "environment_id, dtype, variant, m, n, k, status"
_VARIANT_KEY = "environment_id, dtype, variant, status"
_GROUPING = (
    "gpu_name, dtype, m, n, k, variant, block_m, block_n, block_k, split_k, num_warps, num_stages, "
    "group_m, ms, ms_group1, operand_bytes, l2_bytes"
)
BACKFILL = (
    f"INSERT INTO shape_stats ({_SHAPE_KEY}, {_STATS}) SELECT {_SHAPE_KEY}, COUNT(*), MAX(rel_err), "
    "SUM(rel_err), COUNT(rel_err), MAX(nondeterminism), MAX(nondeterminism * nondeterminism / k), "
    f"SUM(CASE WHEN nondeterminism > 0 THEN 1 ELSE 0 END) FROM measurements GROUP BY {_SHAPE_KEY}",
    f"INSERT INTO variant_stats ({_VARIANT_KEY}, m_min, m_max, n_min, n_max, k_min, k_max, {_STATS}) "
    f"SELECT {_VARIANT_KEY}, MIN(m), MAX(m), MIN(n), MAX(n), MIN(k), MAX(k), SUM(n_rows), MAX(rel_err_max), "
    "SUM(rel_err_sum), SUM(rel_err_n), MAX(nondet_max), MAX(nondet_sq_per_k_max), SUM(n_nondet) "
    f"FROM shape_stats GROUP BY {_VARIANT_KEY}",
    f"INSERT INTO grouping_best ({_GROUPING}) SELECT {_GROUPING} FROM ({VIEWS_0002['grouping_effect']}) x",
    "INSERT INTO sweep_counts (sweep_id, n_rows, stale) SELECT sweep_id, COUNT(*), 0 FROM measurements "
    "WHERE sweep_id IS NOT NULL GROUP BY sweep_id",
    "INSERT INTO gpu_best (gpu_name, dtype, m, n, k, variant, measurement_id, ms) "
    "SELECT gpu_name, dtype, m, n, k, variant, measurement_id, ms FROM (SELECT e.gpu_name, s.dtype, s.m, "
    "s.n, s.k, s.variant, s.measurement_id, s.ms, ROW_NUMBER() OVER (PARTITION BY e.gpu_name, s.dtype, "
    "s.m, s.n, s.k, s.variant ORDER BY s.ms, s.measurement_id) AS rn FROM shape_best s "
    "JOIN environments e ON e.id = s.environment_id) x WHERE rn = 1",
)
CHANGED_VIEWS = ("best_configs", "grouping_effect")


def _stats_columns() -> list[sa.Column]:
    return [
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.Column("rel_err_max", sa.Float(53), nullable=True),
        sa.Column("rel_err_sum", sa.Float(53), nullable=True),
        sa.Column("rel_err_n", sa.Integer(), nullable=False),
        sa.Column("nondet_max", sa.Float(53), nullable=True),
        sa.Column("nondet_sq_per_k_max", sa.Float(53), nullable=True),
        sa.Column("n_nondet", sa.Integer(), nullable=False),
    ]


def _variant_columns() -> list[sa.Column]:
    return [
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("dtype", sa.String(), nullable=False),
        sa.Column("variant", sa.String(), nullable=False),
    ]


def _int_columns(*names: str) -> list[sa.Column]:
    return [sa.Column(name, sa.Integer(), nullable=False) for name in names]


RECENT = ("environment_id", "dtype", "id")
SHAPE = ("environment_id", "dtype", "m", "n", "k", "variant", "code_version", "config_key", "status")


def upgrade() -> None:
    op.create_index("ix_measurements_recent", "measurements", list(RECENT))
    op.create_index("ix_measurements_shape", "measurements", list(SHAPE))
    for name in CHANGED_VIEWS:
        op.execute(f"DROP VIEW {name}")
    # No foreign keys (derived rows), as revision 0003's summaries.
    op.create_table(
        "shape_stats",
        *_variant_columns(),
        *_int_columns("m", "n", "k"),
        *_stats_columns(),
        sa.PrimaryKeyConstraint(*_SHAPE_KEY.split(", "), name="pk_shape_stats"),
    )
    op.create_table(
        "variant_stats",
        *_variant_columns(),
        *_int_columns("m_min", "m_max", "n_min", "n_max", "k_min", "k_max"),
        *_stats_columns(),
        sa.PrimaryKeyConstraint(*_VARIANT_KEY.split(", "), name="pk_variant_stats"),
    )
    config = ("block_m", "block_n", "block_k", "split_k", "num_warps", "num_stages", "group_m")
    op.create_table(
        "grouping_best",
        sa.Column("gpu_name", sa.String(), nullable=False),
        sa.Column("dtype", sa.String(), nullable=False),
        *_int_columns("m", "n", "k"),
        sa.Column("variant", sa.String(), nullable=False),
        *_int_columns(*config),
        sa.Column("ms", sa.Float(53), nullable=False),
        sa.Column("ms_group1", sa.Float(53), nullable=False),
        sa.Column("operand_bytes", sa.BigInteger(), nullable=True),
        sa.Column("l2_bytes", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint(*_GROUPING.split(", ")[:13], name="pk_grouping_best"),
    )
    op.create_table(
        "gpu_best",
        sa.Column("gpu_name", sa.String(), nullable=False),
        sa.Column("dtype", sa.String(), nullable=False),
        *_int_columns("m", "n", "k"),
        sa.Column("variant", sa.String(), nullable=False),
        *_int_columns("measurement_id"),
        sa.Column("ms", sa.Float(53), nullable=False),
        sa.PrimaryKeyConstraint("gpu_name", "dtype", "m", "n", "k", "variant", name="pk_gpu_best"),
    )
    op.create_table(
        "sweep_counts",
        sa.Column("sweep_id", sa.Integer(), autoincrement=False, nullable=False),
        *_int_columns("n_rows", "stale"),
        sa.PrimaryKeyConstraint("sweep_id", name="pk_sweep_counts"),
    )
    for fill in BACKFILL:
        op.execute(fill)
    for name in CHANGED_VIEWS:
        op.execute(f"CREATE VIEW {name} AS {VIEWS_0004[name]}")


def downgrade() -> None:
    for name in CHANGED_VIEWS:
        op.execute(f"DROP VIEW {name}")
    op.drop_table("sweep_counts")
    op.drop_table("gpu_best")
    op.drop_table("grouping_best")
    op.drop_table("variant_stats")
    op.drop_table("shape_stats")
    op.drop_index("ix_measurements_shape", table_name="measurements")
    op.drop_index("ix_measurements_recent", table_name="measurements")
    for name in CHANGED_VIEWS:
        op.execute(f"CREATE VIEW {name} AS {VIEWS_0003[name]}")
