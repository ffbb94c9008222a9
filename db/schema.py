"""Schema versions: Alembic glue built from the package's own files (works from any cwd and when installed).

A results database outlives the code that wrote it, so every open checks the revision it carries
(`ensure_current`): an empty database is created at head, an older one is refused with the command
that upgrades it, a newer one (written by a later version of this code) is refused outright.
Migrations run inside one transaction on both backends (SQLite and PostgreSQL both have
transactional DDL), so a failed upgrade leaves the database at its old revision.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, inspect

from db.engine import check_target, describe, make_engine, sqlite_file
from db.errors import DatabaseError

MIGRATIONS = Path(__file__).with_name("migrations")
VERSION_TABLE = "alembic_version"
_MIGRATION_LOCK = 0x7F4D_4442  # any fixed key: the farm's migrations share one PostgreSQL advisory lock


def alembic_config(
    connection: Connection | None = None, *, extra_version_locations: Sequence[Path] = ()
) -> Config:
    """The Alembic config for `db/migrations`; env.py runs the migrations on `connection`.

    extra_version_locations adds folders of revisions (tests use it to try a later revision).
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    cfg.set_main_option("path_separator", "os")
    locations = [MIGRATIONS / "versions", *extra_version_locations]
    cfg.set_main_option("version_locations", os.pathsep.join(str(p).replace("%", "%%") for p in locations))
    cfg.attributes["connection"] = connection
    return cfg


def head(cfg: Config | None = None) -> str:
    """The revision this code writes and expects."""
    script = ScriptDirectory.from_config(cfg or alembic_config())
    heads = script.get_heads()
    if len(heads) != 1:  # two revisions with the same parent: a merge revision is missing
        raise DatabaseError(f"the migrations have {len(heads)} heads ({', '.join(heads)}); expected one")
    return heads[0]


def current(engine: Engine) -> str | None:
    """The revision the database is at; None for an empty database (or one that is not ours)."""
    with engine.connect() as conn:
        return _revision(conn)


def ensure_current(engine: Engine, *, create: bool = True, cfg: Config | None = None) -> None:
    """Make sure the database is a farm results database at head, or raise DatabaseError saying what to do.

    create=True creates the schema in an empty database; read-only users pass create=False.
    cfg: another Alembic config (tests use one with a later revision).
    """
    target = describe(engine)
    rev = current(engine)
    expected = head(cfg)
    if rev == expected:
        return
    if rev is None:
        if create:  # upgrade() checks again that it is empty, under the migration lock
            upgrade(engine, cfg=cfg)
            return
        with engine.connect() as conn:
            _require_empty(conn, target)
        raise DatabaseError(
            f"{target} is not a farm results database (it is empty); "
            f"create it with `farm db upgrade --db {target}` or run a sweep into it"
        )
    _require_known(rev, target, cfg)
    raise DatabaseError(
        f"{target} is at schema revision {rev}, this code expects {expected}; "
        f"upgrade it with `farm db upgrade --db {target}` (back it up first if it matters)"
    )


def upgrade(engine: Engine, revision: str = "head", *, cfg: Config | None = None) -> None:
    _migrate(engine, command.upgrade, revision, cfg)


def downgrade(engine: Engine, revision: str, *, delete_data: bool = False, cfg: Config | None = None) -> None:
    """Migrate down to `revision` ("base" removes the schema).

    A downgrade that would drop stored measurements (below revision 0001) is refused and rolled
    back unless delete_data=True.
    """
    _migrate(engine, command.downgrade, revision, cfg, delete_data=delete_data)


def open_engine(target: str, *, readonly: bool = False) -> Engine:
    """make_engine + ensure_current: what a command or the dashboard opens (creates only when writable)."""
    engine = make_engine(target, readonly=readonly)
    try:
        ensure_current(engine, create=not readonly)
    except BaseException:
        engine.dispose()
        raise
    return engine


def _migrate(
    engine: Engine,
    fn: Callable[[Config, str], None],
    revision: str,
    cfg: Config | None,
    *,
    delete_data: bool = True,
) -> None:
    target = describe(engine)
    # One transaction for the checks, every migration step and the version stamp: an error rolls
    # all of it back (DDL is transactional on both backends).
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Two processes creating one new database at once: the second waits here, then finds it
            # at head (SQLite serialises them at BEGIN IMMEDIATE).
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
        rev = _revision(conn)
        if rev is None:
            _require_empty(conn, target)
        else:
            _require_known(rev, target, cfg)
        stored = _measurement_count(conn)
        config = cfg or alembic_config()
        config.attributes["connection"] = conn
        try:
            fn(config, revision)
        except CommandError as exc:
            raise DatabaseError(f"cannot migrate {target} to {revision!r}: {exc}") from exc
        if stored and not delete_data and _measurement_count(conn) is None:
            raise DatabaseError(
                f"migrating {target} to {revision!r} would drop its {stored:,} measurements; nothing was "
                "changed. Export or back it up first, then pass --delete-data (delete_data=True)"
            )


def _measurement_count(conn: Connection) -> int | None:
    """Rows in the measurements table; None when there is no such table."""
    if not inspect(conn).has_table("measurements"):
        return None
    return conn.exec_driver_sql("SELECT COUNT(*) FROM measurements").scalar_one()


def _revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


def _require_empty(conn: Connection, target: str) -> None:
    """Refuse to put the schema into a database that holds someone else's tables."""
    insp = inspect(conn)
    found = sorted({*insp.get_table_names(), *insp.get_view_names()} - {VERSION_TABLE})
    if found:
        listed = ", ".join(found[:8]) + (", ..." if len(found) > 8 else "")
        raise DatabaseError(
            f"{target} is not a farm results database: it has no schema revision but holds {listed}; "
            "use an empty database or a new file"
        )


def check_before_writing(target: str) -> None:
    """What a sweep checks before it starts slower work (Ray, the workers): that `target` can be written
    and, where it already holds a database, that the database is readable, a farm results database,
    and at this code's revision (DatabaseError otherwise). A newer revision or a damaged file used to
    be found only after Ray had started (5.6-6.5 s on the 2-core VM). Nothing is created or changed:
    a SQLite file that is not there yet is checked by path alone, an existing one opened read-only."""
    check_target(target)
    path = sqlite_file(target)
    if path is not None and (not path.exists() or path.stat().st_size == 0):
        return  # created by the sweep
    engine = make_engine(target, readonly=True)
    try:
        if current(engine) is None:
            with engine.connect() as conn:
                _require_empty(conn, describe(engine))
            return  # an empty database: the sweep creates the schema
        ensure_current(engine, create=False)
    finally:
        engine.dispose()


def known(rev: str, cfg: Config | None = None) -> bool:
    """Whether this code knows revision `rev` (False: a newer version of the code wrote it)."""
    script = ScriptDirectory.from_config(cfg or alembic_config())
    try:
        return script.get_revision(rev) is not None
    except CommandError:
        return False


def _require_known(rev: str, target: str, cfg: Config | None = None) -> None:
    if not known(rev, cfg):
        raise DatabaseError(
            f"{target} is at schema revision {rev}, which this version of the code does not know "
            f"(it knows up to {head(cfg)}): it was written by a newer version; use that version or later"
        )
