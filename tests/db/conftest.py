"""Fixtures: the same tests run on a real SQLite file and a real PostgreSQL server (tests/pgserver.py's
`pg_target`: a new database on a throwaway server, or on FARM_TEST_PG_URL's)."""

from __future__ import annotations

import argparse
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, make_url

import cli
from cli import db as db_cli
from db.engine import make_engine
from db.schema import ensure_current

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS, ids=BACKENDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database on each backend: a SQLite path (no file yet), or a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "results.db")
    return request.getfixturevalue("pg_target")


@pytest.fixture(scope="session")
def sqlite_at_head(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once a session, for `engine` to copy (a migration is 0.2-0.3 s)."""
    path = tmp_path_factory.mktemp("at-head") / "head.db"
    eng = make_engine(str(path))
    ensure_current(eng)
    eng.dispose()  # the last connection checkpoints the WAL into the file and removes it
    assert not path.with_name(path.name + "-wal").exists()
    return path


@pytest.fixture(scope="session")
def pg_at_head(pg_admin: Engine) -> Iterator[str]:
    """The name of a PostgreSQL database migrated to head once a session, the template `engine`'s
    databases are created from (CREATE DATABASE ... TEMPLATE: 0.05 s against a 0.3 s migration)."""
    name = f"farm_at_head_{uuid.uuid4().hex[:12]}"
    with pg_admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    eng = make_engine(pg_admin.url.set(database=name).render_as_string(hide_password=False))
    ensure_current(eng)
    eng.dispose()  # a template must have no connections while it is copied
    yield name
    with pg_admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def engine(request: pytest.FixtureRequest, target: str) -> Iterator[Engine]:
    """A writable engine on a database at head: a copy of the session's migrated database (SQLite
    file or PostgreSQL template), which ensure_current then finds at head. The migrations themselves
    are test_migrations.py's and test_store.py's (an empty database created at head)."""
    url = make_url(target) if "://" in target else None
    if url is None:
        shutil.copyfile(request.getfixturevalue("sqlite_at_head"), target)
    else:
        template, admin = request.getfixturevalue("pg_at_head"), request.getfixturevalue("pg_admin")
        with admin.connect() as conn:  # pg_target's empty database, made again from the template
            conn.exec_driver_sql(f'DROP DATABASE "{url.database}" WITH (FORCE)')
            conn.exec_driver_sql(f'CREATE DATABASE "{url.database}" TEMPLATE "{template}"')
    eng = make_engine(target)
    ensure_current(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def sqlite_target(tmp_path: Path) -> str:
    return str(tmp_path / "results.db")


@pytest.fixture
def farm_main(monkeypatch: pytest.MonkeyPatch):
    """cli.main (its error handling and exit codes) with only the database commands registered."""

    def build_parser() -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog="farm")
        sub = parser.add_subparsers(dest="command", required=True)
        db_cli.register(sub, cli.add_db_argument)
        return parser

    monkeypatch.setattr(cli, "build_parser", build_parser)
    return cli.main


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    """Where exports go: apart from the SQLite file and its -wal and -shm."""
    (tmp_path / "out").mkdir()
    return tmp_path / "out"
