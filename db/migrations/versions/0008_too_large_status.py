"""too_large: a point whose operands and output cannot fit in the target GPU's memory.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04

The sweep stores such a point as a row with this status (db.records.Status.TOO_LARGE) and never
launches it, so a failed point stays a row, not a gap. The status CHECK of measurements lists the words
(revision 0001), so it is widened here. Downgrade: the older schema has no word for these rows, which
are skips, not measurements: they are deleted (a later sweep decides them again), then the old CHECK
comes back.
"""

from __future__ import annotations

from alembic import op

from db.views import VIEWS_0007

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

STATUSES_0001 = "'ok', 'wrong', 'compile_error', 'launch_error', 'crashed', 'timeout'"
STATUSES_0008 = f"{STATUSES_0001}, 'too_large'"


def _status_check(words: str) -> None:
    # SQLite checks the views when batch mode renames the rebuilt table: drop them around it.
    for name in reversed(VIEWS_0007):
        op.execute(f"DROP VIEW {name}")
    with op.batch_alter_table("measurements") as batch:
        batch.drop_constraint(op.f("ck_measurements_status"), type_="check")
        batch.create_check_constraint("status", f"status IN ({words})")
    for name, select in VIEWS_0007.items():
        op.execute(f"CREATE VIEW {name} AS {select}")


def upgrade() -> None:
    _status_check(STATUSES_0008)


def downgrade() -> None:
    # The rows go, and with them their summary rows: the per-status counts are keyed by status, and a
    # too_large row is never an ok row, so no best summary held one.
    op.execute("DELETE FROM measurements WHERE status = 'too_large'")
    for table in ("shape_stats", "variant_stats"):
        op.execute(f"DELETE FROM {table} WHERE status = 'too_large'")
    op.execute(
        "UPDATE sweep_counts SET n_rows = (SELECT COUNT(*) FROM measurements m "
        "WHERE m.sweep_id = sweep_counts.sweep_id), stale = 0"
    )
    _status_check(STATUSES_0001)
