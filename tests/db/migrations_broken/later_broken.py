"""Test-only revision that fails half way: the upgrade must leave the database at the package's head,
unchanged."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import op

import db

# On top of the package's newest revision, whichever it is (the number of its file).
VERSIONS = Path(db.__file__).with_name("migrations") / "versions"
PACKAGE_HEAD = max(p.name.split("_")[0] for p in VERSIONS.glob("[0-9][0-9][0-9][0-9]_*.py"))

revision = "later_broken"
down_revision = PACKAGE_HEAD
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("half_done", sa.Column("id", sa.Integer(), primary_key=True))
    op.execute("DELETE FROM measurements")
    op.execute("SELECT no_such_column FROM measurements")


def downgrade() -> None:
    op.drop_table("half_done")
