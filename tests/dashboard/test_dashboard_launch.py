"""`farm dashboard` / dashboard.launch: the database is checked before any server starts."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import ClassVar

import pytest

import cli
from dashboard import launch
from db.errors import DatabaseError


class FakePopen:
    """Records the command instead of starting Streamlit."""

    commands: ClassVar[list[list[str]]] = []

    def __init__(self, cmd: list[str]) -> None:
        FakePopen.commands.append(cmd)

    def wait(self) -> int:
        return 3


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> type[FakePopen]:
    FakePopen.commands = []
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


def test_runs_streamlit_on_the_app_with_the_db_after_double_dash(dbs: dict[str, Path], no_server) -> None:
    db = str(dbs["small"])
    assert cli.main(["dashboard", "--db", db, "--port", "8642", "--headless"]) == 3  # Streamlit's status
    [cmd] = no_server.commands
    assert cmd[1:5] == ["-m", "streamlit", "run", str(launch.APP)]
    assert cmd[cmd.index("--server.port") + 1] == "8642"
    assert cmd[cmd.index("--server.headless") + 1] == "true"
    assert cmd[-3:] == ["--", "--db", db]


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
