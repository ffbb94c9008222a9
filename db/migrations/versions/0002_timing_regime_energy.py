"""Three times, the timing regime and energy per measurement; `results` and `best_configs` show them.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

New measurement columns: stream_ms and host_ms beside ms (which is now kernel time), timing_regime,
joules_per_launch, avg_watts, power_limit_w. Rows already stored were timed by the protocol before
this one: CUDA events around each launch, every config of a shape interleaved launch by launch.
So they get timing_regime 'interleaved' and stream_ms = ms (their ms is a stream time); a
downgrade drops the columns and restores revision 0001's views exactly.

SQLite checks every view when a table is rebuilt (batch mode drops a column that way), so the
views are dropped first and created again after, in both directions.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import sqlalchemy as sa
from alembic import op

from db.views import VIEWS_0002

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

FLOATS = ("stream_ms", "host_ms", "joules_per_launch", "avg_watts", "power_limit_w")
NEW_COLUMNS = (*FLOATS, "timing_regime")


def _views_0001() -> dict[str, str]:
    """Revision 0001's frozen view SQL, read from its file (Alembic loads revisions by path)."""
    spec = importlib.util.spec_from_file_location(
        "farm_revision_0001", Path(__file__).with_name("0001_initial.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.VIEWS


def _drop(views: dict[str, str]) -> None:
    for name in reversed(views):
        op.execute(f"DROP VIEW {name}")


def _create(views: dict[str, str]) -> None:
    for name, select in views.items():
        op.execute(f"CREATE VIEW {name} AS {select}")


def upgrade() -> None:
    _drop(_views_0001())
    with op.batch_alter_table("measurements") as batch:
        for name in FLOATS:
            batch.add_column(sa.Column(name, sa.Float(53), nullable=True))
        batch.add_column(sa.Column("timing_regime", sa.Text(), server_default="", nullable=False))
    op.execute("UPDATE measurements SET timing_regime = 'interleaved', stream_ms = ms WHERE ms IS NOT NULL")
    _create(VIEWS_0002)


def downgrade() -> None:
    _drop(VIEWS_0002)
    with op.batch_alter_table("measurements") as batch:
        for name in reversed(NEW_COLUMNS):
            batch.drop_column(name)
    _create(_views_0001())
