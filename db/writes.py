"""The writes the farm's driver makes: environments, sweeps, measurements (idempotent upserts).

Every function takes the caller's Session and neither commits nor rolls back: the caller decides
what one transaction is (the driver commits one batch of results at a time, so a killed driver
leaves whole batches or nothing).

And the one read a writer makes before it writes: `done_keys`, the points already stored, which a
sweep's resume and its claims (db.claims) skip.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from itertools import chain
from typing import Any

from sqlalchemy import Connection, Integer, Table, bindparam, column, select, text, true, tuple_, values
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from db.errors import DatabaseError
from db.fetch import fetch
from db.models import POINT, POINT_KEY, UNATTRIBUTED, Environment, Measurement, Sweep, SweepStatus
from db.records import (
    ENVIRONMENT_FIELDS,
    IDENTITY_FIELDS,
    MEASUREMENT_FIELDS,
    Backend,
    EnvironmentInfo,
    MeasurementRecord,
    Status,
    utcnow,
)
from db.summaries import mark_sweeps, refresh

# Rows per INSERT: 500 rows x 51 columns = 25,500 bound parameters, under SQLite's limit of 32,766
# (since 3.32) and PostgreSQL's 65,535.
CHUNK_ROWS = 500
# In the table's column order, which is the compiled statement's placeholder order.
_COLUMNS = ("environment_id", "sweep_id", "latest", *MEASUREMENT_FIELDS, "updated_at")
_NATIVE = frozenset({int, float, str, bool, type(None), datetime})
_MEASURED = tuple(f for f in MEASUREMENT_FIELDS if f not in POINT_KEY)
_STATUSES = frozenset(Status)
_BACKENDS = frozenset(Backend)
# Compiled upsert statements by (dialect, paramstyle, rows): SQLAlchemy compiles a multi-row
# VALUES statement afresh on every execution (0.5 s per 500 rows here, 5.5 s for 10k rows);
# compiled once per chunk size and run with the driver's parameters, 10k rows take 0.3 s.
_UPSERTS: dict[tuple[str, str, int], tuple[str, list[str], list[int] | None]] = {}
# Where a row holds its db.summaries group: (dtype, m, n, k, variant).
_GROUP_AT = tuple(_COLUMNS.index(c) for c in ("dtype", "m", "n", "k", "variant"))
# And its point (db.models.POINT) and sweep, for marking the older runs of its point.
_POINT_AT = tuple(_COLUMNS.index(c) for c in (*POINT, "sweep_id"))
# A write is the newest run of its points: their other sweeps' rows are older runs (db.models.Measurement).
_OLDER_RUNS = text(
    "UPDATE measurements SET latest = 0 WHERE environment_id = :environment_id AND code_version = "
    ":code_version AND variant = :variant AND dtype = :dtype AND m = :m AND n = :n AND k = :k "
    "AND config_key = :config_key AND sweep_id <> :sweep_id AND latest = 1"
)


# PostgreSQL: writers of measurements take this transaction-level advisory lock first, so two sweeps
# (or a sweep and a merge) never refresh the same summary group at once. Each refresh deletes a group's
# rows and inserts them again; under READ COMMITTED a second transaction's DELETE does not see the rows
# the first just inserted, and its INSERT then fails on their primary key. SQLite serialises writers
# already (BEGIN IMMEDIATE). A flush holds it for its own 0.05-0.2 s (benchmarks/writer_rate.py).
_WRITE_LOCK = 0x7F4D_5752


def serialize_writers(conn: Connection) -> None:
    """Wait for the other writers' transactions (PostgreSQL; SQLite's writers queue on BEGIN IMMEDIATE)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_WRITE_LOCK})")


def dialect_insert(bind: Session | Connection, table: Table):
    """The dialect's INSERT, which has ON CONFLICT on both supported backends."""
    name = (bind.connection() if isinstance(bind, Session) else bind).dialect.name
    if name == "sqlite":
        return sqlite.insert(table)
    if name == "postgresql":
        return postgresql.insert(table)
    raise DatabaseError(f"unsupported database dialect {name!r}")


def environment_id(session: Session, env: EnvironmentInfo) -> int:
    """The id of `env`'s row, created if missing; two processes racing on it get the same id."""
    table = Environment.__table__
    fingerprint = env.fingerprint
    lookup = select(table.c.id).where(table.c.fingerprint == fingerprint)
    found = session.execute(lookup).scalar_one_or_none()
    if found is not None:
        return found
    # A row written before the fingerprint left out display data (peak_tflops, peak_gbps) has an
    # older fingerprint: the same environment is the one whose identity columns all match.
    same = select(table.c.id).where(*(table.c[f] == _plain(getattr(env, f)) for f in IDENTITY_FIELDS))
    found = session.execute(same.order_by(table.c.id).limit(1)).scalar_one_or_none()
    if found is not None:
        return found
    values = {f: _plain(getattr(env, f)) for f in ENVIRONMENT_FIELDS}
    values.update(fingerprint=fingerprint, created_at=utcnow())
    # ON CONFLICT DO NOTHING: a concurrent insert of the same fingerprint makes this a no-op
    # (PostgreSQL waits for the other transaction; SQLite writers are serialised by BEGIN IMMEDIATE).
    session.execute(
        dialect_insert(session, table).values(values).on_conflict_do_nothing(index_elements=["fingerprint"])
    )
    return session.execute(lookup).scalar_one()


def start_sweep(session: Session, *, name: str, spec: dict[str, Any], command: str, n_points: int) -> int:
    now = utcnow()
    sweep = Sweep(
        name=name,
        spec=json.dumps(spec, sort_keys=True, default=str),
        command=command,
        host=socket.gethostname(),
        started_at=now,
        heartbeat_at=now,  # db.claims: its claims live while the driver refreshes it
        pid=os.getpid(),  # and while this process lives, as far as this host can tell
        status=SweepStatus.RUNNING,
        n_points=n_points,
        n_ok=0,
        n_failed=0,
    )
    session.add(sweep)
    session.flush()
    return sweep.id


def unattributed_sweep(session: Session) -> int:
    """The id of the sweep that rows written without one belong to (created the first time)."""
    t = Sweep.__table__
    found = select(t.c.id).where(*(t.c[k] == v for k, v in UNATTRIBUTED.items())).order_by(t.c.id).limit(1)
    sweep_id = session.execute(found).scalar_one_or_none()
    if sweep_id is None:
        sweep = Sweep(
            **UNATTRIBUTED, spec="{}", command="", status=SweepStatus.FINISHED, n_points=0, n_ok=0, n_failed=0
        )
        session.add(sweep)
        session.flush()
        sweep_id = sweep.id
    return sweep_id


def finish_sweep(session: Session, sweep_id: int, *, status: str, n_ok: int, n_failed: int) -> None:
    if status not in frozenset(SweepStatus):
        raise ValueError(f"sweep status {status!r} is not one of {', '.join(SweepStatus)}")
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise DatabaseError(f"no sweep with id {sweep_id}")
    sweep.status = status
    sweep.n_ok = n_ok
    sweep.n_failed = n_failed
    sweep.finished_at = utcnow()
    session.flush()


def upsert_measurements(
    session: Session, *, environment_id: int, sweep_id: int | None, records: Sequence[MeasurementRecord]
) -> int:
    """Insert or update `records` as sweep_id's run of their points; returns the number of distinct
    points written.

    One multi-row INSERT ... ON CONFLICT DO UPDATE per chunk on SQLite, a pipelined executemany of
    the one-row upsert on PostgreSQL; then, in the same transaction, the rows are made the newest run of
    their points (other sweeps' rows of them get latest = 0, and stay) and the per-shape summaries of
    the groups written are recomputed (db.summaries). Writing the same batch twice in one sweep leaves
    the same rows with the same ids; the measured columns take the latest write. A repeated key
    within the batch keeps its last record (PostgreSQL refuses an upsert that touches one row twice
    in one statement). sweep_id None: the unattributed sweep's run (unattributed_sweep).
    """
    conn = session.connection()
    serialize_writers(conn)
    if sweep_id is None:
        sweep_id = unattributed_sweep(session)
    table = Measurement.__table__
    # Type conversions the driver needs (SQLite: timestamps to text, booleans to 0/1).
    processors = [
        (i, p) for i, c in enumerate(_COLUMNS) if (p := table.c[c].type.bind_processor(conn.dialect))
    ]
    now = utcnow()
    rows: dict[tuple, list] = {}
    for rec in records:
        if rec.status not in _STATUSES or rec.backend not in _BACKENDS:
            raise ValueError(f"record {rec.key}: status {rec.status!r} / backend {rec.backend!r} unknown")
        row = [environment_id, sweep_id, 1, *map(rec.__getattribute__, MEASUREMENT_FIELDS), now]
        if not _NATIVE.issuperset(map(type, row)):
            row = [_plain(v) for v in row]
        for i, process in processors:
            if row[i] is not None:
                row[i] = process(row[i])
        rows[rec.key] = row
    pending = list(rows.values())
    # The key columns are ints and text, which no processor above changes.
    older = [dict(zip((*POINT, "sweep_id"), (row[i] for i in _POINT_AT))) for row in pending]
    if conn.dialect.name == "postgresql":
        # The one-row upsert, run with executemany, which psycopg 3 pipelines and prepares once: it
        # re-parses the multi-row statement (over 50 parameters) on every execution, 0.25 s of client
        # CPU per 500 rows; 0.7-1.4k records/s that way against 3.9-4.8k (benchmarks/writer_rate.py).
        sql, names, order = _upsert(session, 1)
        conn.exec_driver_sql(sql, [_params(conn.dialect.positional, names, order, row) for row in pending])
    while pending and conn.dialect.name != "postgresql":
        # SQLite: multi-row statements of CHUNK_ROWS, compiled once (executemany of one row was slower).
        size = _chunk_size(len(pending))
        chunk, pending = pending[:size], pending[size:]
        sql, names, order = _upsert(session, size)
        conn.exec_driver_sql(sql, _params(conn.dialect.positional, names, order, chain.from_iterable(chunk)))
    if older:
        conn.execute(_OLDER_RUNS, older)
    mark_sweeps(conn, [sweep_id])
    refresh(conn, environment_id, {tuple(row[i] for i in _GROUP_AT) for row in rows.values()})
    return len(rows)


def _params(positional: bool, names: list[str], order: list[int] | None, values: Iterable[Any]) -> Any:
    """A compiled upsert's parameters from its values in _COLUMNS order, row by row."""
    flat = list(values)
    if not positional:
        return dict(zip(names, flat))
    return tuple(flat) if order is None else tuple(flat[k] for k in order)


def _plain(value: Any) -> Any:
    """What the drivers bind as meant: an enum member as its string, a numpy scalar as a Python one
    (sqlite3 would store numpy.int64 as an 8-byte BLOB, silently)."""
    if isinstance(value, StrEnum):
        return str(value)
    return value.item() if hasattr(value, "item") else value


def _chunk_size(n: int) -> int:
    """CHUNK_ROWS, or the largest power of two <= n: a handful of statement shapes cover every batch."""
    return CHUNK_ROWS if n >= CHUNK_ROWS else 1 << (n.bit_length() - 1)


def _upsert(session: Session, n_rows: int) -> tuple[str, list[str], list[int] | None]:
    """The upsert of n_rows rows, compiled once: SQL text, parameter names (row by row, in _COLUMNS
    order), and for positional drivers where each placeholder's value sits in that order (None: as is)."""
    dialect = session.connection().dialect
    key = (dialect.name, dialect.paramstyle, n_rows)
    if key not in _UPSERTS:
        table = Measurement.__table__
        names = [f"r{i}_{c}" for i in range(n_rows) for c in _COLUMNS]
        stmt = dialect_insert(session, table).values(
            [{c: bindparam(f"r{i}_{c}") for c in _COLUMNS} for i in range(n_rows)]
        )
        update = {c: stmt.excluded[c] for c in (*_MEASURED, "latest", "updated_at")}
        compiled = stmt.on_conflict_do_update(index_elements=list(POINT_KEY), set_=update).compile(
            dialect=dialect
        )
        order = None
        if compiled.positional:
            where = {name: k for k, name in enumerate(names)}
            order = [where[name] for name in compiled.positiontup]
            order = None if order == list(range(len(names))) else order
        _UPSERTS[key] = (str(compiled), names, order)
    return _UPSERTS[key]


# ---- the sweep's resume: which points are stored ----


def done_keys(
    conn: Connection,
    environment_ids: Iterable[int],
    *,
    statuses: Iterable[str] | None = None,
    code_versions: Iterable[str] | None = None,
    variants: Iterable[str] | None = None,
    dtypes: Iterable[str] | None = None,
    shapes: Iterable[tuple[int, int, int]] | None = None,
) -> set[tuple]:
    """The point keys (db.records.point_key) stored for these environments, in any status unless given.

    code_versions, variants, dtypes and shapes (m, n, k) narrow it to a sweep's own points, what a
    resume needs: then it reads one range of ix_measurements_shape per (environment, dtype, shape,
    variant, code version), so its cost follows the sweep, not the database (10M rows:
    docs/results/db_views.md).
    Unscoped, it reads the unique index alone; the cost is Python building the tuples, about
    1.4 µs a key here.
    """
    ids = [int(i) for i in environment_ids]
    if not ids:
        return set()
    t = Measurement.__table__
    stmt = select(t.c.code_version, t.c.variant, t.c.dtype, t.c.m, t.c.n, t.c.k, t.c.config_key).where(
        t.c.environment_id.in_(ids)
    )
    scoped = variants is not None or dtypes is not None or shapes is not None
    if statuses is not None:
        stmt = stmt.where(t.c.status.in_([str(s) for s in statuses]))
    if code_versions is not None:
        stmt = stmt.where(t.c.code_version.in_(sorted({str(v) for v in code_versions})))
    # Scoped: ix_measurements_shape (environment, dtype, m, n, k, variant, code version, config key,
    # status) answers alone; unscoped, the unique index (environment first). SQLite, without statistics,
    # may otherwise pick an index that leaves a table read per row.
    index = "ix_measurements_shape" if scoped else "uq_measurements_point"
    stmt = stmt.with_hint(t, f"INDEXED BY {index}", "sqlite")
    if variants is not None:
        stmt = stmt.where(t.c.variant.in_(sorted({str(v) for v in variants})))
    if dtypes is not None:
        stmt = stmt.where(t.c.dtype.in_(sorted({str(d) for d in dtypes})))
    if shapes is not None:
        wanted = sorted({tuple(int(x) for x in s) for s in shapes})
        if not wanted:
            return set()
        if conn.dialect.name == "postgresql":
            # PostgreSQL cannot use a row-value IN list as an index condition (130 shapes of a full
            # preset: 1.5 s on 1M rows, a filter), and a plain join with the list may hash-join every
            # row of the environment: a LATERAL subquery seeks the index once per shape (OFFSET 0 keeps
            # the planner from flattening it into that join).
            listed = values(*(column(d, Integer) for d in "mnk"), name="wanted").data(wanted)
            found = stmt.where(*(t.c[d] == listed.c[d] for d in "mnk")).offset(0).lateral("found")
            stmt = select(found).select_from(listed).join(found, true())
        elif code_versions is None:
            # Without code versions SQLite seeks the index with a row-value IN list only up to dtype,
            # then tests every row of the environment and dtype (10M rows: 2.4 s for 130 shapes); joined
            # with the shapes as a table, it seeks (environment, dtype, m, n, k, variant) per shape
            # (1.0 s, most of it building 193k keys). With them the IN list is faster (0.03 s vs 0.07 s).
            listed = values(*(column(d, Integer) for d in "mnk"), name="wanted").data(wanted).cte("wanted")
            stmt = stmt.where(*(t.c[d] == listed.c[d] for d in "mnk"))
        else:
            stmt = stmt.where(tuple_(t.c.m, t.c.n, t.c.k).in_(wanted))
    return set(fetch(conn, stmt)[1])
