"""`make_engine`: a `--db` path or URL -> a configured SQLAlchemy engine, or a DatabaseError that says why.

SQLite (a path, or `sqlite:///PATH`) is set up for one writer and many readers at once: WAL so
readers never wait for the writer, a 30 s busy timeout, foreign keys on, and transactions that
SQLAlchemy begins itself (pysqlite's legacy mode starts none for SELECT or DDL, so a migration
would commit statement by statement). A writable engine begins every transaction with BEGIN
IMMEDIATE: the write lock is taken up front, where the busy timeout applies, instead of at the
first INSERT of a read-then-write transaction, where SQLite fails at once with "database is
locked" if another writer committed in between.

PostgreSQL is a URL (`postgresql://...` uses psycopg 3); readonly makes the session read-only.

A read-only SQLite open of a WAL database in a folder this process cannot write (a read-only
mount, another user's folder) cannot create the -shm file SQLite needs; where the -wal and -shm
files are not already there (the last writer checkpointed and removed them on close), the file is
opened `immutable`, which needs neither.

Every check happens before anything is created: a bad target leaves the file system and the
target untouched.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

from db.errors import DatabaseError

# A writer holds the lock for one batch (25 ms for 500 rows, 0.3 s for 10k) or a WAL checkpoint
# (seconds at most): 30 s means a second writer waits instead of failing. WAL readers never wait
# for a writer; they only need the timeout while a connection recovers the WAL after a crash.
SQLITE_BUSY_TIMEOUT_S = 30
# An unreachable PostgreSQL host should fail the command, not hang it.
PG_CONNECT_TIMEOUT_S = 10
_SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_DRIVERS = ("sqlite", "sqlite+pysqlite")
_PG_DRIVERS = ("postgres", "postgresql", "postgresql+psycopg")
_URL_HELP = "use a file path, sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
DEFAULT_TARGET = "results.db"
TARGET_VARIABLE = "FARM_DB"


def default_target() -> str:
    """The results database a command uses without `--db`: $FARM_DB, else results.db in the
    working directory. The one place this default lives (CLI and dashboard both ask here)."""
    return os.environ.get(TARGET_VARIABLE) or DEFAULT_TARGET


def make_engine(target: str, *, readonly: bool = False) -> Engine:
    """An engine for `target` (a SQLite path or an SQLAlchemy URL), checked by opening one connection.

    readonly: SQLite opens the file with mode=ro (never creates it); PostgreSQL sessions default to
    read-only transactions. Raises DatabaseError naming the target and what to do.
    """
    url = _parse(target)
    if url.get_backend_name() == "sqlite":
        engine = _sqlite_engine(_sqlite_path(url, target, readonly), readonly)
    else:
        engine = _postgres_engine(url, readonly)
    try:
        with engine.connect() as conn:
            # Reading the schema catches a damaged SQLite file here, not at the first query.
            conn.exec_driver_sql(
                "SELECT COUNT(*) FROM sqlite_master" if engine.dialect.name == "sqlite" else "SELECT 1"
            )
    except DBAPIError as exc:
        engine.dispose()
        raise DatabaseError(_connect_failure(engine, exc)) from exc
    return engine


def check_target(target: str) -> None:
    """Raise DatabaseError now if `target` cannot be opened for writing: a SQLite path is checked
    without creating anything, a server by connecting once (a wrong URL, an unreachable host or a
    bad password). What a command calls before starting slower work that would be lost."""
    url = _parse(target)
    if url.get_backend_name() == "sqlite":
        _sqlite_path(url, target, readonly=False)
    else:
        make_engine(target).dispose()


def sqlite_file(target: str) -> Path | None:
    """The file a SQLite `--db` target names (resolved: symlinks followed), or None for a server URL
    or a target that is no database URL. Never raises, never creates anything."""
    try:
        url = _parse(target)
    except DatabaseError:
        return None
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database).expanduser().resolve()


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file: the same path once symlinks are resolved, or one inode (a hard
    link). What `farm db merge` and every writer of a file check against the databases they read."""
    a, b = Path(a).expanduser(), Path(b).expanduser()
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # either does not exist (yet): only a path could make them one
        return False


# The tables that make a SQLite file a farm results database (any one of them is enough: a database
# half-way through its first migration holds alembic_version alone).
FARM_TABLES = frozenset({"alembic_version", "measurements", "sweeps", "environments"})


def is_farm_database(path: Path) -> bool:
    """Whether `path` is a SQLite file holding the farm's tables. Opened read-only and immutable, so
    that looking changes nothing (no -wal or -shm file is created) and a locked file still answers."""
    path = Path(path).expanduser()
    try:
        with path.open("rb") as f:
            if f.read(len(_SQLITE_MAGIC)) != _SQLITE_MAGIC:
                return False
    except OSError:
        return False
    try:
        conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1", uri=True)
        try:
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error:
        return True  # SQLite's header, unreadable tables: a damaged database, still not a file to replace
    return bool(names & FARM_TABLES)


def describe(engine: Engine) -> str:
    """The target as a user would type it back: the SQLite path, or the URL without its password."""
    if engine.dialect.name == "sqlite":
        return str(engine.url.database)
    return engine.url.render_as_string(hide_password=True)


def display_target(target: str) -> str:
    """A `--db` target as messages, logs and pages may show it: a URL with its password masked
    (SQLAlchemy's render_as_string(hide_password=True): `postgresql://user:***@host/db`), a path as
    given. Never raises: a target that is no URL is masked by pattern."""
    if "://" not in target:
        return target
    try:
        return make_url(target).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return mask_passwords(target)


def mask_passwords(text: str) -> str:
    """Any text (an error message, a command line) with the passwords of the URLs in it masked."""
    return re.sub(r"://([^:/@\s]*):[^@/\s]*@", r"://\1:***@", text)


def _parse(target: str) -> URL:
    if "://" not in target:
        if not target.strip():
            raise DatabaseError(f"no database given; {_URL_HELP}")
        return URL.create("sqlite", database=target)
    try:
        url = make_url(target)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise DatabaseError(f"{display_target(target)!r} is not a database URL; {_URL_HELP}") from exc
    if url.drivername in _SQLITE_DRIVERS:
        return url
    if url.drivername in _PG_DRIVERS:
        return url.set(drivername="postgresql+psycopg")
    raise DatabaseError(f"unsupported database URL scheme {url.drivername!r} in {_safe(url)}; {_URL_HELP}")


def _safe(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def _sqlite_path(url: URL, target: str, readonly: bool) -> Path:
    """The database file, after checking that opening it as asked cannot fail or damage anything."""
    if not url.database or url.database == ":memory:" or url.query:
        raise DatabaseError(
            f"{target!r}: in-memory and URI-style SQLite targets are not supported (each connection "
            "would see its own empty database); give a file path"
        )
    path = Path(url.database).expanduser().absolute()
    folder = path.parent
    if path.is_dir():
        raise DatabaseError(f"{path} is a folder; give the path of a database file in it")
    if not folder.is_dir():
        raise DatabaseError(f"cannot open {path}: folder {folder} does not exist (create it first)")
    if path.exists():
        if not os.access(path, os.R_OK):
            raise DatabaseError(f"cannot read {path}: permission denied")
        with path.open("rb") as f:
            header = f.read(len(_SQLITE_MAGIC))
        if header and header != _SQLITE_MAGIC:
            raise DatabaseError(f"{path} is not a SQLite database (left unchanged); give another path")
        if not readonly and not os.access(path, os.W_OK):
            raise DatabaseError(f"cannot write {path}: the file is read-only (read commands still work)")
    elif readonly:
        raise DatabaseError(
            f"no database at {path}; create one with `farm db upgrade --db {path}` or run a sweep into it"
        )
    # WAL keeps two side files (-wal, -shm) next to the database: writing needs the folder writable.
    if not readonly and not os.access(folder, os.W_OK | os.X_OK):
        raise DatabaseError(f"cannot write {path}: folder {folder} is read-only; choose a writable folder")
    return path


def _needs_immutable(path: Path) -> bool:
    """A read-only open that SQLite could not start: the folder is not writable, so a WAL database's
    -shm cannot be created, and the -wal and -shm files are not there to be read (module docstring)."""
    folder = path.parent
    if os.access(folder, os.W_OK | os.X_OK) and not _read_only_mount(folder):
        return False
    side = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    return not all(p.exists() for p in side)


def _read_only_mount(folder: Path) -> bool:
    """A folder on a read-only file system (os.access says writable to root even there)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _sqlite_engine(path: Path, readonly: bool) -> Engine:
    # A file: URI so that mode=ro is honoured (and never creates the file) and odd characters in
    # the path (?, #, %) stay part of the name.
    uri = f"file:{quote(str(path))}?mode={'ro' if readonly else 'rwc'}"
    if readonly and _needs_immutable(path):
        uri += "&immutable=1"

    def connect() -> sqlite3.Connection:
        # isolation_level=None: the driver emits no BEGIN of its own; the "begin" hook below does.
        return sqlite3.connect(
            uri, uri=True, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )

    engine = create_engine(URL.create("sqlite", database=str(path)), creator=connect)
    begin = "BEGIN" if readonly else "BEGIN IMMEDIATE"

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        dbapi_conn.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
        dbapi_conn.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            _set_wal(dbapi_conn)
        # In WAL mode NORMAL loses at most the last commits on power loss, never consistency,
        # and skips an fsync per commit.
        dbapi_conn.execute("PRAGMA synchronous = NORMAL")

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        conn.exec_driver_sql(begin)

    return engine


def _set_wal(dbapi_conn: sqlite3.Connection) -> None:
    """Switch the file to WAL (stored in the file: every later connection inherits it).

    Two processes opening a new file at once race to switch it, and the loser gets "database is
    locked" at once, without the busy handler (5 failures in 60 trials of 3 threads here): retry
    for as long as the busy timeout.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    while True:
        try:
            dbapi_conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _postgres_engine(url: URL, readonly: bool) -> Engine:
    connect_args: dict[str, object] = {"connect_timeout": PG_CONNECT_TIMEOUT_S}
    if readonly:
        connect_args["options"] = "-c default_transaction_read_only=on"
    try:
        return create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    except (ModuleNotFoundError, NoSuchModuleError) as exc:
        raise DatabaseError(
            f"PostgreSQL needs the psycopg driver: pip install 'triton-matmul-farm[postgres]' ({exc})"
        ) from exc


def _connect_failure(engine: Engine, exc: DBAPIError) -> str:
    reason = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
    where = describe(engine)
    if engine.dialect.name == "sqlite":
        return f"cannot open SQLite database {where}: {reason}"
    return (
        f"cannot connect to {where}: {reason}. Check the URL, that the server is running and reachable, "
        "and the user name and password"
    )
