"""The result sink: the sweep's one database writer, its counts, its claims and its progress bar.

Records are buffered and upserted once a second (one transaction per flush, FLUSH_EVERY_S): a
driver killed at any moment loses at most the last second of results, and a rerun skips what the
database holds (writes are idempotent on the point key: the point and the sweep).

The sink also holds the sweep's point claims (db.claims): the driver claims a batch's points before it
dispatches them (`claim`), a flush releases the claims of the points it writes, and the flushes refresh
the sweep's heartbeat, by which a second sweep into the same database tells this one alive from dead.
Each flush also writes the sweep's counts (n_ok, n_failed), so that a running sweep reads "105 ok of
277" on the dashboard, not 0 until it ends.

A write that fails (a full disk: SQLite's "database or disk is full", an I/O error, a read-only file)
ends the sweep with one line (`WriteFailed`, exit status 3), not a traceback: the buffered records are
dropped (a rerun measures them), and the sweep is marked `interrupted` and its claims released where
the database still takes so small a write (else the next sweep does both: db.claims.reap).
"""

from __future__ import annotations

import collections
import contextlib
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

from sqlalchemy import Engine, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from tqdm import tqdm

from db import claims
from db.engine import describe
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
# At most one progress line this often about points other sweeps hold (each claim round could say so).
HELD_NOTE_EVERY_S = 10.0


class ResultSink:
    def __init__(self, engine: Engine, sweep_id: int, *, total: int, name: str, progress: bool, run: int = 0):
        self.engine, self.sweep_id, self.run = engine, sweep_id, run
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
        except WRITE_ERRORS as exc:
            raise write_failed(engine, exc, n_points) from exc
        sink = cls(
            engine, sweep_id, total=n_points, name=name, progress=progress, run=sweep_id if repeat else 0
        )
        for s in dead:
            sink.note(
                f"sweep #{s} had stopped (no heartbeat for {claims.STALE_AFTER_S:.0f} s): marked interrupted"
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
        with Session(self.engine) as session:
            got = claims.claim(
                session,
                sweep_id=self.sweep_id,
                run=self.run,
                environment_ids=self.env_ids,
                keys=keys,
                statuses=statuses,
            )
            session.commit()
        lost = len(keys) - len(got.ours)
        if lost:
            self.claimed_elsewhere += lost
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

    def _write(self, work: Callable[[Session], None]) -> None:
        """Run `work` in one transaction; a failed write becomes this sink's WriteFailed."""
        try:
            with Session(self.engine) as session:
                work(session)
                session.commit()
        except WRITE_ERRORS as exc:
            left = max(0, (self.bar.total or 0) - self.bar.n) + len(self.buffer)
            self.failed_write = write_failed(self.engine, exc, left)
            raise self.failed_write from exc

    def close(self, status: str) -> None:
        """Write what is buffered and the sweep's end: its status and counts; its claims are released.
        After a failed write the buffer is dropped, the sweep ends `interrupted`, and WriteFailed is
        raised again (with a note if even that end could not be written)."""
        self.bar.close()
        if self.failed_write is None:
            with contextlib.suppress(WriteFailed):  # kept in self.failed_write
                self.flush(force=True)
        failed = self.failed_write
        if failed is not None:
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
            if failed is None:
                raise
            raise WriteFailed(
                f"{failed}; marking sweep #{self.sweep_id} interrupted failed too: the next sweep into this "
                "database does it"
            ) from None
        if failed is not None:
            raise failed


def _failed(counts: collections.Counter) -> int:
    return sum(v for k, v in counts.items() if k != Status.OK)


def write_failed(engine: Engine, exc: BaseException, points_left: int) -> WriteFailed:
    """The one line a failed write ends a sweep with: the database, SQLite's or the server's reason,
    and for a file the free space there against what the points left need."""
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0] if str(exc).strip() else ""
    reason = reason or type(exc).__name__
    target = describe(engine)
    need = points_left * BYTES_PER_POINT * 2 + WRITE_MARGIN_BYTES
    space = ""
    if engine.dialect.name == "sqlite":
        folder = Path(target).parent
        try:
            free = shutil.disk_usage(folder).free
            space = (
                f"; {_size(free)} free in {folder}, and the {points_left:,} points left need about "
                f"{_size(need)}"
            )
        except OSError:
            space = f"; the {points_left:,} points left need about {_size(need)} free in {folder}"
    return WriteFailed(
        f"cannot write to {target}: {reason}{space}. The points stored so far are kept; free space "
        "(or give another --db), then run the same command again to resume"
    )


def _size(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"
