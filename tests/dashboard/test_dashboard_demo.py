"""The demo database: `farm dashboard` with no --db opens it read-only when there are no results of one's
own, every page says it is demo data (GPU, versions, dates from its own rows), and the package ships it."""

from __future__ import annotations

import hashlib
import subprocess
import tomllib
from pathlib import Path

import dashkit as kit
import pytest
from pagekit import PAGES, REPO, render, texts
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

import cli
from dashboard import target
from db.engine import TARGET_VARIABLE
from db.errors import DatabaseError
from db.schema import open_engine

DEMO = target.DEMO_DB


class FakePopen:
    """Records the environment Streamlit would get instead of starting it."""

    envs: list[dict[str, str]]

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        FakePopen.envs.append(env or {})

    def wait(self) -> int:
        return 0


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> type[FakePopen]:
    FakePopen.envs = []
    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    return FakePopen


@pytest.fixture
def fresh_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with no results.db and no $FARM_DB: a fresh clone's first look."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(TARGET_VARIABLE, raising=False)
    return tmp_path


def served(argv: list[str], no_server: type[FakePopen]) -> str:
    """The database `farm dashboard ARGV` hands to Streamlit."""
    no_server.envs.clear()
    assert cli.main(["dashboard", "--headless", *argv]) == 0
    [env] = no_server.envs
    return env[TARGET_VARIABLE]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_no_results_of_ones_own_serves_the_demo_read_only(fresh_dir: Path, no_server, capsys) -> None:
    before = digest(DEMO)
    assert served([], no_server) == str(DEMO)
    assert "the demo database" in capsys.readouterr().out
    engine = open_engine(served([], no_server), readonly=True)
    try:
        with engine.connect() as conn, pytest.raises(OperationalError, match="readonly"):
            conn.execute(text("DELETE FROM measurements"))
    finally:
        engine.dispose()
    # Opened read-only in rollback-journal mode: no side files, not a byte changed.
    assert digest(DEMO) == before
    assert not list(DEMO.parent.glob("*-wal")) and not list(DEMO.parent.glob("*-shm"))
    assert not (fresh_dir / "results.db").exists()


def test_results_db_in_the_working_directory_wins_over_the_demo(fresh_dir: Path, no_server) -> None:
    kit.empty_db(fresh_dir / "results.db")
    assert served([], no_server) == "results.db"
    assert not target.is_demo("results.db")
    assert served(["--demo"], no_server) == str(DEMO)


def test_every_shipped_demo_file_is_labelled_demo_data(fresh_dir: Path) -> None:
    """The llm preset's demo (h200-llm.db) opened with --db gets the same banner as h200.db."""
    llm = DEMO.with_name("h200-llm.db")
    assert target.is_demo(str(llm)) and target.is_demo(f"sqlite:///{llm}")
    copy = fresh_dir / "h200-llm.db"
    copy.write_bytes(llm.read_bytes())
    assert not target.is_demo(str(copy))  # a copy elsewhere is the user's own database


@pytest.mark.parametrize(
    ("env", "argv", "want"),
    [
        ("from_env.db", [], "from_env.db"),
        ("from_env.db", ["--db", "from_flag.db"], "from_flag.db"),
        (None, ["--db", "from_flag.db"], "from_flag.db"),
    ],
    ids=["farm-db-variable", "flag-over-variable", "flag"],
)
def test_an_explicit_database_wins_over_results_db_and_demo(
    fresh_dir: Path, monkeypatch: pytest.MonkeyPatch, no_server, env, argv, want
) -> None:
    kit.empty_db(fresh_dir / "results.db")
    for name in ("from_env.db", "from_flag.db"):
        kit.empty_db(fresh_dir / name)
    if env:
        monkeypatch.setenv(TARGET_VARIABLE, env)
    assert served(argv, no_server) == want


def test_streamlit_run_without_arguments_resolves_the_same_way(fresh_dir: Path) -> None:
    from dashboard.target import parse_db

    assert parse_db(["app.py"]) == str(DEMO)
    kit.empty_db(fresh_dir / "results.db")
    assert parse_db(["app.py"]) == "results.db"
    assert parse_db(["app.py", "--", "--db", "x.db"]) == "x.db"


@pytest.mark.parametrize("page", PAGES, ids=list(PAGES))
def test_every_page_of_the_demo_carries_the_banner(page: str) -> None:
    at = render(DEMO, page)
    assert not at.exception, [e.value for e in at.exception]
    [banner] = [t for t in texts(at, "info") if "Demo data" in t]
    # From the database's own environments and sweeps rows.
    for fact in ("NVIDIA H200", "driver 580.159.04", "torch 2.11.0+cu130", "Triton 3.6.0"):
        assert fact in banner
    # The grouping preset twice (run 2 made with --repeat) and the whole splitk preset, all on 2026-12-04.
    assert "measured 2026-12-04:" in banner
    for run in ("#1 grouping (finished, 354 of 354 points)", "#2 grouping (finished, 354 of 354 points)"):
        assert run in banner
    assert "#3 splitk (finished, 588 of 588 points)" in banner


def test_other_databases_have_no_banner(dbs: dict[str, Path]) -> None:
    at = render(dbs["small"], "overview")
    assert not [t for t in texts(at, "info") if "Demo data" in t]


def test_the_demo_is_small_current_and_packaged() -> None:
    assert DEMO.stat().st_size < 10 * 2**20
    try:
        open_engine(str(DEMO), readonly=True).dispose()
    except DatabaseError as exc:  # a new schema revision: the dashboard would refuse the demo
        pytest.fail(f"{exc}\nMigrate the demo: python tools/demo_db.py --upgrade")
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert any(DEMO.relative_to(REPO / "dashboard").match(glob) for glob in data["dashboard"])
    shipped = subprocess.run(
        ["git", "ls-files", "dashboard/demo"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "dashboard/demo/h200.db" in shipped


def test_every_shipped_demo_is_in_rollback_journal_mode() -> None:
    """A WAL database leaves -wal and -shm files beside it at every read, even a read-only one (the Search
    page on h100-study.db did, in the repository's own folder) and cannot be read where that folder is
    read-only: tools/demo_db.py compacts each into journal_mode=DELETE (byte 18 of SQLite's header: 1)."""
    shipped = subprocess.run(
        ["git", "ls-files", "dashboard/demo/*.db"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert len(shipped) >= 3
    modes = {name: (REPO / name).read_bytes()[18] for name in shipped}
    assert modes == dict.fromkeys(shipped, 1)
