"""`farm dashboard` / dashboard.launch: the database is checked before any server starts; the server
listens on 127.0.0.1 unless opened; a URL's password reaches no command line and no output."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import pytest
from pagekit import REPO, app
from sqlalchemy import make_url

import cli
from dashboard import launch
from db.engine import display_target, make_engine
from db.errors import DatabaseError
from db.schema import ensure_current
from tools.ports import free_port

# Limits that hold on a loaded 2-core machine: a server starts in 5-15 s there and stops in 3-4 s; a
# limit is only reached by a server that never starts or never stops.
START_LIMIT_S = 120
STOP_LIMIT_S = 30


class FakePopen:
    """Records the command instead of starting Streamlit."""

    commands: ClassVar[list[list[str]]] = []

    envs: ClassVar[list[dict[str, str]]] = []

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        FakePopen.commands.append(cmd)
        FakePopen.envs.append(env or {})

    def wait(self) -> int:
        return 3


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> type[FakePopen]:
    FakePopen.commands, FakePopen.envs = [], []
    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    return FakePopen


def test_missing_database_exits_2_before_any_server(tmp_path: Path, no_server, capsys) -> None:
    missing = tmp_path / "nope.db"
    with pytest.raises(DatabaseError, match="no database at"):
        launch.run_dashboard(str(missing))
    assert cli.main(["dashboard", "--db", str(missing)]) == 2
    assert "error: no database at" in capsys.readouterr().err
    assert not no_server.commands and not missing.exists()


def test_foreign_sqlite_file_is_refused(tmp_path: Path, no_server) -> None:
    notes = tmp_path / "notes.db"
    import sqlite3

    with sqlite3.connect(notes) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    with pytest.raises(DatabaseError, match="not a farm results database"):
        launch.run_dashboard(str(notes))
    assert not no_server.commands


def test_runs_streamlit_on_the_app_with_the_db_in_its_environment(dbs: dict[str, Path], no_server) -> None:
    db = str(dbs["small"])
    assert cli.main(["dashboard", "--db", db, "--port", "8642", "--headless"]) == 3  # Streamlit's status
    [cmd], [env] = no_server.commands, no_server.envs
    assert cmd[1:5] == ["-m", "streamlit", "run", str(launch.APP)]
    assert cmd[cmd.index("--server.port") + 1] == "8642"
    assert cmd[cmd.index("--server.headless") + 1] == "true"
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert db not in cmd and env["FARM_DB"] == db


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3"], ids=["all", "one-address"])
def test_host_opens_the_server(dbs: dict[str, Path], no_server, host: str) -> None:
    launch.run_dashboard(str(dbs["small"]), host=host)
    [cmd] = no_server.commands
    assert cmd[cmd.index("--server.address") + 1] == host


def _children(pid: int) -> list[int]:
    """Every descendant of pid, from /proc/*/stat (field 4 is the parent's pid)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(text.rsplit(")", 1)[1].split()[1])
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        todo += kids
    return out


def _listening(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) listening on port."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:
                found.add(addr)
    return found


def _start(cmd: list[str], out) -> subprocess.Popen:
    """A real `farm dashboard` in its own session, with SIGINT as a terminal's foreground process gets it:
    a shell's background job (`make test &`) starts its children with SIGINT ignored, and a parent that
    inherits that never sees a SIGINT (a fresh clone's full run under `nohup ... &` timed out at the stop;
    so does one under `trap '' INT`)."""
    return subprocess.Popen(
        cmd,
        cwd=REPO,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@pytest.mark.postgres
def test_password_reaches_no_command_line_and_no_output(pg_target: str, tmp_path: Path) -> None:
    """A real `farm dashboard` on a PostgreSQL URL with a password (the test server trusts any)."""
    url = make_url(pg_target).set(password="secret").render_as_string(hide_password=False)
    ensure_current(make_engine(url))
    log = tmp_path / "server.log"
    port = free_port()
    cmd = [sys.executable, "-m", "cli", "dashboard", "--db", url, "--port", str(port), "--headless"]
    with log.open("w") as out:
        proc = _start(cmd, out)
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while not _listening(port):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        children = _children(proc.pid)
        assert children, "farm dashboard started no process"
        for pid in children:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            assert not any(b"secret" in a for a in args), args
        assert any(b"streamlit" in Path(f"/proc/{p}/cmdline").read_bytes() for p in children)
        assert _listening(port) == {"0100007F"}  # 127.0.0.1 only, no 0.0.0.0 and no IPv6
        with app(url) as at:  # the pages name the database without its password
            shown = " ".join(c.value for c in at.sidebar.caption)
            assert "***" in shown and "secret" not in shown
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(STOP_LIMIT_S)
    said = log.read_text()
    assert "postgres:***@" in said and "secret" not in said


def test_display_target_masks_passwords() -> None:
    assert (
        display_target("postgresql://u:secret@db.example:5432/farm")
        == "postgresql://u:***@db.example:5432/farm"
    )
    assert (
        display_target("postgresql://u:secret@db.example:notaport/farm")
        == "postgresql://u:***@db.example:notaport/farm"
    )
    assert display_target("results/h200.db") == "results/h200.db"


@pytest.mark.parametrize(
    ("argv", "host"),
    [
        pytest.param([], "127.0.0.1", id="this-machine-by-default"),
        pytest.param(["--host", "0.0.0.0"], "0.0.0.0", id="all"),
    ],
)
def test_host_reaches_run_dashboard(monkeypatch: pytest.MonkeyPatch, argv: list[str], host: str) -> None:
    calls = []
    monkeypatch.setattr(launch, "run_dashboard", lambda db, **kw: calls.append((db, kw)) or 0)
    assert cli.main(["dashboard", "--db", "x.db", "--port", "8601", *argv]) == 0
    assert calls == [("x.db", {"port": 8601, "headless": False, "host": host})]


@pytest.mark.parametrize(
    ("signum", "status"),
    [
        pytest.param(signal.SIGTERM, 128 + signal.SIGTERM, id="sigterm"),
        pytest.param(signal.SIGINT, 130, id="sigint"),
    ],
)
def test_a_signal_to_the_parent_alone_stops_the_server(
    dbs: dict[str, Path], tmp_path: Path, signum, status
) -> None:
    """`kill PID` (or SIGINT to that PID alone, not its group) of a real `farm dashboard`: the Streamlit
    child ends with it and the port is free within 5 s. Before, SIGTERM left the child serving the port
    and SIGINT hung the parent waiting for it."""
    port = free_port()
    log = tmp_path / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "cli",
        "dashboard",
        "--db",
        str(dbs["small"]),
        "--port",
        str(port),
        "--headless",
    ]
    with log.open("w") as out:
        proc = _start(cmd, out)
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while not _listening(port):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        children = _children(proc.pid)
        assert children, "farm dashboard started no process"
        os.kill(proc.pid, signum)  # the parent alone
        sent = time.monotonic()
        # The server stops within launch.STOP_GRACE_S (3 s) and a moment; the limit is generous because a
        # loaded 2-core machine (a full test run beside other work) took over 5 s to schedule it all.
        assert proc.wait(STOP_LIMIT_S) == status, log.read_text()
        while _listening(port) or any(Path(f"/proc/{c}").exists() for c in children):
            assert time.monotonic() - sent < STOP_LIMIT_S, f"port {port} still held: {log.read_text()}"
            time.sleep(0.1)
    finally:
        # The whole session: a server orphaned by a failing parent is no longer its child.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(STOP_LIMIT_S)
