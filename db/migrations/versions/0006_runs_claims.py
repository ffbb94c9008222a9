"""Runs and claims: every sweep's measurement of a point is kept, and a running sweep claims its points.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04

Runs: until 0005 a point (environment, code version, variant, dtype, shape, config) had one row, and
a second sweep of it replaced the first one's. The point key now holds the sweep (uq_measurements_point
gains sweep_id), so `farm sweep --repeat` keeps both runs; `latest` marks the newest run of each point,
which the `results` view and the summaries read (one row per point, as before). `run_results` shows
every run. sweep_id becomes NOT NULL (a NULL never conflicts in a unique key, so a write without a
sweep would add a row each time): rows without one move to an "unattributed" sweep created here.
Every row stored before this revision is the only run of its point, so latest = 1 for all of them and
the summaries stay as they are.

Claims: `claims` holds the points running sweeps are about to measure, and sweeps get a heartbeat
(heartbeat_at) and their driver's process id (pid), by which a dead sweep's claims expire (db.claims).
Sweeps stored before this revision take their last known time (finished or started) as their
heartbeat, so a sweep left `running` by a killed driver counts as dead.

Downgrade: revision 0005 holds one row per point, so the older runs' rows (latest = 0) are deleted
and each sweep's row count is recounted; the claims and heartbeats are dropped. The unattributed
sweep's rows go back to having no sweep, and it is deleted.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime
from db.views import VIEWS_0005, VIEWS_0006

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

POINT = ("environment_id", "code_version", "variant", "dtype", "m", "n", "k", "config_key")
VIEW_INDEX_0005 = (
    "environment_id", "status", "dtype", "variant", "m", "n", "k", "block_m", "block_n", "block_k", "split_k",
    "num_warps", "num_stages", "group_m", "ms",
)  # fmt: skip
VIEW_INDEX_0006 = (*VIEW_INDEX_0005[:2], "latest", *VIEW_INDEX_0005[2:])
# The sweep of rows stored without one (db.models.UNATTRIBUTED keeps the same identity: name, host and
# start time, which is also how db.merge matches sweeps across databases).
UNATTRIBUTED = {"name": "unattributed", "host": "", "started_at": datetime(1970, 1, 1, tzinfo=UTC)}

_sweeps = sa.table(
    "sweeps",
    sa.column("id", sa.Integer),
    sa.column("name", sa.String),
    sa.column("spec", sa.Text),
    sa.column("command", sa.Text),
    sa.column("host", sa.String),
    sa.column("started_at", UTCDateTime()),
    sa.column("finished_at", UTCDateTime()),
    sa.column("status", sa.String),
    sa.column("n_points", sa.Integer),
    sa.column("n_ok", sa.Integer),
    sa.column("n_failed", sa.Integer),
)


def _drop_views(views: dict[str, str]) -> None:
    for name in reversed(views):
        op.execute(f"DROP VIEW {name}")


def _create_views(views: dict[str, str]) -> None:
    for name, select in views.items():
        op.execute(f"CREATE VIEW {name} AS {select}")


def _unattributed_rows() -> None:
    """Move rows without a sweep to the unattributed sweep (created, or found, when there are any)."""
    bind = op.get_bind()
    n, n_ok = bind.execute(
        sa.text(
            "SELECT COUNT(*), COALESCE(SUM(CASE WHEN status = 'ok' THEN 1 ELSE 0 END), 0) FROM measurements "
            "WHERE sweep_id IS NULL"
        )
    ).one()
    if not n:
        return
    found = sa.select(_sweeps.c.id).where(*(_sweeps.c[k] == v for k, v in UNATTRIBUTED.items()))
    sweep_id = bind.execute(found).scalar()
    if sweep_id is None:
        values = dict(
            UNATTRIBUTED, spec="{}", command="", status="finished", finished_at=UNATTRIBUTED["started_at"]
        )
        values.update(n_points=n, n_ok=n_ok, n_failed=n - n_ok)
        sweep_id = bind.execute(sa.insert(_sweeps).values(values).returning(_sweeps.c.id)).scalar_one()
    for table in ("measurements", "gpu_best"):
        bind.execute(sa.text(f"UPDATE {table} SET sweep_id = :s WHERE sweep_id IS NULL"), {"s": sweep_id})
    bind.execute(sa.text("DELETE FROM sweep_counts WHERE sweep_id = :s"), {"s": sweep_id})
    bind.execute(
        sa.text("INSERT INTO sweep_counts (sweep_id, n_rows, stale) VALUES (:s, :n, 0)"),
        {"s": sweep_id, "n": n},
    )


def upgrade() -> None:
    _drop_views(VIEWS_0005)  # SQLite checks the views when batch mode renames the rebuilt table
    op.add_column("sweeps", sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("sweeps", sa.Column("pid", sa.Integer(), nullable=True))
    op.execute("UPDATE sweeps SET heartbeat_at = COALESCE(finished_at, started_at)")
    _unattributed_rows()
    with op.batch_alter_table("measurements") as batch:
        batch.add_column(sa.Column("latest", sa.Integer(), server_default="1", nullable=False))
        batch.alter_column("sweep_id", existing_type=sa.Integer(), nullable=False)
        batch.drop_constraint("uq_measurements_point", type_="unique")
        batch.create_unique_constraint("uq_measurements_point", [*POINT, "sweep_id"])
        batch.drop_index("ix_measurements_view")
        batch.create_index("ix_measurements_view", list(VIEW_INDEX_0006))
    with op.batch_alter_table("gpu_best") as batch:
        batch.alter_column("sweep_id", existing_type=sa.Integer(), nullable=False)
    op.create_table(
        "claims",
        sa.Column("environment_id", sa.Integer(), autoincrement=False, nullable=False),
        *(sa.Column(c, sa.String(), nullable=False) for c in ("code_version", "variant", "dtype")),
        *(sa.Column(c, sa.Integer(), nullable=False) for c in "mnk"),
        sa.Column("config_key", sa.String(), nullable=False),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(*POINT, "run", name="pk_claims"),
    )
    op.create_index("ix_claims_sweep_id", "claims", ["sweep_id"])
    _create_views(VIEWS_0006)


def downgrade() -> None:
    _drop_views(VIEWS_0006)
    op.drop_index("ix_claims_sweep_id", table_name="claims")
    op.drop_table("claims")
    op.execute("DELETE FROM measurements WHERE latest = 0")
    op.execute(
        "UPDATE sweep_counts SET n_rows = (SELECT COUNT(*) FROM measurements m "
        "WHERE m.sweep_id = sweep_counts.sweep_id), stale = 0"
    )
    with op.batch_alter_table("gpu_best") as batch:
        batch.alter_column("sweep_id", existing_type=sa.Integer(), nullable=True)
    with op.batch_alter_table("measurements") as batch:
        batch.drop_index("ix_measurements_view")
        batch.create_index("ix_measurements_view", list(VIEW_INDEX_0005))
        batch.drop_constraint("uq_measurements_point", type_="unique")
        batch.create_unique_constraint("uq_measurements_point", list(POINT))
        batch.alter_column("sweep_id", existing_type=sa.Integer(), nullable=True)
        batch.drop_column("latest")
    bind = op.get_bind()
    found = sa.select(_sweeps.c.id).where(*(_sweeps.c[k] == v for k, v in UNATTRIBUTED.items()))
    for (sweep_id,) in bind.execute(found).all():
        for table in ("measurements", "gpu_best"):
            bind.execute(sa.text(f"UPDATE {table} SET sweep_id = NULL WHERE sweep_id = :s"), {"s": sweep_id})
        bind.execute(sa.text("DELETE FROM sweep_counts WHERE sweep_id = :s"), {"s": sweep_id})
        bind.execute(sa.text("DELETE FROM sweeps WHERE id = :s"), {"s": sweep_id})
    op.drop_column("sweeps", "pid")
    op.drop_column("sweeps", "heartbeat_at")
    _create_views(VIEWS_0005)
