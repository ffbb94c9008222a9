"""`farm compare`, the regression gate, on copies of the shipped H200 demo's two grouping runs (runs 1 and
2: the same code, 354 shared points, 273 of them power-capped on a side): what it judges, what it leaves
unjudged and why, its exit status and its four output formats."""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

import cli
from db import schema
from db.engine import make_engine
from db.queries import compare as gate

DEMO = Path(__file__).resolve().parents[2] / "dashboard" / "demo" / "h200.db"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped demo, copied and brought to the code's schema revision (the read side refuses older)."""
    path = tmp_path_factory.mktemp("demo") / "h200.db"
    shutil.copyfile(DEMO, path)
    engine = make_engine(str(path))
    try:
        if schema.current(engine) != schema.head():
            schema.upgrade(engine)
    finally:
        engine.dispose()
    return path


def _copy(demo: Path, folder: Path, sql: str = "") -> Path:
    path = folder / "copy.db"
    shutil.copyfile(demo, path)
    if sql:
        with sqlite3.connect(path) as conn:
            conn.execute(sql)
    return path


def _raised(variant: str, factor: float) -> str:
    """Run 2's rows of one variant, every reading (ms, ms_p20, ms_p80) times factor."""
    return (
        f"UPDATE measurements SET ms = ms * {factor}, ms_p20 = ms_p20 * {factor}, ms_p80 = ms_p80 * {factor} "
        f"WHERE sweep_id = 2 AND variant = '{variant}'"
    )


def farm(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    """`farm compare ARGV`'s exit status, stdout and stderr (argparse exits itself on a bad option)."""
    try:
        code = cli.main(["compare", *argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_the_demos_two_runs_pass_and_the_power_capped_shapes_are_named_not_judged(
    demo: Path, capsys: pytest.CaptureFixture
) -> None:
    code, out, err = farm(capsys, "--db", str(demo))  # the newest two runs sharing points: 1 and 2
    assert (code, err) == (0, "")
    verdict = out.splitlines()[-1]
    assert verdict.startswith("OK: run #2 against run #1") and "195 not judged" in verdict
    shape_table = out.split("points not the same")[0].splitlines()
    lines = {line.split()[3]: line for line in shape_table if line.startswith("not judged")}
    # The two best times the power limiter moved by 13-14%, both cuBLAS: not called regressions.
    assert "1965 vs 1550 MHz" in lines["6144x6144x4096"] and "1.139" in lines["6144x6144x4096"]
    assert "1590 vs 1875 MHz" in lines["8192x4096x4096"] and "0.873" in lines["8192x4096x4096"]
    assert all("power-capped (sw_power_cap)" in line for line in lines.values())


@pytest.mark.parametrize(
    ("factor", "code"), [(1.10, 1), (1.02, 0)], ids=["raised-10pct-regressed", "raised-2pct-inside-noise"]
)
def test_one_variant_raised_fails_beyond_the_noise_and_passes_inside_it(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture, factor: float, code: int
) -> None:
    db = _copy(demo, tmp_path, _raised("cublas", factor))
    got, out, err = farm(capsys, "--db", str(db), "--runs", "1", "2", "--format", "json")
    assert (got, err) == (code, "")
    doc = json.loads(out)
    regressed = [p for p in doc["points"] if p["judgement"] == "regressed"]
    if code == 0:
        assert not regressed and doc["verdict"].startswith("OK") and doc["failed"] is False
        return
    # 16 of cuBLAS's 28 points were read unthrottled or capped at clocks within 1%: each is named; the 12
    # capped at clocks further apart stay "not judged"
    assert {p["variant_a"] for p in regressed} == {"cublas"} and len(regressed) == 16
    assert {(p["m"], p["n"], p["k"]) for p in regressed} >= {(1024, 1024, 4096), (12288, 12288, 12288)}
    assert all(p["ratio_b_over_a"] == pytest.approx(1.1, abs=0.02) for p in regressed)
    assert doc["verdict"].startswith("REGRESSED: run #2 against run #1: 16 points (worst: cublas")
    shapes = [s for s in doc["shapes"] if s["judgement"] == "regressed"]
    assert shapes and all(s["variant_a"] == "cublas" for s in shapes)


def test_by_shape_judges_the_bests_alone(demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """tiled's points raised 10% in run 2: 19 of them regress (exit 1), but no shape's best does (tiled
    wins three shapes in run 1, each capped at clocks over 1% apart), so --by shape passes."""
    db = _copy(demo, tmp_path, _raised("tiled", 1.10))
    assert farm(capsys, "--db", str(db))[0] == 1
    code, out, _ = farm(capsys, "--db", str(db), "--by", "shape")
    assert code == 0 and out.splitlines()[-1].startswith("OK") and "shape bests judged" in out


def test_runs_sharing_no_point_exit_2_in_one_line(demo: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, err = farm(capsys, "--db", str(demo), "--runs", "1", "3")  # grouping against split-K
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "share no ok point" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--runs", "1", "9"], "no sweep with id 9"),
        (["--threshold", "0%"], "give a percentage"),
    ],
    ids=["unknown-run", "threshold-zero"],
)
def test_bad_input_exits_2(demo: Path, capsys: pytest.CaptureFixture, argv: list[str], words: str) -> None:
    code, out, err = farm(capsys, "--db", str(demo), *argv)
    assert (code, out) == (2, "") and words in err and "Traceback" not in err


def test_damaged_database_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    code, out, err = farm(capsys, "--db", str(bad))
    assert (code, out) == (2, "") and err.startswith("error: ") and err.count("\n") == 1


def test_different_gpus_exit_2_unless_allowed(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The same runs, the new database's environment renamed an H100: --baseline pairs the demo's run 1
    against it only with --allow-gpu-change."""
    other = _copy(demo, tmp_path, f"UPDATE environments SET gpu_name = '{H100}'")
    argv = ["--db", str(other), "--baseline", str(demo), "--runs", "1", "2"]
    code, out, err = farm(capsys, *argv)
    assert (code, out) == (2, "") and "different GPUs" in err and H100 in err and err.count("\n") == 1
    code, out, _ = farm(capsys, *argv, "--allow-gpu-change", "--format", "json")
    points = json.loads(out)["points"]
    assert code == 0 and len(points) == 354 and {p["gpu_name"] for p in points} == {f"NVIDIA H200 -> {H100}"}


def test_baseline_defaults_to_the_newest_run_sharing_a_point(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """new.db holds run 2 alone (runs 1 and 3 deleted): the baseline's newest run sharing a point with it
    is run 2 of the demo (its run 3, split-K, shares none), so every point compares equal."""
    new = _copy(demo, tmp_path, "DELETE FROM measurements WHERE sweep_id != 2")
    code, out, _ = farm(capsys, "--db", str(new), "--baseline", str(demo), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and (doc["summary"]["run_a"], doc["summary"]["run_b"]) == (2, 2)
    assert {p["ratio_b_over_a"] for p in doc["points"]} == {1.0} and len(doc["points"]) == 354


@pytest.mark.parametrize("fmt", ["text", "csv", "json", "markdown"], ids=lambda f: f)
def test_every_format_reads_back(demo: Path, capsys: pytest.CaptureFixture, fmt: str) -> None:
    code, out, _ = farm(capsys, "--db", str(demo), "--format", fmt)
    assert code == 0
    if fmt == "json":
        doc = json.loads(out)
        assert len(doc["points"]) == 354 and len(doc["shapes"]) == 28 and doc["failed"] is False
    elif fmt == "csv":
        rows = pd.read_csv(io.StringIO(out))
        assert rows.level.value_counts().to_dict() == {"point": 354, "shape": 28}
        assert set(rows.judgement) == {"same", "not judged"}
    elif fmt == "markdown":
        assert out.startswith("**OK: run #2 against run #1") and "| judgement | b/a | shape |" in out
    else:
        assert out.splitlines()[-1].startswith("OK: run #2 against run #1")


def test_the_dashboards_comparison_carries_the_same_judgement(demo: Path) -> None:
    """compare_runs (the Compare runs page's query) holds judge's answer for the same rows."""
    from db.queries import compare_runs

    engine = make_engine(str(demo), readonly=True)
    try:
        with engine.connect() as conn:
            page = compare_runs(conn, 1, 2).judgement
            command = gate.compare(conn, 1, 2)
    finally:
        engine.dispose()
    pd.testing.assert_frame_equal(page.points, command.points)
    assert page.verdict() == command.verdict()
