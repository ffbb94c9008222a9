"""`farm sweep --search model --train DB`: every --train database is checked before Ray starts; a bad
one is one line and exit 2, and nothing is written."""

import sqlite3

import pytest
from farmkit import ONE_POINT_SPEC, REPO, write_spec

from cli import main as farm
from cli.sweep import check_training_databases
from farm.options import SweepOptions


def _missing(path):
    pass


def _empty(path):
    path.touch()


def _not_sqlite(path):
    path.write_bytes(b"farm results, as text\n" * 200)


def _someone_elses(path):
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER)")


def _newer(path):
    # A revision this code does not know: a later version of the code wrote the database.
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        conn.execute("INSERT INTO alembic_version VALUES ('f00d')")


@pytest.mark.parametrize(
    ("make", "said"),
    [
        pytest.param(
            _missing, "no such database (--train reads a results database; it creates none)", id="missing"
        ),
        pytest.param(_empty, "is not a farm results database (it is empty)", id="empty-file"),
        pytest.param(_not_sqlite, "is not a SQLite database", id="damaged"),
        pytest.param(
            _someone_elses,
            "is not a farm results database: it has no schema revision but holds orders",
            id="other-tables",
        ),
        pytest.param(
            _newer, "schema revision f00d, which this version of the code does not know", id="newer"
        ),
    ],
)
def test_a_bad_train_database_is_one_line_before_ray(tmp_path, monkeypatch, capsys, make, said) -> None:
    def launch(self, plugin_sources):
        raise AssertionError("Ray started")

    monkeypatch.setattr(SweepOptions, "launch", launch)
    train, db = tmp_path / "other.db", tmp_path / "results.db"
    make(train)
    before = train.read_bytes() if train.exists() else None
    argv = ["sweep", "--spec", str(write_spec(tmp_path, ONE_POINT_SPEC)), "--db", str(db), "--workers", "1"]
    assert farm([*argv, "--backend", "interpreter", "--search", "model", "--train", str(train)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: --train") and err.count("\n") == 1 and said in err, err
    assert out == "" and not db.exists()
    assert (train.read_bytes() if train.exists() else None) == before


def test_a_farm_database_passes() -> None:
    """The H100 study the package ships: what a model search of another GPU would learn from (read-only:
    the check writes nothing, and the file stays as shipped)."""
    study = REPO / "dashboard" / "demo" / "h100-study.db"
    before = study.stat().st_mtime_ns
    check_training_databases([str(study)])  # nothing raised
    assert study.stat().st_mtime_ns == before
