"""Point claims: two sweeps writing into one database never measure a point twice (revision 0006).

A sweep's driver claims the points of a batch before it hands the batch to a worker (`claim`: one
INSERT ... ON CONFLICT DO NOTHING of every point, then a read of whose claims they are), and releases
each claim in the transaction that writes the point's row (`release`), or all of them when the sweep
ends (`release_all`). A claim lives as long as its sweep's heartbeat: the driver refreshes its sweep's
heartbeat_at (`heartbeat`) while it runs, and a claim of a sweep that is no longer running, or whose
heartbeat is older than STALE_AFTER_S, has expired (`reap`: the next sweep that opens the database marks
such a dead sweep `interrupted` and deletes its claims; `claim` ignores expired claims too). A running
sweep of this host whose driver process is gone (its pid) is dead at once: a sweep resumed right after
a kill -9 measures what the killed one had claimed instead of waiting out its heartbeat.

Claims are per environment: two sweeps on different GPUs measure the same point each. A sweep that
measures what no run holds yet claims with run = 0, so every such sweep competes for one claim per
point; a `--repeat` sweep, which measures every point again as its own run, claims with run = its id.

Every function takes the caller's Session and neither commits nor rolls back (as db.writes).
"""

from __future__ import annotations

import collections
import os
import socket
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Engine, delete, or_, select, tuple_, update
from sqlalchemy.orm import Session

from db.models import CLAIM_KEY, POINT, Claim, Sweep, SweepStatus
from db.records import utcnow
from db.writes import dialect_insert, done_keys

# How often a running driver refreshes its heartbeat. Its loop wakes at least once a second (farm.sink
# FLUSH_EVERY_S) even while a batch compiles or a worker restarts, so a beat is never late by more than
# about a second while the driver lives.
HEARTBEAT_EVERY_S = 5.0
# A heartbeat older than this means the driver is dead (killed, its host gone, or stuck for a minute):
# 12 missed beats, so a driver's database write that waits out SQLite's busy timeout (db.engine: 30 s)
# or a slow flush of a large batch does not expire its claims, while a second sweep started right after
# a kill -9 waits at most a minute before it measures the dead sweep's points.
STALE_AFTER_S = 60.0

# Sweeps this process ended without the write that says so (a full disk), per database: dead at once to
# this process's later sweeps (a library caller's retry), as a killed driver's sweep is to the next
# process on its host (_gone_here), instead of holding their claims until STALE_AFTER_S has passed.
_DEAD_HERE: set[tuple[str, int]] = set()

# A point within one environment: (code_version, variant, dtype, m, n, k, config_key), as
# db.records.point_key and farm.plan.Point.key make it.
Key = tuple


@dataclass
class Claimed:
    """What `claim` got: the points that are now this sweep's to measure, and why the others are not."""

    ours: set[Key] = field(default_factory=set)
    measured: set[Key] = field(default_factory=set)  # stored by another sweep since the plan was made
    # Points held by a live sweep: per sweep id, (host, number of points).
    held: dict[int, tuple[str, int]] = field(default_factory=dict)

    def held_lines(self) -> list[str]:
        """One progress line per sweep whose claims made this one skip points."""
        return [
            f"{n} points claimed by sweep #{sweep_id} on {host or '?'}, skipped"
            for sweep_id, (host, n) in sorted(self.held.items())
        ]


def heartbeat(session: Session, sweep_id: int, now: datetime | None = None) -> None:
    """The sweep is alive: its claims stay valid for STALE_AFTER_S from now."""
    session.execute(update(Sweep).where(Sweep.id == sweep_id).values(heartbeat_at=now or utcnow()))


def _stale(now: datetime):
    """A sweep whose claims have expired: not running, or its heartbeat older than STALE_AFTER_S."""
    cutoff = now - timedelta(seconds=STALE_AFTER_S)
    return or_(Sweep.status != SweepStatus.RUNNING, Sweep.heartbeat_at.is_(None), Sweep.heartbeat_at < cutoff)


def reap(session: Session, now: datetime | None = None) -> list[int]:
    """Mark dead sweeps (running, heartbeat stale or, on this host, process gone) interrupted and delete
    every expired claim; returns the ids of the sweeps marked. A new sweep calls it when it opens the
    database."""
    now = now or utcnow()
    cutoff = now - timedelta(seconds=STALE_AFTER_S)
    stale = select(Sweep.id).where(
        Sweep.status == SweepStatus.RUNNING, or_(Sweep.heartbeat_at.is_(None), Sweep.heartbeat_at < cutoff)
    )
    dead = sorted({*session.scalars(stale), *_gone_here(session)})
    _interrupted(session, dead, now)
    live = select(Sweep.id).where(~_stale(now))
    session.execute(delete(Claim).where(Claim.sweep_id.not_in(live)))
    return dead


def dead_here(engine: Engine, sweep_id: int) -> None:
    """This process's sweep has ended, though its row could not say so: `reap` and `claim` treat it as a
    sweep whose driver is gone."""
    _DEAD_HERE.add((str(engine.url), int(sweep_id)))


def _interrupted(session: Session, sweep_ids: list[int], now: datetime) -> None:
    if sweep_ids:
        session.execute(
            update(Sweep)
            .where(Sweep.id.in_(sweep_ids))
            .values(status=SweepStatus.INTERRUPTED, finished_at=now)
        )


def _gone_here(session: Session) -> list[int]:
    """Running sweeps of this host whose driver process no longer exists (a pid reused by another process
    counts as alive: its heartbeat then decides), and this process's own that ended unmarked (dead_here)."""
    here = select(Sweep.id, Sweep.pid).where(
        Sweep.status == SweepStatus.RUNNING, Sweep.host == socket.gethostname(), Sweep.pid.is_not(None)
    )
    url = str(session.get_bind().url)
    return [
        sweep_id
        for sweep_id, pid in session.execute(here)
        if (url, sweep_id) in _DEAD_HERE or (pid != os.getpid() and not _alive(pid))
    ]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # no signal: whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def claim(
    session: Session,
    *,
    sweep_id: int,
    run: int,
    environment_ids: Collection[int],
    keys: Iterable[Key],
    statuses: Iterable[str] | None = None,
    now: datetime | None = None,
) -> Claimed:
    """Claim these points in every environment of the sweep; returns those now ours.

    A point is ours when its claim in every one of environment_ids is this sweep's (a claim it held
    already counts). Where another live sweep holds a claim, the point is left to that sweep and this
    sweep's other claims of it are released. With run = 0, a point that some sweep stored since the
    caller planned (a row in one of the environments, in `statuses` if given: what the driver's resume
    counts as done) is released and left out too: it was measured while this sweep was deciding.
    """
    now = now or utcnow()
    keys = sorted(set(keys))
    out = Claimed()
    _interrupted(session, _gone_here(session), now)  # their claims expire below
    env_ids = sorted({int(e) for e in environment_ids})
    if not keys or not env_ids:
        return out
    table = Claim.__table__
    live = select(Sweep.id).where(~_stale(now))
    # Expired claims of these points first, so the insert below can take them over.
    mine = [_row(e, key, run) for e in env_ids for key in keys]
    where_keys = tuple_(*(table.c[c] for c in CLAIM_KEY)).in_([tuple(r[c] for c in CLAIM_KEY) for r in mine])
    session.execute(delete(table).where(where_keys, table.c.sweep_id.not_in(live)))
    rows = [{**r, "sweep_id": sweep_id, "claimed_at": now} for r in mine]
    stmt = dialect_insert(session, table).values(rows)
    session.execute(stmt.on_conflict_do_nothing(index_elements=list(CLAIM_KEY)))
    holders = session.execute(
        select(table.c.environment_id, *(table.c[c] for c in POINT[1:]), table.c.sweep_id).where(where_keys)
    ).all()
    others: dict[Key, int] = {}
    for row in holders:
        if row.sweep_id != sweep_id:
            others[tuple(row[1:-1])] = row.sweep_id
    candidates = [key for key in keys if key not in others]
    if run == 0 and candidates:
        out.measured = _stored(session, env_ids, candidates, statuses)
    out.ours = {key for key in candidates if key not in out.measured}
    lost = [key for key in keys if key not in out.ours]
    if lost:
        release(session, sweep_id=sweep_id, run=run, environment_ids=env_ids, keys=lost)
    if others:
        counts = collections.Counter(others.values())
        hosts = dict(session.execute(select(Sweep.id, Sweep.host).where(Sweep.id.in_(counts))).all())
        out.held = {s: (hosts.get(s, ""), n) for s, n in counts.items()}
    return out


def release(
    session: Session, *, sweep_id: int, run: int, environment_ids: Collection[int], keys: Iterable[Key]
) -> None:
    """Delete this sweep's claims of these points (their rows are written, or they are left to others)."""
    table = Claim.__table__
    wanted = [tuple(_row(e, key, run)[c] for c in CLAIM_KEY) for e in environment_ids for key in set(keys)]
    for start in range(0, len(wanted), 500):  # 500 x 9 bound values per statement, under SQLite's limit
        chunk = wanted[start : start + 500]
        session.execute(
            delete(table).where(
                tuple_(*(table.c[c] for c in CLAIM_KEY)).in_(chunk), table.c.sweep_id == sweep_id
            )
        )


def release_all(session: Session, sweep_id: int) -> None:
    """Delete every claim of the sweep: it ended, and what it did not measure is free again."""
    session.execute(delete(Claim).where(Claim.sweep_id == sweep_id))


def _row(environment_id: int, key: Key, run: int) -> dict:
    return {"environment_id": int(environment_id), **dict(zip(POINT[1:], key)), "run": int(run)}


def _stored(
    session: Session, env_ids: list[int], keys: list[Key], statuses: Iterable[str] | None
) -> set[Key]:
    """Which of these points have a row in one of the environments (in `statuses` if given)."""
    found = done_keys(
        session.connection(),
        env_ids,
        statuses=statuses,
        code_versions={k[0] for k in keys},
        variants={k[1] for k in keys},
        dtypes={k[2] for k in keys},
        shapes={(k[3], k[4], k[5]) for k in keys},
    )
    return found & set(keys)
