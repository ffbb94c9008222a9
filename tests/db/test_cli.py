"""The `farm` database commands end to end: output, files, and exit code 2 on bad input with no trace left."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from dbkit import A100, HEAD, INTERPRETER, NOT_A_DB, read_only, rec, store, tree
from sqlalchemy import Engine, inspect

from cli import db as db_cli
from db.schema import current
from kernels.config import MatmulConfig
from kernels.tuned import TunedConfigs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def results(engine: Engine) -> Engine:
    shape = (4096, 4096, 512)
    store(
        engine,
        [
            rec("splitk", shape, split_k=4, ms=0.5, input_precision="tf32"),
            rec("splitk", shape, split_k=2, ms=0.75),
            rec("cublas", shape, ms=0.625),
            rec("grouped", (495, 5333, 71), group_m=8, ms=0.125),
            rec("tiled", shape, ms=0.1, status="wrong"),
        ],
    )
    store(engine, [rec("tiled", shape, dtype="float32", ms=2.0)], env=A100)
    store(engine, [rec("tiled", (64, 64, 64), ms=9.0, backend="interpreter")], env=INTERPRETER)
    return engine


def test_db_upgrade_creates_then_reports_current(farm_main, target: str, capsys) -> None:
    assert farm_main(["db", "upgrade", "--db", target]) == 0
    assert f"upgraded from empty to {HEAD}" in capsys.readouterr().out
    assert farm_main(["db", "upgrade", "--db", target]) == 0
    assert f"already at revision {HEAD}" in capsys.readouterr().out
    assert farm_main(["db", "current", "--db", target]) == 0
    assert f"revision {HEAD} (current)" in capsys.readouterr().out


def test_summary(farm_main, results: Engine, target: str, capsys) -> None:
    assert farm_main(["summary", "--db", target]) == 0
    out = capsys.readouterr().out
    assert "7 measurements, 3 environments, 0 sweeps" in out
    assert "by status:  ok 6, wrong 1" in out
    assert "by GPU:     NVIDIA H200 5, CPU (Triton interpreter) 1, NVIDIA A100-SXM4-80GB 1" in out


def test_best_prints_a_table(farm_main, results: Engine, target: str, capsys) -> None:
    assert farm_main(["best", "--db", target, "--gpu", "NVIDIA H200", "--shape", "4096x4096x512"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == db_cli.OBJECTIVE_HEADERS["kernel"]
    assert tuple(lines[1].split()) == db_cli.BEST_TABLE
    assert [line.split()[6:8] for line in lines[2:]] == [["splitk", "0.5000"], ["cublas", "0.6250"]]
    assert farm_main(["best", "--db", target, "--variant", "streamk"]) == 0
    assert "no ok measurement matches" in capsys.readouterr().out


def test_bad_shape_is_a_usage_error(farm_main, results: Engine, target: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        farm_main(["best", "--db", target, "--shape", "4096x4096"])
    assert exc.value.code == 2 and "is not MxNxK" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_export_view_round_trips(farm_main, results: Engine, target: str, out_dir: Path, suffix: str) -> None:
    out = out_dir / f"best{suffix}"
    assert farm_main(["export", "best_configs", "--db", target, "--out", str(out)]) == 0
    df = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert len(df) == 5 and list(df.columns)[:4] == ["id", "environment_id", "sweep_id", "gpu_name"]
    h200 = df[df.gpu_name == "NVIDIA H200"].sort_values("ms")
    assert h200.ms.tolist() == [0.125, 0.5, 0.625]
    assert h200.variant.tolist() == ["grouped", "splitk", "cublas"]
    assert [p.name for p in out_dir.iterdir()] == [out.name]  # no temporary file left behind


def test_export_explicit_format_and_empty_view(farm_main, engine: Engine, target: str, out_dir: Path) -> None:
    out = out_dir / "speedups.data"
    assert farm_main(["export", "vs_cublas", "--db", target, "--out", str(out), "--format", "parquet"]) == 0
    df = pd.read_parquet(out)
    assert df.empty and list(df.columns)[-1] == "ratio"


def test_export_best_json(farm_main, results: Engine, target: str, out_dir: Path) -> None:
    out = out_dir / "best.json"
    assert farm_main(["export-best", "--db", target, "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert (doc["format"], doc["version"]) == ("triton-matmul-farm/best-configs", 1)
    entries = {(e["gpu_name"], e["dtype"], e["variant"], e["k"]): e for e in doc["entries"]}
    assert len(entries) == 4 and not any(e["gpu_name"].startswith("CPU") for e in doc["entries"])
    e = entries[("NVIDIA H200", "bfloat16", "splitk", 512)]
    assert e["ms"] == 0.5 and (e["m"], e["n"]) == (4096, 4096) and isinstance(e["tflops"], float)
    assert e["config"] == {
        "block_m": 128,
        "block_n": 128,
        "block_k": 64,
        "group_m": 1,
        "split_k": 4,
        "num_warps": 8,
        "num_stages": 3,
        "input_precision": "tf32",
    }
    assert farm_main(["export-best", "--db", target, "--out", str(out), "--include-interpreter"]) == 0
    assert len(json.loads(out.read_text())["entries"]) == 5


@pytest.mark.parametrize(
    "extras",
    [
        pytest.param((("num_sms", 132),), id="int-with-underscore-name"),
        pytest.param((("mode", "swizzle"), ("ratio", 0.75)), id="text-and-float"),
        pytest.param((), id="none"),
    ],
)
def test_export_best_round_trips_config_extras(
    farm_main, engine: Engine, target: str, out_dir: Path, extras: tuple
) -> None:
    """A config with extras comes back from export-best -> TunedConfigs.load as the config measured."""
    config = MatmulConfig(block_m=64, block_n=32, block_k=16, split_k=2, num_warps=4, extras=extras)
    row = rec("streamk", (495, 5333, 71), block=(64, 32, 16), split_k=2, num_warps=4, num_stages=3, ms=0.25)
    row.config_key = config.key  # as the farm stores it (farm/plan.py): the only place extras live
    store(engine, [row])
    out = out_dir / "best.json"
    assert farm_main(["export-best", "--db", target, "--out", str(out)]) == 0
    (entry,) = TunedConfigs.load(out).entries
    assert (entry.variant, entry.m, entry.n, entry.k, entry.config) == ("streamk", 495, 5333, 71, config)
    assert entry.config.key == config.key


def test_downgrade_needs_consent_to_drop_data(farm_main, results: Engine, target: str, capsys) -> None:
    assert farm_main(["db", "downgrade", "base", "--db", target]) == 2
    assert "would drop its 7 measurements; nothing was changed" in capsys.readouterr().err
    assert current(results) == HEAD
    assert farm_main(["db", "downgrade", "base", "--db", target, "--delete-data"]) == 0
    assert current(results) is None and inspect(results).get_table_names() == ["alembic_version"]


# ---- bad input: exit 2, one "error:" line, nothing created or changed ----

READ_COMMANDS = [
    pytest.param(["summary"], id="summary"),
    pytest.param(["best"], id="best"),
    pytest.param(["db", "current"], id="db-current"),
    pytest.param(["export", "results", "--out", "{tmp}/out.csv"], id="export"),
    pytest.param(["export-best", "--out", "{tmp}/out.json"], id="export-best"),
]
BAD_DB = [
    pytest.param("{tmp}/missing.db", "no database at", id="missing-file"),
    pytest.param("{tmp}/nope/results.db", "does not exist", id="missing-folder"),
    pytest.param("{tmp}/data.csv", "is not a SQLite database", id="not-a-database"),
    pytest.param("{tmp}/empty.db", "is not a farm results database (it is empty)", id="empty-file"),
    pytest.param("oracle://scott@db/orcl", "unsupported database URL scheme 'oracle'", id="wrong-url"),
]


@pytest.mark.parametrize(("db", "message"), BAD_DB)
@pytest.mark.parametrize("command", READ_COMMANDS)
def test_read_commands_reject_bad_databases(farm_main, tmp_path: Path, capsys, command, db, message) -> None:
    (tmp_path / "data.csv").write_bytes(NOT_A_DB)
    (tmp_path / "empty.db").write_bytes(b"")
    before = tree(tmp_path)
    argv = [a.format(tmp=tmp_path) for a in command] + ["--db", db.format(tmp=tmp_path)]
    if command[0] == "db" and "empty" in db:
        assert farm_main(argv) == 0  # `db current` reports an empty database instead of failing
        assert "no schema (empty)" in capsys.readouterr().out
    else:
        assert farm_main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert tree(tmp_path) == before


def test_writing_commands_reject_bad_input(
    farm_main, results: Engine, target: str, out_dir: Path, capsys
) -> None:
    (out_dir / "data.csv").write_bytes(NOT_A_DB)
    before = tree(out_dir)
    db = ["--db", target]
    cases = [
        (["db", "upgrade", "--db", str(out_dir / "data.csv")], "is not a SQLite database"),
        (["export", "nope", *db, "--out", str(out_dir / "x.csv")], "unknown view 'nope'; the views are"),
        (["export", "results", *db, "--out", str(out_dir / "x.txt")], "cannot tell the format"),
        (["export", "results", *db, "--out", str(out_dir / "no" / "x.csv")], "does not exist"),
        (["export-best", *db, "--out", str(out_dir / "no" / "x.json")], "does not exist"),
        (["db", "downgrade", "zzzz", *db], "cannot migrate"),
    ]
    for argv, message in cases:
        assert farm_main(argv) == 2, argv
        assert message in capsys.readouterr().err, argv
    assert tree(out_dir) == before


def test_export_into_a_read_only_folder(
    farm_main, results: Engine, target: str, out_dir: Path, capsys
) -> None:
    with read_only(out_dir) as folder:
        assert farm_main(["export", "results", "--db", target, "--out", str(folder / "x.csv")]) == 2
        assert "cannot write" in capsys.readouterr().err
        assert list(folder.iterdir()) == []


def test_real_command_line_exit_code(tmp_path: Path) -> None:
    """`python -m cli` as a user runs it: one error line on stderr, status 2, no file created."""
    done = subprocess.run(
        [sys.executable, "-m", "cli", "summary", "--db", str(tmp_path / "results.db")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: no database at") and list(tmp_path.iterdir()) == []


def test_export_best_carries_each_launchers_host_time_where_it_was_measured(
    farm_main, engine: Engine, target: str, out_dir: Path
) -> None:
    """The dispatcher weighs a short call's host time (kernels.dispatch.Candidate.eager_wait_ms):
    export-best passes the stored host_ms on, and leaves it out for a row measured without it."""
    store(
        engine,
        [
            rec("grouped", (495, 5333, 71), ms=0.0103, host_ms=0.0201),
            rec("cublas", (495, 5333, 71), ms=0.0105, host_ms=None),
        ],
    )
    out = out_dir / "best.json"
    assert farm_main(["export-best", "--db", target, "--out", str(out)]) == 0
    entries = {e.variant: e for e in TunedConfigs.load(out).entries}
    assert entries["grouped"].host_ms == pytest.approx(0.0201) and entries["cublas"].host_ms is None
    written = {e["variant"]: e for e in json.loads(out.read_text())["entries"]}
    assert "host_ms" not in written["cublas"]
