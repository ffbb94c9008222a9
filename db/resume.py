"""What a sweep about to start needs to know of its own points already stored: their kernel times.

A search (farm/source.py) resumes by telling its strategies every point this environment and code
version already holds, with its time, and counting it against the budget; the early cut compares a
point's first samples with the best time stored for its shape. One read per sweep start, scoped to
the sweep's environments, code versions and shapes like `done_keys`.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select, tuple_
from sqlalchemy.engine import Connection

from db.models import Measurement
from db.records import Status, point_key


def stored_times(
    conn: Connection,
    environment_ids: Iterable[int],
    *,
    code_versions: Iterable[str],
    shapes: Iterable[tuple[int, int, int]],
) -> dict[tuple, float | None]:
    """Per point key (db.records.point_key) stored for these environments and code versions: the
    kernel ms of its newest `ok` row, None where no run of it ended ok (failed, wrong, too_large,
    implausible: a time physics forbids is no time)."""
    ids = sorted({int(i) for i in environment_ids})
    wanted = sorted({tuple(int(x) for x in s) for s in shapes})
    versions = sorted({str(v) for v in code_versions})
    if not ids or not wanted or not versions:
        return {}
    t = Measurement.__table__
    stmt = (
        select(
            t.c.code_version, t.c.variant, t.c.dtype, t.c.m, t.c.n, t.c.k, t.c.config_key, t.c.status, t.c.ms
        )
        .where(t.c.environment_id.in_(ids), t.c.code_version.in_(versions))
        .where(tuple_(t.c.m, t.c.n, t.c.k).in_(wanted))
        .order_by(t.c.sweep_id)  # newest run last: it wins below
    )
    out: dict[tuple, float | None] = {}
    for version, variant, dtype, m, n, k, config_key, status, ms in conn.execute(stmt):
        key = point_key(version, variant, dtype, m, n, k, config_key)
        if status == Status.OK and ms is not None:
            out[key] = float(ms)
        else:
            out.setdefault(key, None)
    return out
