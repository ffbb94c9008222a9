"""benchmarks/scaling.py as it is run on a GPU host, here with logical GPUs: one CSV row per GPU count,
and a run stopped by --timeout-s stops the bench and writes no row of its own."""

import csv
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import pytest
from farmkit import REPO, TINY_SPEC, TWO_BATCH_POINTS, TWO_BATCH_SPEC, subprocess_env, write_spec

SCALING = str(REPO / "benchmarks" / "scaling.py")


@pytest.fixture
def ray_tmp():
    """A Ray temp dir of the test's own, so that no head of another test is joined (socket paths
    must stay under 108 bytes: /tmp)."""
    path = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _bench(tmp_path, ray_tmp, *args, spec_text=TWO_BATCH_SPEC):
    spec = write_spec(tmp_path, spec_text)
    table = tmp_path / "scaling.csv"
    command = [sys.executable, SCALING, "--spec", str(spec), "--csv", str(table), *args]
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    env = {**subprocess_env(), "RAY_TMPDIR": ray_tmp, "TMPDIR": str(own_tmp)}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # the runs' databases and Triton caches went with the bench (a run stopped at its timeout too)
    assert not list(own_tmp.glob("scaling-*"))
    rows = list(csv.DictReader(table.open())) if table.exists() else []
    return done.stdout, rows


@pytest.mark.slow
def test_a_row_per_gpu_count_with_the_regime_and_visit(tmp_path, ray_tmp):
    keep = tmp_path / "keep"
    out, rows = _bench(
        tmp_path, ray_tmp, "--gpus", "1", "2", "--regime", "interleaved", "--visit", "7", "--keep", str(keep)
    )
    assert [r["gpus"] for r in rows] == ["1", "2"], out
    for row in rows:
        assert row["points"] == str(TWO_BATCH_POINTS)
        assert (row["regime"], row["visit"]) == ("interleaved", "7")
        assert 0 < float(row["loop_s"]) < float(row["command_s"])
        assert 0 < float(row["first_point_s"]) < float(row["command_s"])
    assert (rows[0]["loop_efficiency"], rows[0]["command_efficiency"]) == ("1.0", "1.0")
    # rate(2) / (2 rate(1)), from the rows' times (rounded to 0.1 s: the bounds of that rounding)
    loop_1, loop_2 = float(rows[0]["loop_s"]), float(rows[1]["loop_s"])
    low, high = (loop_1 - 0.05) / (2 * (loop_2 + 0.05)), (loop_1 + 0.05) / (2 * (loop_2 - 0.05))
    assert low <= float(rows[1]["loop_efficiency"]) <= high
    # each run's database kept; the two-GPU run's work spread over both workers (the interpreter's
    # logical GPUs share one UUID, so the workers tell them apart here)
    with sqlite3.connect(keep / "scaling-gpus2.db") as conn:
        workers = conn.execute("SELECT COUNT(DISTINCT worker), COUNT(*) FROM measurements").fetchone()
    assert workers == (2, TWO_BATCH_POINTS)


@pytest.mark.slow
def test_a_run_past_its_timeout_stops_the_bench_without_a_row(tmp_path, ray_tmp):
    # 8 s: its local Ray is up (about 5 s here), its 27 points are not done (about 20 s); the
    # second GPU count is never run
    out, rows = _bench(tmp_path, ray_tmp, "--gpus", "1", "2", "--timeout-s", "8", spec_text=TINY_SPEC)
    assert "1 GPUs: the sweep ran past 8 s; stopping" in out
    assert "2 GPUs" not in out
    assert rows == []
