"""Migrations on populated databases: up, down and up again loses nothing; a failed step changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from dbkit import A100, count, grid, rec, snapshot, store
from sqlalchemy import Engine, inspect, text

from db import queries, schema
from db.errors import DatabaseError

HERE = Path(__file__).parent


def later_code(folder: str = "migrations"):
    """The Alembic config of code that has one more revision (0002) than the package."""
    return schema.alembic_config(extra_version_locations=[HERE / folder])


def columns(engine: Engine) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns("measurements")}


def test_upgrade_downgrade_upgrade_keeps_every_row(engine: Engine) -> None:
    store(engine, [*grid(500), rec(status="crashed", ms=None)])
    store(engine, [rec("tiled", (777, 333, 129), ms=0.7)], env=A100)
    before = snapshot(engine)
    with engine.connect() as conn:
        best_before = queries.best_configs(conn)
    cfg = later_code()

    schema.upgrade(engine, "0002", cfg=cfg)
    assert schema.current(engine) == "0002" and "power_w" in columns(engine)
    with engine.begin() as conn:  # the new column is usable
        conn.execute(text("UPDATE measurements SET power_w = 612.5 WHERE id = 1"))
    schema.downgrade(engine, "0001", cfg=cfg)
    assert schema.current(engine) == "0001" and "power_w" not in columns(engine)
    assert snapshot(engine) == before
    schema.upgrade(engine, "head", cfg=cfg)
    assert schema.current(engine) == "0002"
    assert [r[: len(before[0])] for r in snapshot(engine)] == before  # snapshot reads the model's columns
    with engine.connect() as conn:
        assert (
            queries.best_configs(conn)
            .drop(columns="updated_at")
            .equals(best_before.drop(columns="updated_at"))
        )
    schema.ensure_current(engine, create=False, cfg=cfg)


def test_failed_migration_changes_nothing(engine: Engine) -> None:
    """Revision 0002 of migrations_broken creates a table, deletes every row, then fails."""
    store(engine, grid(50))
    with pytest.raises(Exception, match="no_such_column"):
        schema.upgrade(engine, "head", cfg=later_code("migrations_broken"))
    assert schema.current(engine) == "0001" and count(engine) == 50
    assert "half_done" not in inspect(engine).get_table_names()


def test_downgrade_to_base_refuses_to_drop_data(engine: Engine) -> None:
    store(engine, grid(20))
    with pytest.raises(DatabaseError, match="would drop its 20 measurements; nothing was changed"):
        schema.downgrade(engine, "base")
    assert schema.current(engine) == "0001" and count(engine) == 20
    schema.downgrade(engine, "base", delete_data=True)
    assert schema.current(engine) is None and inspect(engine).get_table_names() == ["alembic_version"]
    schema.ensure_current(engine)  # an emptied database is created again
    assert count(engine) == 0 and schema.current(engine) == "0001"


def test_unknown_target_revision(engine: Engine) -> None:
    with pytest.raises(DatabaseError, match=r"cannot migrate .* to 'abcd'"):
        schema.upgrade(engine, "abcd")
    assert schema.current(engine) == "0001"
