"""The result sink: the sweep's one database writer, its counts and its progress bar.

Records are buffered and upserted once a second (one transaction per flush, FLUSH_EVERY_S): a
driver killed at any moment loses at most the last second of results, and a rerun skips what the
database holds (writes are idempotent on the point key).
"""

from __future__ import annotations

import collections
import sys
import time

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from tqdm import tqdm

from db.records import MeasurementRecord, Status
from db.writes import finish_sweep, start_sweep, upsert_measurements

FLUSH_EVERY_S = 1.0


class ResultSink:
    def __init__(self, engine: Engine, sweep_id: int, *, total: int, name: str, progress: bool):
        self.engine, self.sweep_id = engine, sweep_id
        self.buffer: list[tuple[int, MeasurementRecord]] = []
        self.counts: collections.Counter = collections.Counter()
        self.failures: list[MeasurementRecord] = []
        self.last_flush = self.started = time.monotonic()
        self.bar = tqdm(
            total=total, unit="pt", disable=not progress, dynamic_ncols=True, desc=name, file=sys.stderr
        )

    @classmethod
    def open(
        cls, engine: Engine, *, name: str, spec: dict, command: str, n_points: int, progress: bool
    ) -> ResultSink:
        """Record the sweep's start (its row) and return the sink its records go through."""
        with Session(engine) as session:
            sweep_id = start_sweep(session, name=name, spec=spec, command=command, n_points=n_points)
            session.commit()
        return cls(engine, sweep_id, total=n_points, name=name, progress=progress)

    @property
    def failed(self) -> int:
        return sum(v for k, v in self.counts.items() if k != Status.OK)

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
        """Upsert the buffer if a second has passed since the last flush (or `force`)."""
        if not self.buffer or (not force and time.monotonic() - self.last_flush < FLUSH_EVERY_S):
            return
        by_env: dict[int, list[MeasurementRecord]] = collections.defaultdict(list)
        for env_id, record in self.buffer:
            by_env[env_id].append(record)
        with Session(self.engine) as session:
            for env_id, records in by_env.items():
                upsert_measurements(session, environment_id=env_id, sweep_id=self.sweep_id, records=records)
            session.commit()
        self.buffer.clear()
        self.last_flush = time.monotonic()

    def close(self, status: str) -> None:
        """Write what is buffered and the sweep's end: its status and counts."""
        self.bar.close()
        self.flush(force=True)
        with Session(self.engine) as session:
            finish_sweep(
                session, self.sweep_id, status=status, n_ok=self.counts[Status.OK], n_failed=self.failed
            )
            session.commit()
