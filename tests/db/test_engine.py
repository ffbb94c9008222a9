"""make_engine: SQLite settings, transactions, read-only mode, and bad targets that must leave no trace."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from dbkit import NOT_A_DB, create, read_only, tree
from sqlalchemy import Engine, inspect, make_url, text
from sqlalchemy.exc import DBAPIError

from db.engine import make_engine
from db.errors import DatabaseError
from db.schema import ensure_current
from tools.ports import free_port

# (id, target builder from tmp_path, readonly, message fragment)
BAD_SQLITE: list[tuple[str, Callable[[Path], str], bool, str]] = [
    ("missing-folder", lambda d: str(d / "nope" / "results.db"), False, "does not exist (create it first)"),
    ("missing-folder-url", lambda d: f"sqlite:///{d}/nope/results.db", False, "does not exist"),
    ("folder-not-file", lambda d: str(d), False, "is a folder"),
    ("not-a-database", lambda d: str(d / "data.csv"), False, "is not a SQLite database (left unchanged)"),
    ("not-a-database-ro", lambda d: str(d / "data.csv"), True, "is not a SQLite database"),
    ("readonly-missing-file", lambda d: str(d / "results.db"), True, "no database at"),
    ("in-memory", lambda d: "sqlite://", False, "in-memory and URI-style SQLite targets are not supported"),
    ("unknown-scheme", lambda d: "mysql://user@host/db", False, "unsupported database URL scheme 'mysql'"),
    ("not-a-url", lambda d: "postgresql://user@host:notaport/db", False, "is not a database URL"),
    ("empty", lambda d: "  ", False, "no database given"),
]


@pytest.mark.parametrize(
    ("build", "readonly", "fragment"), [b[1:] for b in BAD_SQLITE], ids=[b[0] for b in BAD_SQLITE]
)
def test_bad_target_is_a_clear_error_and_leaves_no_trace(
    tmp_path: Path, build: Callable[[Path], str], readonly: bool, fragment: str
) -> None:
    (tmp_path / "data.csv").write_bytes(NOT_A_DB)
    before = tree(tmp_path)
    with pytest.raises(DatabaseError, match="^.*" + fragment.replace("(", r"\(").replace(")", r"\)")):
        make_engine(build(tmp_path), readonly=readonly)
    assert tree(tmp_path) == before
    assert not (tmp_path / "nope").exists()


def test_read_only_folder(tmp_path: Path) -> None:
    (tmp_path / "ro").mkdir()
    with read_only(tmp_path / "ro") as folder:
        with pytest.raises(DatabaseError, match=r"folder .*/ro is read-only; choose a writable folder"):
            make_engine(str(folder / "results.db"))
        assert list(folder.iterdir()) == []


def test_read_only_file_opens_read_only(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    create(str(path))
    before = path.read_bytes()
    with read_only(path):
        with pytest.raises(DatabaseError, match="the file is read-only"):
            make_engine(str(path))
        ro = make_engine(str(path), readonly=True)
        ensure_current(ro, create=False)
        ro.dispose()
    assert path.read_bytes() == before


def test_sqlite_connection_settings(sqlite_target: str) -> None:
    engine = make_engine(sqlite_target)
    with engine.connect() as conn:
        got = {p: conn.exec_driver_sql(f"PRAGMA {p}").scalar() for p in ("journal_mode", "busy_timeout")}
        got |= {p: conn.exec_driver_sql(f"PRAGMA {p}").scalar() for p in ("foreign_keys", "synchronous")}
    assert got == {"journal_mode": "wal", "busy_timeout": 30000, "foreign_keys": 1, "synchronous": 1}
    engine.dispose()


def test_writer_takes_the_write_lock_at_begin(sqlite_target: str) -> None:
    """BEGIN IMMEDIATE: a second writer waits at its BEGIN instead of failing at its first write."""
    writer = make_engine(sqlite_target)
    ensure_current(writer)
    reader = make_engine(sqlite_target, readonly=True)
    with writer.connect() as conn, conn.begin():
        other = sqlite3.connect(sqlite_target, timeout=0, isolation_level=None)
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            other.execute("BEGIN IMMEDIATE")
        other.close()
        with reader.connect() as r:  # readers are never blocked (WAL)
            assert r.execute(text("SELECT COUNT(*) FROM measurements")).scalar() == 0
    with reader.connect() as r, r.begin():  # a reader's transaction does not block a writer
        r.execute(text("SELECT COUNT(*) FROM measurements")).scalar()
        other = sqlite3.connect(sqlite_target, timeout=0, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        other.close()
    writer.dispose()
    reader.dispose()


def test_ddl_is_transactional(target: str) -> None:
    """pysqlite's legacy mode would have committed the CREATE TABLE on its own."""
    engine = make_engine(target)
    with engine.connect() as conn:
        trans = conn.begin()
        conn.execute(text("CREATE TABLE scratch (id INTEGER PRIMARY KEY)"))
        conn.execute(text("INSERT INTO scratch (id) VALUES (1)"))
        trans.rollback()
    assert inspect(engine).get_table_names() == []
    engine.dispose()


def test_readonly_engine_cannot_write(engine: Engine, target: str) -> None:
    ro = make_engine(target, readonly=True)
    with ro.connect() as conn, pytest.raises(DBAPIError, match=r"(?i)read-?only"):
        conn.execute(text("DELETE FROM sweeps"))
    ro.dispose()


def test_path_with_odd_characters(tmp_path: Path) -> None:
    path = tmp_path / "my results?#%.db"
    create(str(path))
    assert path.exists() and path.read_bytes()[:16] == b"SQLite format 3\x00"


def test_plain_postgresql_url_uses_psycopg(pg_target: str) -> None:
    plain = make_url(pg_target).set(drivername="postgresql").render_as_string(hide_password=False)
    engine = make_engine(plain)
    assert engine.dialect.driver == "psycopg"
    engine.dispose()


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        pytest.param(dict(port=None), "Connection refused", id="unreachable-server"),
        pytest.param(dict(username="nobody_here"), 'role "nobody_here" does not exist', id="wrong-user"),
        pytest.param(
            dict(database="no_such_db"), 'database "no_such_db" does not exist', id="missing-database"
        ),
    ],
)
def test_bad_postgresql_target(pg_target: str, change: dict, fragment: str) -> None:
    url = make_url(pg_target)
    if "port" in change:
        change = dict(port=free_port())
    bad = url.set(**change).render_as_string(hide_password=False)
    with pytest.raises(DatabaseError, match="cannot connect to postgresql") as err:
        make_engine(bad)
    assert fragment in str(err.value) and "Check the URL" in str(err.value)
