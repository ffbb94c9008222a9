"""Test-only revision `later`, on top of the package's head: what a real later revision looks like
(tests/db/test_migrations.py).

Adds a measurement column and an index. SQLite rebuilds a table to drop a column and checks the
views on rename, so the views are dropped first and recreated after, as a real revision must.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import op

import db
from db.views import VIEWS_HEAD

# On top of the package's newest revision, whichever it is (the number of its file).
VERSIONS = Path(db.__file__).with_name("migrations") / "versions"
PACKAGE_HEAD = max(p.name.split("_")[0] for p in VERSIONS.glob("[0-9][0-9][0-9][0-9]_*.py"))

revision = "later"
down_revision = PACKAGE_HEAD
branch_labels = None
depends_on = None


def _drop_views() -> None:
    for name in reversed(VIEWS_HEAD):
        op.execute(f"DROP VIEW {name}")


def _create_views() -> None:
    for name, select in VIEWS_HEAD.items():
        op.execute(f"CREATE VIEW {name} AS {select}")


def upgrade() -> None:
    _drop_views()
    op.add_column("measurements", sa.Column("power_w", sa.Float(53), nullable=True))
    op.create_index("ix_measurements_power_w", "measurements", ["power_w"])
    _create_views()


def downgrade() -> None:
    _drop_views()
    op.drop_index("ix_measurements_power_w", table_name="measurements")
    with op.batch_alter_table("measurements") as batch:
        batch.drop_column("power_w")
    _create_views()
