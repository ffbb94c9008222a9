"""Writers never write onto a database: `farm export` and `farm export-best` onto the database they read
(its path, a symlink to it, a hard link of it) or onto any farm database are refused with one line and
exit status 2, the database byte for byte as it was. And the read commands around them: a WAL database
in a folder nobody may write still reads; `farm db current` on a newer revision suggests nothing that
would refuse."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from dbkit import create, read_only, rec, store

from db.engine import make_engine, same_file
from db.schema import head

COMMANDS = {
    "export-csv": ["export", "results", "--format", "csv"],
    "export-parquet": ["export", "results", "--format", "parquet"],
    "export-best": ["export-best"],
}


@pytest.fixture
def results_db(tmp_path: Path) -> Path:
    """A farm database with a few rows, checkpointed: the file alone holds it (no -wal, -shm)."""
    path = tmp_path / "results.db"
    create(str(path))
    engine = make_engine(str(path))
    store(
        engine,
        [rec("splitk", (4096, 4096, 512), split_k=4, ms=0.5), rec("cublas", (4096, 4096, 512), ms=0.6)],
    )
    engine.dispose()
    assert not path.with_name("results.db-wal").exists()
    return path


def _link(kind: str, db: Path) -> Path:
    if kind == "path":
        return db
    other = db.with_name(f"{kind}.db")
    if kind == "symlink":
        other.symlink_to(db)
    else:
        os.link(db, other)
    return other


@pytest.mark.parametrize("kind", ["path", "symlink", "hardlink"])
@pytest.mark.parametrize("command", list(COMMANDS), ids=list(COMMANDS))
def test_writer_onto_its_own_database_is_refused(farm_main, capsys, results_db, kind, command):
    before = results_db.read_bytes()
    out = _link(kind, results_db)
    code = farm_main([*COMMANDS[command], "--db", str(results_db), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: refusing to write"), err
    assert "it is the database this command reads" in err
    assert results_db.read_bytes() == before
    assert sorted(p.name for p in results_db.parent.iterdir()) == sorted(
        {"results.db", out.name}
    )  # no temporary file, no -wal left behind
    assert same_file(out, results_db)


@pytest.mark.parametrize("command", list(COMMANDS), ids=list(COMMANDS))
def test_writer_onto_another_farm_database_is_refused(farm_main, capsys, results_db, tmp_path, command):
    other = tmp_path / "other.db"
    create(str(other))
    before = other.read_bytes()
    code = farm_main([*COMMANDS[command], "--db", str(results_db), "--out", str(other)])
    assert code == 2
    assert "it is a farm results database" in capsys.readouterr().err
    assert other.read_bytes() == before


def test_export_over_an_ordinary_file_still_replaces_it(farm_main, results_db, tmp_path):
    out = tmp_path / "old.csv"
    out.write_text("old\n")
    assert farm_main(["export", "results", "--db", str(results_db), "--out", str(out)]) == 0
    assert out.read_text().startswith("id,") or "variant" in out.read_text().splitlines()[0]


def test_same_file_sees_paths_symlinks_and_hard_links(tmp_path):
    a = tmp_path / "a.db"
    a.write_bytes(b"x")
    (tmp_path / "s.db").symlink_to(a)
    os.link(a, tmp_path / "h.db")
    (tmp_path / "c.db").write_bytes(b"x")
    assert same_file(a, tmp_path / "s.db") and same_file(a, tmp_path / "h.db")
    assert same_file(a, tmp_path / "sub" / ".." / "a.db")
    assert not same_file(a, tmp_path / "c.db") and not same_file(a, tmp_path / "missing.db")


def test_read_commands_work_on_a_wal_database_in_a_read_only_folder(farm_main, capsys, results_db):
    """The -shm file a WAL reader needs cannot be created there: the file is opened immutable."""
    with sqlite3.connect(results_db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    with read_only(results_db.parent):
        assert farm_main(["summary", "--db", str(results_db)]) == 0
        assert farm_main(["best", "--db", str(results_db)]) == 0
        assert farm_main(["db", "current", "--db", str(results_db)]) == 0
    out = capsys.readouterr().out
    assert "2 measurements" in out and "splitk" in out and "(current)" in out


def test_db_current_on_a_newer_revision_suggests_no_upgrade(farm_main, capsys, results_db):
    with sqlite3.connect(results_db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'f00d'")
    assert farm_main(["db", "current", "--db", str(results_db)]) == 0
    out = capsys.readouterr().out
    assert "f00d" in out and "newer" in out and head() in out
    assert "farm db upgrade" not in out
