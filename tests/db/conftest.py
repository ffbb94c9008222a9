"""Fixtures: the same tests run on a real SQLite file and a real PostgreSQL server (tests/pgserver.py's
`pg_target`: a new database on a throwaway server, or on FARM_TEST_PG_URL's)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

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


@pytest.fixture
def engine(target: str) -> Iterator[Engine]:
    """A writable engine on a database at head."""
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
