"""The result sink: the sweep's one database writer, its counts, its claims and its progress bar.

Records are buffered and upserted once a second (one transaction per flush, FLUSH_EVERY_S): a
driver killed at any moment loses at most the last second of results, and a rerun skips what the
database holds (writes are idempotent on the point key: the point and the sweep).

The sink also holds the sweep's point claims (db.claims): the driver claims a batch's points before it
dispatches them (`claim`), a flush releases the claims of the points it writes, and the flushes refresh
the sweep's heartbeat, by which a second sweep into the same database tells this one alive from dead.
Each flush also writes the sweep's counts (n_ok, n_failed), so that a running sweep reads "105 ok of
277" on the dashboard, not 0 until it ends.

Every write goes through one place (`_write`: the sweep's row, each claim, each flush's measurements,
summaries and heartbeat, the sweep's end). A write that fails (a full disk: SQLite's "database or disk
is full", an I/O error, a read-only file) ends the sweep with one line (`WriteFailed`, exit status 3),
not a traceback, whichever write the disk fills at: the buffered records are dropped (a rerun measures
them), and the sweep is marked `interrupted` and its claims released in one small transaction. On a
full disk that transaction usually fits where the failed one did not (the WAL space the failed commit
had taken is written again); where it fails too, the line says so and the row reads `running` until the
next sweep into the database marks it (db.claims.reap: at once on this host, its driver being gone;
elsewhere once its heartbeat is STALE_AFTER_S old), and its claims lapse with it.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Engine, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from tqdm import tqdm

from db import claims
from db.engine import describe, display_target, sqlite_file
from db.models import Sweep, SweepStatus
from db.records import MeasurementRecord, Status
from db.writes import finish_sweep, start_sweep, upsert_measurements
from farm.errors import WriteFailed

FLUSH_EVERY_S = 1.0
# What a stored point takes on disk: 920-980 B a measurement in the demo databases (its row, its
# indexes and its share of the per-shape summaries). SQLite writes every page to the WAL first and
# copies it into the database at a checkpoint, so a point needs about twice that free, plus a margin
# for the checkpoint's and the summaries' pages.
BYTES_PER_POINT = 1_000
WRITE_MARGIN_BYTES = 4 * 2**20
# What a failed write looks like: SQLite's own errors come wrapped by SQLAlchemy, or bare where a
# caller used the driver directly; OSError for a file the driver could not create.
WRITE_ERRORS = (OperationalError, sqlite3.OperationalError, OSError)
# A full disk in each one's words: SQLite's SQLITE_FULL (its extended codes keep 13 in the low byte),
# PostgreSQL's SQLSTATE 53100 (disk_full), the OS's ENOSPC and EDQUOT (a quota).
_SQLITE_FULL, _SQLITE_IOERR, _PG_DISK_FULL = sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, "53100"
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# At most one progress line this often about points other sweeps hold (each claim round could say so).
HELD_NOTE_EVERY_S = 10.0
T = TypeVar("T")


class ResultSink:
    def __init__(self, engine: Engine, sweep_id: int, *, total: int, name: str, progress: bool, run: int = 0):
        self.engine, self.sweep_id, self.run = engine, sweep_id, run
        self.total = total  # the points this sweep measures: the plan's, less those other sweeps took
        self.buffer: list[tuple[int, MeasurementRecord]] = []
        self.counts: collections.Counter = collections.Counter()
        self.failures: list[MeasurementRecord] = []
        self.last_flush = self.started = self.last_beat = time.monotonic()
        self.env_ids: set[int] = set()  # the environments the sweep claims in
        # Points left to other sweeps: per sweep id, (host, points); noted (printed) up to `noted`.
        self.held: dict[int, tuple[str, int]] = {}
        self.noted: dict[int, int] = {}
        self.last_note = float("-inf")
        self.claimed_elsewhere = 0  # points claimed elsewhere or stored by another sweep meanwhile
        self.stored: collections.Counter = collections.Counter()  # by status, what flushes wrote
        self.failed_write: WriteFailed | None = None  # the first write that failed; nothing is written after
        self.failure: tuple[BaseException, int] | None = None  # its error, and the points left then
        self.bar = tqdm(
            total=total, unit="pt", disable=not progress, dynamic_ncols=True, desc=name, file=sys.stderr
        )

    @classmethod
    def open(
        cls,
        engine: Engine,
        *,
        name: str,
        spec: dict,
        command: str,
        n_points: int,
        progress: bool,
        repeat: bool = False,
    ) -> ResultSink:
        """Record the sweep's start (its row) and return the sink its records go through.

        First, sweeps left `running` by a driver that died (stale heartbeat) are marked interrupted
        and their claims deleted (db.claims.reap). A `repeat` sweep claims under its own run.
        """
        try:
            with Session(engine) as session:
                dead = claims.reap(session)
                sweep_id = start_sweep(session, name=name, spec=spec, command=command, n_points=n_points)
                session.commit()
        except WRITE_ERRORS as exc:  # nothing of the sweep is in the database: no row, no claim
            raise write_failed(engine, exc, n_points, "nothing was stored") from None
        sink = cls(
            engine, sweep_id, total=n_points, name=name, progress=progress, run=sweep_id if repeat else 0
        )
        for s in dead:
            sink.note(
                f"sweep #{s} had stopped (its driver gone, or silent for {claims.STALE_AFTER_S:.0f} s): "
                "marked interrupted"
            )
        return sink

    @property
    def failed(self) -> int:
        return _failed(self.counts)

    def note(self, line: str) -> None:
        """One line above the progress bar (or on stderr without one)."""
        tqdm.write(line, file=sys.stderr)

    def claim(
        self, env_ids: Collection[int], keys: Iterable[tuple], statuses: Iterable[str] | None = None
    ) -> set[tuple]:
        """Claim these points (db.records.point_key) for this sweep; returns those that are now its own.
        The rest are left to the sweep that holds them, or were stored since the plan; they leave the
        progress bar's total, and points other sweeps hold are said in a progress line."""
        keys = set(keys)
        self.env_ids |= set(env_ids)
        got = self._write(
            lambda session: claims.claim(
                session,
                sweep_id=self.sweep_id,
                run=self.run,
                environment_ids=self.env_ids,
                keys=keys,
                statuses=statuses,
            )
        )
        lost = len(keys) - len(got.ours)
        if lost:
            self.claimed_elsewhere += lost
            self.total -= lost
            self.bar.total = max(self.bar.n, (self.bar.total or 0) - lost)
            self.bar.refresh()
        for s, (host, n) in got.held.items():
            self.held[s] = (host, self.held.get(s, ("", 0))[1] + n)
        self._note_held()
        return got.ours

    def _note_held(self, force: bool = False) -> None:
        fresh = {s: v for s, v in self.held.items() if self.noted.get(s) != v[1]}
        if not fresh or (not force and time.monotonic() - self.last_note < HELD_NOTE_EVERY_S):
            return
        for line in claims.Claimed(held=fresh).held_lines():
            self.note(line)
        self.noted.update({s: n for s, (_, n) in fresh.items()})
        self.last_note = time.monotonic()

    def add(self, env_id: int, record: MeasurementRecord, *, faults: int = 0) -> None:
        """Buffer one finished record (written at the next flush) and count it."""
        self.buffer.append((env_id, record))
        self.counts[record.status] += 1
        if record.status != Status.OK:
            self.failures.append(record)
        self.bar.update(1)
        elapsed = time.monotonic() - self.started
        rate = f"{self.bar.n / elapsed * 60:.0f}/min" if elapsed > 0 else "-"
        self.bar.set_postfix(
            ok=self.counts[Status.OK], failed=self.failed, faults=faults, rate=rate, refresh=False
        )

    def flush(self, force: bool = False) -> None:
        """Upsert the buffer if a second has passed since the last flush (or `force`), releasing the
        claims of the points written and writing the sweep's counts; refresh the sweep's heartbeat
        every HEARTBEAT_EVERY_S. A failed write raises WriteFailed (module docstring)."""
        if self.failed_write is not None:
            raise self.failed_write
        now = time.monotonic()
        beat = now - self.last_beat >= claims.HEARTBEAT_EVERY_S
        write = self.buffer and (force or now - self.last_flush >= FLUSH_EVERY_S)
        if not write and not beat:
            return

        stored = self.stored + collections.Counter(r.status for _, r in self.buffer) if write else self.stored

        def flush_in(session: Session) -> None:
            if write:
                by_env: dict[int, list[MeasurementRecord]] = collections.defaultdict(list)
                for env_id, record in self.buffer:
                    by_env[env_id].append(record)
                for env_id, records in by_env.items():
                    upsert_measurements(
                        session, environment_id=env_id, sweep_id=self.sweep_id, records=records
                    )
                keys = [r.key for _, r in self.buffer]
                claims.release(
                    session, sweep_id=self.sweep_id, run=self.run, environment_ids=self.env_ids, keys=keys
                )
                session.execute(
                    update(Sweep)
                    .where(Sweep.id == self.sweep_id)
                    .values(n_ok=stored[Status.OK], n_failed=_failed(stored))
                )
            claims.heartbeat(session, self.sweep_id)

        self._write(flush_in)
        if write:
            self.stored = stored
            self.buffer.clear()
            self.last_flush = time.monotonic()
        self.last_beat = time.monotonic()

    def _write(self, work: Callable[[Session], T]) -> T:
        """Run `work` in one transaction and return what it returns; a failed write becomes this sink's
        WriteFailed, and no later write is tried but the sweep's end (`close`)."""
        try:
            with Session(self.engine) as session:
                result = work(session)
                session.commit()
                return result
        except WRITE_ERRORS as exc:
            # The sink's own counts: a progress bar that is off (--no-progress) counts nothing.
            left = max(0, self.total - sum(self.stored.values()))
            self.failure = self.failure or (exc, left)  # the first failure's words: the rest repeat it
            self.failed_write = self._failed_line("the sweep ends interrupted")
            raise self.failed_write from None

    def _failed_line(self, outcome: str) -> WriteFailed:
        exc, left = self.failure
        stored = sum(self.stored.values())
        return write_failed(self.engine, exc, left, f"{outcome}, {_points(stored)} stored")

    def close(self, status: str) -> None:
        """Write what is buffered and the sweep's end: its status and counts; its claims are released.
        After a failed write the buffer is dropped, the sweep ends `interrupted`, and WriteFailed is
        raised again, saying whether even that end could be written."""
        self.bar.close()
        if self.failed_write is None:
            with contextlib.suppress(WriteFailed):  # kept in self.failed_write
                self.flush(force=True)
        earlier = self.failed_write is not None
        if earlier:
            status = SweepStatus.INTERRUPTED
            self.buffer.clear()  # not stored: the next run of the command measures them
        else:
            self._note_held(force=True)

        def finish(session: Session) -> None:
            # what was stored: after a failed write, the counts' dropped records are not
            finish_sweep(
                session,
                self.sweep_id,
                status=status,
                n_ok=self.stored[Status.OK],
                n_failed=_failed(self.stored),
            )
            claims.release_all(session, self.sweep_id)

        try:
            self._write(finish)
        except WriteFailed:
            # Its row reads `running` and its claims stay until a later sweep finds it dead; to a later
            # sweep of this process (its pid alive) at once, as to one of another process on this host.
            claims.dead_here(self.engine, self.sweep_id)
            said = "interrupted either" if earlier else str(status)
            raise self._failed_line(
                f"sweep #{self.sweep_id} could not be marked {said} (the next sweep into this database marks "
                "it interrupted and frees its claims)"
            ) from None
        if earlier:
            raise self._failed_line(f"sweep #{self.sweep_id} is left interrupted, its claims released")


def _failed(counts: collections.Counter) -> int:
    return sum(v for k, v in counts.items() if k != Status.OK)


def write_failed(where: Engine | str, exc: BaseException, points_left: int, outcome: str) -> WriteFailed:
    """The one line a failed write ends a sweep with: the database (an engine, or the --db target where
    none could be made), SQLite's, the server's or the OS's reason, for a file the free space there
    against what the points left need, and `outcome`: what the sweep's row says now."""
    if isinstance(where, Engine):
        target = describe(where)
        file = Path(target) if where.dialect.name == "sqlite" else None
    else:
        target, file = display_target(where), sqlite_file(where)
    folder = file.parent if file is not None else None
    free = _free_bytes(folder)
    reason = _reason(exc)
    if full_disk(exc, folder) and not any(word in reason.lower() for word in ("full", "space")):
        reason += " (the disk is full)"  # SQLite's "disk I/O error" where it could not grow its -shm file
    space = ""
    if folder is not None:
        need = points_left * BYTES_PER_POINT * 2 + WRITE_MARGIN_BYTES
        left = f"the {_points(points_left)} left need about {_size(need)}" if points_left else ""
        if free is None:
            space = f"; {left} free in {folder}" if left else ""
        else:
            space = f"; {_size(free)} free in {folder}" + (f", and {left}" if left else "")
    return WriteFailed(
        f"cannot write to {target}: {reason}{space}. {outcome[:1].upper()}{outcome[1:]}; free space (or give "
        "another --db), then run the same command again to resume"
    )


def full_disk(exc: BaseException, folder: Path | None = None) -> bool:
    """Whether a failed write (or the DatabaseError made of one) failed for want of space: SQLITE_FULL,
    PostgreSQL's disk_full, ENOSPC or EDQUOT; or SQLite's bare "disk I/O error" with under
    WRITE_MARGIN_BYTES free in the database's `folder` (what it said when it could not create its
    -shm file on a tmpfs with 20 KB left)."""
    free = _free_bytes(folder)
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        orig = getattr(exc, "orig", None) or exc
        code = getattr(orig, "sqlite_errorcode", None)
        if code is not None and code & 0xFF == _SQLITE_FULL:
            return True
        if code is not None and code & 0xFF == _SQLITE_IOERR and free is not None:
            return free < WRITE_MARGIN_BYTES
        if getattr(orig, "sqlstate", None) == _PG_DISK_FULL or getattr(orig, "errno", None) in _FULL_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _reason(exc: BaseException) -> str:
    """The first line of what SQLite, the server or the OS said: SQLAlchemy's wrapping left out, and
    db.engine's DatabaseError ("cannot open SQLite database ...") for the driver's error it was made of."""
    for wrapped in (exc, exc.__cause__):
        if getattr(wrapped, "orig", None) is not None:
            exc = wrapped.orig
            break
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _free_bytes(folder: Path | None) -> int | None:
    if folder is None:
        return None
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _points(n: int) -> str:
    return f"{n:,} point" if n == 1 else f"{n:,} points"


def _size(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:,.1f} GiB"
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n / 2**10:,.0f} KiB"
