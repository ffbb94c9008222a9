"""Migrations on populated databases: up, down and up again loses nothing; a failed step changes nothing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from dbkit import A100, H200, HEAD, count, grid, rec, snapshot, store
from sqlalchemy import Engine, MetaData, inspect, select, text
from sqlalchemy.orm import Session

from db import queries, schema
from db.engine import make_engine
from db.errors import DatabaseError
from db.writes import environment_id

HERE = Path(__file__).parent


def later_code(folder: str = "migrations"):
    """The Alembic config of code that has one more revision (`later`) than the package."""
    return schema.alembic_config(extra_version_locations=[HERE / folder])


def columns(engine: Engine, table: str = "measurements") -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns(table)}


# What revision 0002 added to measurements, and what its `results` view shows of them.
NEW_IN_0002 = {"stream_ms", "host_ms", "timing_regime", "joules_per_launch", "avg_watts", "power_limit_w"}


def store_at_0001(engine: Engine, records) -> None:
    """Write records the way code of revision 0001 did: only the columns that revision has."""
    table = MetaData()
    table.reflect(engine, only=["measurements"])
    measurements = table.tables["measurements"]
    with Session(engine) as session:
        env_id = environment_id(session, H200)
        rows = []
        for r in records:
            row = {k: v for k, v in dataclasses.asdict(r).items() if k in measurements.c}
            row["created_at"] = row["updated_at"] = r.created_at.replace(tzinfo=None)
            rows.append({**row, "environment_id": env_id})
        session.execute(measurements.insert(), rows)
        session.commit()


def rows_0001(engine: Engine) -> list[tuple]:
    """Every column revision 0001 has but sweep_id (revision 0006 moves rows without one to the
    unattributed sweep), in id order."""
    table = MetaData()
    table.reflect(engine, only=["measurements"])
    measurements = table.tables["measurements"]
    keep = [c for c in measurements.c if c.name not in (*NEW_IN_0002, "sweep_id", "latest", "eager_ms")]
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(*keep).order_by(measurements.c.id))]


def test_database_of_revision_0001_upgrades_in_place_and_back(target: str) -> None:
    engine = make_engine(target)
    schema.upgrade(engine, "0001")
    old = [*grid(40), rec("splitk", (333, 129, 4097), split_k=4, status="compile_error", ms=None)]
    store_at_0001(engine, old)
    before = rows_0001(engine)
    views_0001 = {v: columns(engine, v) for v in ("results", "best_configs")}
    assert NEW_IN_0002.isdisjoint(views_0001["results"])

    schema.upgrade(engine, "head")
    assert schema.current(engine) == HEAD
    assert columns(engine) >= NEW_IN_0002 and columns(engine, "results") >= NEW_IN_0002
    assert rows_0001(engine) == before  # every old row, every old value
    with engine.connect() as conn:  # rows stored without a sweep: runs of the unattributed sweep
        sweep_ids = conn.execute(text("SELECT DISTINCT sweep_id, latest FROM measurements")).all()
        unattributed = conn.execute(text("SELECT id FROM sweeps WHERE name = 'unattributed'")).scalar_one()
    assert [tuple(r) for r in sweep_ids] == [(unattributed, 1)]
    with engine.connect() as conn:
        marked = conn.execute(
            text("SELECT ms, stream_ms, timing_regime, joules_per_launch, avg_watts FROM results ORDER BY id")
        ).all()
    # old rows were timed with CUDA events, interleaved: their ms is a stream time
    assert [tuple(r) for r in marked] == [(r.ms, r.ms, "interleaved", None, None) for r in old[:-1]] + [
        (None, None, "", None, None)
    ]
    new = rec(
        "grouped",
        (8192, 8192, 8192),
        group_m=8,
        ms=1.25,
        stream_ms=1.27,
        host_ms=0.03,
        timing_regime="steady",
        joules_per_launch=0.86,
        avg_watts=688.0,
        power_limit_w=700.0,
    )
    store(engine, [new])
    with engine.connect() as conn:
        got = conn.execute(
            text(
                "SELECT stream_ms, host_ms, timing_regime, joules_per_launch, avg_watts, power_limit_w "
                "FROM best_configs WHERE m = 8192"
            )
        ).one()
    assert tuple(got) == (1.27, 0.03, "steady", 0.86, 688.0, 700.0)

    schema.downgrade(engine, "0001")
    assert schema.current(engine) == "0001" and NEW_IN_0002.isdisjoint(columns(engine))
    assert {v: columns(engine, v) for v in views_0001} == views_0001  # 0001's views, restored
    assert rows_0001(engine)[: len(before)] == before and count(engine) == len(old) + 1
    schema.upgrade(engine, "head")
    assert schema.current(engine) == HEAD and rows_0001(engine)[: len(before)] == before
    engine.dispose()


def test_upgrade_downgrade_upgrade_keeps_every_row(engine: Engine) -> None:
    store(engine, [*grid(500), rec(status="crashed", ms=None)])
    store(engine, [rec("tiled", (777, 333, 129), ms=0.7)], env=A100)
    before = snapshot(engine)
    with engine.connect() as conn:
        best_before = queries.best_configs(conn)
    cfg = later_code()

    schema.upgrade(engine, "later", cfg=cfg)
    assert schema.current(engine) == "later" and "power_w" in columns(engine)
    with engine.begin() as conn:  # the new column is usable
        conn.execute(text("UPDATE measurements SET power_w = 612.5 WHERE id = 1"))
    schema.downgrade(engine, HEAD, cfg=cfg)
    assert schema.current(engine) == HEAD and "power_w" not in columns(engine)
    assert snapshot(engine) == before
    schema.upgrade(engine, "head", cfg=cfg)
    assert schema.current(engine) == "later"
    assert [r[: len(before[0])] for r in snapshot(engine)] == before  # snapshot reads the model's columns
    with engine.connect() as conn:
        assert (
            queries.best_configs(conn)
            .drop(columns="updated_at")
            .equals(best_before.drop(columns="updated_at"))
        )
    schema.ensure_current(engine, create=False, cfg=cfg)


def test_failed_migration_changes_nothing(engine: Engine) -> None:
    """Revision later_broken of migrations_broken creates a table, deletes every row, then fails."""
    store(engine, grid(50))
    with pytest.raises(Exception, match="no_such_column"):
        schema.upgrade(engine, "head", cfg=later_code("migrations_broken"))
    assert schema.current(engine) == HEAD and count(engine) == 50
    assert "half_done" not in inspect(engine).get_table_names()


def test_downgrade_to_base_refuses_to_drop_data(engine: Engine) -> None:
    store(engine, grid(20))
    with pytest.raises(DatabaseError, match="would drop its 20 measurements; nothing was changed"):
        schema.downgrade(engine, "base")
    assert schema.current(engine) == HEAD and count(engine) == 20
    schema.downgrade(engine, "base", delete_data=True)
    assert schema.current(engine) is None and inspect(engine).get_table_names() == ["alembic_version"]
    schema.ensure_current(engine)  # an emptied database is created again
    assert count(engine) == 0 and schema.current(engine) == HEAD


def test_unknown_target_revision(engine: Engine) -> None:
    with pytest.raises(DatabaseError, match=r"cannot migrate .* to 'abcd'"):
        schema.upgrade(engine, "abcd")
    assert schema.current(engine) == HEAD
