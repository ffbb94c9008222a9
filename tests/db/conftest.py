"""Fixtures: the same tests run on a real SQLite file and a real PostgreSQL server (tests/pgserver.py's
`pg_target`: a new database on a throwaway server, or on FARM_TEST_PG_URL's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

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
