"""Test-only revision that fails half way: the upgrade must leave the database at 0005, unchanged."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("half_done", sa.Column("id", sa.Integer(), primary_key=True))
    op.execute("DELETE FROM measurements")
    op.execute("SELECT no_such_column FROM measurements")


def downgrade() -> None:
    op.drop_table("half_done")
