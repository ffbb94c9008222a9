"""db.merge: sweeps, environments and measurements of several databases into one, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from dbkit import A100, H200, create, rec
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from db import queries
from db.engine import make_engine
from db.errors import DatabaseError
from db.merge import merge
from db.models import Sweep
from db.records import EnvironmentInfo, MeasurementRecord
from db.schema import open_engine
from db.writes import environment_id, finish_sweep, start_sweep, upsert_measurements

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
SHAPE = (96, 7168, 2048)
RAGGED = (495, 5333, 71)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def write(target: str, env: EnvironmentInfo, records: list[MeasurementRecord], sweep: str) -> None:
    """One sweep of records into target (created at head when missing: dbkit's copy of a migrated file)."""
    create(target)
    engine = open_engine(target)
    try:
        with Session(engine) as session:
            env_id = environment_id(session, env)
            sweep_id = start_sweep(
                session, name=sweep, spec={}, command=f"farm sweep {sweep}", n_points=len(records)
            )
            upsert_measurements(session, environment_id=env_id, sweep_id=sweep_id, records=records)
            finish_sweep(session, sweep_id, status="finished", n_ok=len(records), n_failed=0)
            session.commit()
    finally:
        engine.dispose()


def points(target: str) -> dict[tuple, tuple]:
    """(gpu, variant, shape, config_key) -> (ms, sweep name) of every point's newest run."""
    engine = make_engine(target, readonly=True)
    try:
        with engine.connect() as conn:
            sweeps = dict(conn.execute(select(Sweep.id, Sweep.name)).all())
            df = queries.results(conn)
    finally:
        engine.dispose()
    return {
        (r.gpu_name, r.variant, (r.m, r.n, r.k), r.config_key): (r.ms, sweeps.get(r.sweep_id))
        for r in df.itertuples()
    }


@pytest.fixture
def sources(tmp_path: Path) -> list[str]:
    """Two node databases: an H200 node and an A100 node that also re-measured an H200 point later."""
    node1, node2 = str(tmp_path / "node1.db"), str(tmp_path / "node2.db")
    write(
        node1,
        H200,
        [
            rec("grouped", SHAPE, ms=0.0205, created_at=at(0)),
            rec("splitk", SHAPE, split_k=4, ms=0.0229, created_at=at(0)),
            rec("tiled", RAGGED, block=(64, 64, 32), ms=0.5, created_at=at(0)),
        ],
        "h200-run",
    )
    write(node2, A100, [rec("grouped", RAGGED, ms=0.9, created_at=at(1))], "a100-run")
    write(node2, H200, [rec("grouped", SHAPE, ms=0.0199, created_at=at(2))], "h200-rerun")  # newer
    return [node1, node2]


def runs(target: str) -> list[tuple]:
    """(sweep name, variant, ms, latest) of every run of every point."""
    engine = make_engine(target, readonly=True)
    try:
        with engine.connect() as conn:
            sweeps = dict(conn.execute(select(Sweep.id, Sweep.name)).all())
            df = queries.iter_view(conn, "run_results")
            return sorted((sweeps[r.sweep_id], r.variant, r.ms, r.latest) for d in df for r in d.itertuples())
    finally:
        engine.dispose()


def test_merge_brings_every_row_and_is_idempotent(target: str, sources: list[str]) -> None:
    first = merge(sources, target)
    assert (first.environments_added, first.sweeps_added) == (2, 3)
    # Both runs of the re-measured H200 point are kept, the newer one the latest.
    assert (first.measurements_added, first.measurements_replaced) == (5, 0)
    grouped_runs = [r for r in runs(target) if r[1] == "grouped" and r[0] != "a100-run"]
    assert grouped_runs == [("h200-rerun", "grouped", 0.0199, 1), ("h200-run", "grouped", 0.0205, 0)]
    merged = points(target)
    assert merged[("NVIDIA H200", "grouped", SHAPE, rec("grouped", SHAPE).config_key)] == (
        0.0199,
        "h200-rerun",
    )
    assert merged[("NVIDIA A100-SXM4-80GB", "grouped", RAGGED, rec("grouped", RAGGED).config_key)] == (
        0.9,
        "a100-run",
    )
    assert len(merged) == 4

    again = merge(sources, target)
    assert (again.environments_added, again.sweeps_added, again.measurements_added) == (0, 0, 0)
    assert again.measurements_replaced == 0 and again.measurements_kept == 5
    assert points(target) == merged and len(runs(target)) == 5


def test_an_older_run_merged_in_later_is_kept_but_not_the_latest(target: str, tmp_path: Path) -> None:
    old = str(tmp_path / "old.db")
    write(old, H200, [rec("grouped", SHAPE, ms=0.030, created_at=at(0))], "old")
    write(target, H200, [rec("grouped", SHAPE, ms=0.0205, created_at=at(5))], "new")
    summary = merge([old], target)
    assert (summary.measurements_added, summary.measurements_replaced, summary.measurements_kept) == (1, 0, 0)
    assert list(points(target).values()) == [(0.0205, "new")]  # measured last, though merged first
    assert runs(target) == [("new", "grouped", 0.0205, 1), ("old", "grouped", 0.030, 0)]


def test_merging_the_target_into_itself_is_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "one.db")
    write(db, H200, [rec(ms=1.0)], "only")
    with pytest.raises(DatabaseError, match="is the target database itself"):
        merge([db], db)


def test_sqlite_sources_into_postgresql_and_back(pg_target: str, sources: list[str], tmp_path: Path) -> None:
    """PostgreSQL as the shared store, then a SQLite copy of it: the same rows at every hop."""
    merge(sources, pg_target)
    copy = str(tmp_path / "copy.db")
    summary = merge([pg_target], copy)
    assert (
        summary.sources
        == [make_engine(pg_target).url.render_as_string(hide_password=True).replace("+psycopg", "")]
        or summary.sources
    )
    assert points(copy) == points(pg_target) and len(points(copy)) == 4


def test_rows_merged_feed_the_views(engine: Engine, sources: list[str]) -> None:
    target = engine.url.render_as_string(hide_password=False)
    if engine.dialect.name == "sqlite":
        target = str(engine.url.database)
    merge(sources, target)
    with engine.connect() as conn:
        best = queries.splitk_best(conn, gpu_name="NVIDIA H200")
    assert best[["unsplit_ms", "split_ms"]].values.tolist() == [[0.0199, 0.0229]]


def test_farm_db_merge_command(tmp_path: Path, sources: list[str], capsys: pytest.CaptureFixture) -> None:
    """`farm db merge SOURCE... --into TARGET`: the same merge through the command line, twice."""
    import cli

    target = str(tmp_path / "all.db")
    assert cli.main(["db", "merge", *sources, "--into", target]) == 0
    assert "5 measurements added, 0 replaced" in capsys.readouterr().out
    assert cli.main(["db", "merge", *sources, "--into", target]) == 0
    assert "0 measurements added, 0 replaced" in capsys.readouterr().out
    assert len(points(target)) == 4
    assert cli.main(["db", "merge", str(tmp_path / "missing.db"), "--into", target]) == 2
