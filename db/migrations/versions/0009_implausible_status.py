"""implausible and instrument_error: rows whose time is no time, stored beside the failures.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07

`implausible` (db.records.Status.IMPLAUSIBLE): the kernel time broke physics (db.physics: under the
roofline, or far outside the stream time it was read beside) when measured and again when measured a
second time; its times are kept for inspection and no view, summary or page reads them as times.
`instrument_error`: the profiler, CUPTI or NVML failed twice; not the kernel's fault. The status CHECK
of measurements lists the words (revision 0001), so it is widened here.

Rows stored before the farm checked physics are checked here: every `ok` row of the cuda backend that
db.physics.implausibility rejects at its environment's peaks becomes `implausible`, the reason in its
`error` (db.check.find and db.check.mark: the H100 study's five cuBLAS rows that read 0.75-1.0 us of
kernel time against a roofline of 4.3-139 us). mark() recomputes the summaries of their groups
(db.summaries.refresh), whose tables are as revision 0007 left them; a later revision that changes
those tables must freeze that SQL here, as revision 0005 froze its backfill.

Downgrade: the older schema has no word for these rows: they are deleted (a later sweep measures them
again), the newest remaining run of each of their points becomes its latest (db.merge's rule), their
groups' summaries and sweeps' counts are recomputed, then the old CHECK comes back.
"""

from __future__ import annotations

from collections import defaultdict

from alembic import op
from sqlalchemy import text

from db.check import find, mark
from db.models import POINT
from db.summaries import mark_sweeps, refresh
from db.views import VIEWS_0007

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

STATUSES_0008 = "'ok', 'wrong', 'compile_error', 'launch_error', 'crashed', 'timeout', 'too_large'"
STATUSES_0009 = f"{STATUSES_0008}, 'implausible', 'instrument_error'"
NEW_WORDS = "'implausible', 'instrument_error'"

# A point's newest run (latest = 1) as db.merge chooses it: the last measured, then the higher id.
_LATEST = text(
    "UPDATE measurements SET latest = CASE WHEN id = (SELECT x.id FROM measurements x WHERE "
    + " AND ".join(f"x.{c} = :{c}" for c in POINT)
    + " ORDER BY x.created_at DESC, x.id DESC LIMIT 1) THEN 1 ELSE 0 END WHERE "
    + " AND ".join(f"{c} = :{c}" for c in POINT)
)


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
    _status_check(STATUSES_0009)
    conn = op.get_bind()
    mark(conn, find(conn, physics_only=True))


def downgrade() -> None:
    conn = op.get_bind()
    gone = conn.execute(
        text(f"SELECT {', '.join(POINT)}, sweep_id FROM measurements WHERE status IN ({NEW_WORDS})")
    ).all()
    op.execute(f"DELETE FROM measurements WHERE status IN ({NEW_WORDS})")
    points = sorted({tuple(row[: len(POINT)]) for row in gone})
    if points:
        conn.execute(_LATEST, [dict(zip(POINT, p)) for p in points])
    mark_sweeps(conn, {row.sweep_id for row in gone})
    groups = defaultdict(set)
    for row in gone:
        groups[row.environment_id].add((row.dtype, row.m, row.n, row.k, row.variant))
    for env_id, touched in sorted(groups.items()):
        refresh(conn, env_id, touched)
    _status_check(STATUSES_0008)
