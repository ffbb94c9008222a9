"""eager_ms: what an eager caller waits for per call, stored beside the kernel time ms.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04

Two objectives rank the configs: kernel time (ms) and eager time, the longer of the stream time and
the launcher's host time (db.records.eager_ms). Until now eager time was computed in each query; it is
now a column of measurements, and of gpu_best, which copies every measurement column of its winners.
Rows already stored get it from their stream_ms and host_ms by the same definition (NULL where either
is: rows from before revision 0002 have no host time). `results`, `run_results` and `best_configs`
show it after host_ms.

SQLite rebuilds a table to drop a column and checks the views on rename, so the views are dropped
first and created again after, in both directions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from db.views import VIEWS_0006, VIEWS_0007

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TABLES = ("measurements", "gpu_best")
# db.records.eager_ms in SQL, frozen here as this revision wrote it
EAGER_MS = (
    "CASE WHEN stream_ms IS NULL OR host_ms IS NULL THEN NULL "
    "WHEN host_ms > stream_ms THEN host_ms ELSE stream_ms END"
)


def _drop_views(views: dict[str, str]) -> None:
    for name in reversed(views):
        op.execute(f"DROP VIEW {name}")


def _create_views(views: dict[str, str]) -> None:
    for name, select in views.items():
        op.execute(f"CREATE VIEW {name} AS {select}")


def upgrade() -> None:
    _drop_views(VIEWS_0006)
    for table in TABLES:
        op.add_column(table, sa.Column("eager_ms", sa.Float(53), nullable=True))
        op.execute(f"UPDATE {table} SET eager_ms = {EAGER_MS}")
    _create_views(VIEWS_0007)


def downgrade() -> None:
    _drop_views(VIEWS_0007)
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("eager_ms")
    _create_views(VIEWS_0006)
