"""The result sink: the sweep's one database writer, its counts, its claims and its progress bar.

Records are buffered and upserted once a second (one transaction per flush, FLUSH_EVERY_S): a
driver killed at any moment loses at most the last second of results, and a rerun skips what the
database holds (writes are idempotent on the point key: the point and the sweep).

The sink also holds the sweep's point claims (db.claims): the driver claims a batch's points before it
dispatches them (`claim`), a flush releases the claims of the points it writes, and the flushes refresh
the sweep's heartbeat, by which a second sweep into the same database tells this one alive from dead.
"""

from __future__ import annotations

import collections
import sys
import time
from collections.abc import Collection, Iterable

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from tqdm import tqdm

from db import claims
from db.records import MeasurementRecord, Status
from db.writes import finish_sweep, start_sweep, upsert_measurements

FLUSH_EVERY_S = 1.0
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
        self.skipped = 0  # points claimed elsewhere or stored by another sweep meanwhile
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
        with Session(engine) as session:
            dead = claims.reap(session)
            sweep_id = start_sweep(session, name=name, spec=spec, command=command, n_points=n_points)
            session.commit()
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
        return sum(v for k, v in self.counts.items() if k != Status.OK)

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
            self.skipped += lost
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
        claims of the points written; refresh the sweep's heartbeat every HEARTBEAT_EVERY_S."""
        now = time.monotonic()
        beat = now - self.last_beat >= claims.HEARTBEAT_EVERY_S
        write = self.buffer and (force or now - self.last_flush >= FLUSH_EVERY_S)
        if not write and not beat:
            return
        with Session(self.engine) as session:
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
            claims.heartbeat(session, self.sweep_id)
            session.commit()
        if write:
            self.buffer.clear()
            self.last_flush = time.monotonic()
        self.last_beat = time.monotonic()

    def close(self, status: str) -> None:
        """Write what is buffered and the sweep's end: its status and counts; its claims are released."""
        self.bar.close()
        self.flush(force=True)
        self._note_held(force=True)
        with Session(self.engine) as session:
            finish_sweep(
                session, self.sweep_id, status=status, n_ok=self.counts[Status.OK], n_failed=self.failed
            )
            claims.release_all(session, self.sweep_id)
            session.commit()
