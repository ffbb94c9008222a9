"""Per-shape summaries: shape_best and split_best, which best_configs, splitk_speedup and vs_cublas read.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

Two tables of the fastest ok row of small groups (db.models ShapeBest, SplitBest), kept by every
writer of measurements (db.summaries.refresh, in the write's transaction) and backfilled here from
the rows already stored, with one window pass per table (the SQL below, frozen). The three views
are recreated on top of them with the same columns and rows (db.views VIEWS_0003); a downgrade
restores revision 0002's views and drops the tables (they hold nothing the measurements do not).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.views import VIEWS_0002, VIEWS_0003

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SHAPE = ("environment_id", "dtype", "m", "n", "k")
_OK = "status = 'ok' AND ms IS NOT NULL"
_SPLIT = "CASE WHEN split_k = 1 THEN 0 ELSE 1 END"
BACKFILL = (
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


def _shape_columns() -> list[sa.Column]:
    return [
        sa.Column("environment_id", sa.Integer(), nullable=False),
        sa.Column("dtype", sa.String(), nullable=False),
        sa.Column("m", sa.Integer(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False),
    ]


def _best_columns() -> list[sa.Column]:
    # No foreign keys (derived rows): SQLite would refuse a later batch ALTER's rebuild of measurements.
    return [
        sa.Column("measurement_id", sa.Integer(), nullable=False),
        sa.Column("ms", sa.Float(53), nullable=False),
    ]


def _drop_views(views: dict[str, str]) -> None:
    for name in reversed(views):
        op.execute(f"DROP VIEW {name}")


def _create_views(views: dict[str, str]) -> None:
    for name, select in views.items():
        op.execute(f"CREATE VIEW {name} AS {select}")


def upgrade() -> None:
    _drop_views(VIEWS_0002)
    op.create_table(
        "shape_best",
        *_shape_columns(),
        sa.Column("variant", sa.String(), nullable=False),
        *_best_columns(),
        sa.PrimaryKeyConstraint(*SHAPE, "variant", name="pk_shape_best"),
    )
    op.create_table(
        "split_best",
        *_shape_columns(),
        sa.Column("block_m", sa.Integer(), nullable=False),
        sa.Column("block_n", sa.Integer(), nullable=False),
        sa.Column("is_split", sa.Integer(), nullable=False),
        *_best_columns(),
        sa.PrimaryKeyConstraint(*SHAPE, "block_m", "block_n", "is_split", name="pk_split_best"),
    )
    for fill in BACKFILL:
        op.execute(fill)
    _create_views(VIEWS_0003)


def downgrade() -> None:
    _drop_views(VIEWS_0003)
    op.drop_table("split_best")
    op.drop_table("shape_best")
    _create_views(VIEWS_0002)
