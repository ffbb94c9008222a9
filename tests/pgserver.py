"""A PostgreSQL server for the tests of every folder (registered in tests/conftest.py).

FARM_TEST_PG_URL names a server to use (its user must be allowed to CREATE DATABASE); otherwise a
throwaway cluster is started for the session (initdb into a temp dir, pg_ctl on a free port of
127.0.0.1, trust authentication, as user `postgres` when running as root) and deleted at the end.
Every test gets a database of its own (`pg_target`). No server binaries: the test fails, saying to
install them, unless FARM_SKIP_POSTGRES=1 skips it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from glob import glob
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, make_url

from tools.ports import free_port

PG_URL_VAR = "FARM_TEST_PG_URL"
SKIP_VAR = "FARM_SKIP_POSTGRES"


def _pg_bindir() -> Path | None:
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    # Debian keeps the server binaries off PATH, one folder per major version.
    found = glob("/usr/lib/postgresql/*/bin/pg_ctl")
    found.sort(key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(found[-1]).parent if found else None


class ThrowawayCluster:
    """A PostgreSQL cluster in a temp dir, tuned for tests (no fsync: its data dies with the session)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="farm-pg-"))
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                shutil.rmtree(self.root)
                pytest.fail(
                    "running as root needs a `postgres` user for the test server: useradd -r postgres"
                )
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        cmd = [*self.as_user, str(self.bindir / args[0]), *args[1:]]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            pytest.fail(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}\n{tail}")

    def start(self) -> None:
        data = str(self.root / "data")
        self._run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        opts = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl", "-D", data, "-l", str(self.root / "server.log"), "-o", opts, "-w", "-t", "60", "start"
        )

    def stop(self) -> None:
        subprocess.run(
            [
                *self.as_user,
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.root / "data"),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """A URL of a server where the tests may create and drop databases."""
    if os.environ.get(SKIP_VAR) == "1":
        pytest.skip(f"{SKIP_VAR}=1: PostgreSQL half skipped")
    if url := os.environ.get(PG_URL_VAR):
        yield url
        return
    bindir = _pg_bindir()
    if bindir is None:
        pytest.fail(
            "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql/*/bin: "
            f"install them (apt-get install -y postgresql), or set {PG_URL_VAR} to a server, "
            f"or {SKIP_VAR}=1 to skip the PostgreSQL half of the tests"
        )
    cluster = ThrowawayCluster(bindir)
    try:
        cluster.start()
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_admin(pg_admin_url: str) -> Iterator[Engine]:
    url = make_url(pg_admin_url)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    yield engine
    engine.dispose()


@pytest.fixture
def pg_target(pg_admin: Engine) -> Iterator[str]:
    """The URL of a new, empty database, dropped after the test."""
    name = f"farm_test_{uuid.uuid4().hex[:12]}"
    with pg_admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    yield pg_admin.url.set(database=name).render_as_string(hide_password=False)
    with pg_admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
