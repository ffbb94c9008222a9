"""Copies of the rows best_configs and splitk_speedup show, in gpu_best and split_best, so the views
read no measurement by id; an index of every grouping_best column, which grouping_effect reads alone.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

At 10M measurements best_configs took 0.53-0.64 s on PostgreSQL (best of 5): of its 0.42 s of SQL,
0.33 s were the 14,175 primary-key lookups of a GPU and dtype's winners into the 6 GB measurements
table. gpu_best now holds the winning measurement's columns too (all of best_configs' columns but the
environment's, which come from the few rows of `environments`), re-copied by db.summaries.refresh
whenever a write touches the group.

gpu_best is rebuilt here (derived rows: the measurements are not touched) with the columns of the
measurements table as this revision finds it, filled from shape_best and measurements (the SQL below,
frozen). A downgrade restores revision 0004's narrow gpu_best, filled the same way, and its view.

grouping_effect (0.47-0.53 s) read its 54,577 rows of a GPU and dtype from grouping_best by a parallel
scan and sort on PostgreSQL (0.19 s of SQL); ix_grouping_best_rows holds every column in the query's
order (key first), which an index-only scan reads in 0.02-0.03 s.

splitk_speedup (0.38-0.6 s) fetched the two rows of each pair by id (36k primary-key lookups into
measurements); split_best now keeps the columns it shows (split_k, variant, tiles, tiles_per_sm), and
leaves stream-K out of the unsplit side (it splits K its own way and stores split_k = 1: below one tile
per SM it had been every shape's "unsplit" baseline). Refilled here from every measurement; a
downgrade drops the columns and the index and refills it as revision 0004 kept it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.views import VIEWS_0004, VIEWS_0005

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

KEY = ("dtype", "m", "n", "k", "variant")
GROUPING_ROWS = (
    "gpu_name", "dtype", "m", "n", "k", "variant", "block_m", "block_n", "block_k", "split_k", "num_warps",
    "num_stages", "group_m", "ms", "ms_group1", "operand_bytes", "l2_bytes",
)  # fmt: skip
# shape_best's best row per GPU model (lowest ms, then id): the rows of gpu_best at both revisions.
_WINNERS = (
    "SELECT e.gpu_name, s.measurement_id, ROW_NUMBER() OVER (PARTITION BY e.gpu_name, s.dtype, s.m, s.n, "
    "s.k, s.variant ORDER BY s.ms, s.measurement_id) AS rn FROM shape_best s "
    "JOIN environments e ON e.id = s.environment_id"
)


def _fill(columns: list[str]) -> str:
    """gpu_best's rows with these columns of the winning measurement (its id is measurement_id)."""
    copied = ", ".join(f"r.{c}" for c in columns)
    names = ", ".join(columns)
    return (
        f"INSERT INTO gpu_best (gpu_name, {', '.join(KEY)}, measurement_id, {names}) "
        f"SELECT x.gpu_name, {', '.join(f'r.{c}' for c in KEY)}, r.id, {copied} FROM ({_WINNERS}) x "
        "JOIN measurements r ON r.id = x.measurement_id WHERE x.rn = 1"
    )


def _gpu_best(copied: list[sa.Column]) -> None:
    op.create_table(
        "gpu_best",
        sa.Column("gpu_name", sa.String(), nullable=False),
        sa.Column("dtype", sa.String(), nullable=False),
        *(sa.Column(name, sa.Integer(), nullable=False) for name in "mnk"),
        sa.Column("variant", sa.String(), nullable=False),
        sa.Column("measurement_id", sa.Integer(), nullable=False),
        *copied,
        sa.PrimaryKeyConstraint("gpu_name", *KEY, name="pk_gpu_best"),
    )


# split_best's copies of the columns splitk_speedup shows, filled from the rows it points at.
SPLIT_COPIED = (
    sa.Column("split_k", sa.Integer(), nullable=False),
    sa.Column("variant", sa.String(), nullable=False),
    sa.Column("tiles", sa.Integer(), nullable=True),
    sa.Column("tiles_per_sm", sa.Float(53), nullable=True),
)
_SPLIT_ROWS = "environment_id, dtype, m, n, k, block_m, block_n, is_split, measurement_id, ms"


def _refill_split(copied: str, excluded: str) -> str:
    """split_best from every measurement (revision 0003's backfill, frozen here), with `copied`
    columns of the row and without the `excluded` variants."""
    split = "CASE WHEN split_k = 1 THEN 0 ELSE 1 END"
    return (
        f"INSERT INTO split_best ({_SPLIT_ROWS}{copied and ', ' + copied}) SELECT environment_id, dtype, "
        f"m, n, k, block_m, block_n, is_split, id, ms{copied and ', ' + copied} FROM (SELECT environment_id, "
        f"dtype, m, n, k, block_m, block_n, {split} AS is_split, id, ms{copied and ', ' + copied}, "
        f"ROW_NUMBER() OVER (PARTITION BY environment_id, dtype, m, n, k, block_m, block_n, {split} "
        f"ORDER BY ms, id) AS rn FROM measurements WHERE status = 'ok' AND ms IS NOT NULL "
        f"AND variant NOT IN ({excluded})) x WHERE rn = 1"
    )


# From this revision stream-K is no unsplit baseline either (db.views.SPLITK_OVER_ROWS): refilled.
_FILL_SPLIT = _refill_split("split_k, variant, tiles, tiles_per_sm", "'cublas', 'streamk', 'streamk_hybrid'")
_FILL_SPLIT_0004 = _refill_split("", "'cublas'")
CHANGED_VIEWS = ("best_configs", "splitk_speedup")


def upgrade() -> None:
    # Every measurement column but id and the key, with its type and nullability as stored (no
    # defaults, no foreign keys: derived rows).
    stored = sa.inspect(op.get_bind()).get_columns("measurements")
    copied = [c for c in stored if c["name"] not in ("id", *KEY)]
    for name in CHANGED_VIEWS:
        op.execute(f"DROP VIEW {name}")
    op.drop_table("gpu_best")
    _gpu_best([sa.Column(c["name"], c["type"], nullable=c["nullable"]) for c in copied])
    op.execute(_fill([c["name"] for c in copied]))
    for column in SPLIT_COPIED:  # nullable until filled (SQLite adds no NOT NULL column without default)
        op.add_column("split_best", sa.Column(column.name, column.type, nullable=True))
    op.execute("DELETE FROM split_best")
    op.execute(_FILL_SPLIT)
    with op.batch_alter_table("split_best") as batch:
        for column in SPLIT_COPIED:
            if not column.nullable:
                batch.alter_column(column.name, existing_type=column.type, nullable=False)
    for name in CHANGED_VIEWS:
        op.execute(f"CREATE VIEW {name} AS {VIEWS_0005[name]}")
    op.create_index("ix_grouping_best_rows", "grouping_best", list(GROUPING_ROWS))


def downgrade() -> None:
    op.drop_index("ix_grouping_best_rows", table_name="grouping_best")
    for name in CHANGED_VIEWS:
        op.execute(f"DROP VIEW {name}")
    op.drop_table("gpu_best")
    _gpu_best([sa.Column("ms", sa.Float(53), nullable=False)])
    op.execute(_fill(["ms"]))
    with op.batch_alter_table("split_best") as batch:
        for column in SPLIT_COPIED:
            batch.drop_column(column.name)
    op.execute("DELETE FROM split_best")
    op.execute(_FILL_SPLIT_0004)
    for name in CHANGED_VIEWS:
        op.execute(f"CREATE VIEW {name} AS {VIEWS_0004[name]}")
