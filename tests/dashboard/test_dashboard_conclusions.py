"""The sentence each page opens with (db.conclusions), from crafted databases on both sides of it: the
conclusion flips when the data flip. Also how runs are named and which pair Compare opens on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from samples import H200, Batch, build, record
from sqlalchemy import Connection

from db import conclusions
from db.schema import open_engine

GPU = dict(gpu_name=H200.gpu_name, dtype="bfloat16")
SKINNY = (256, 384, 32768)  # 2x3 tiles of 128x128: 0.045 tiles per SM of an H200
SQUARE = (4096, 4096, 4096)  # 1,024 tiles: 7.8 per SM
BIG = (16384, 16384, 16384)  # operands 1.5 GiB: 26x the H200's 60 MiB L2


@contextmanager
def opened(path: Path, batches: list[Batch]) -> Iterator[Connection]:
    engine = open_engine(str(build(path, batches)), readonly=True)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def _one(tmp_path: Path, records, **batch) -> Iterator[Connection]:
    return opened(tmp_path / "crafted.db", [Batch(H200, records, sweep="crafted", **batch)])


# ---- Overview and Explorer: usable timings or mostly failures ----


@pytest.mark.parametrize(
    "n_failed, expected",
    [(1, "3 of 4 measurements on NVIDIA H200 are usable"), (5, "Most measurements here failed: 5 of 8")],
    ids=["mostly-ok", "mostly-failed"],
)
def test_overview_says_whether_the_rows_are_usable(tmp_path: Path, n_failed: int, expected: str) -> None:
    ok = [record("grouped", (512 * (i + 1), 512, 512)) for i in range(3)]
    failed = [
        record("grouped", (64, 64, 64 * (i + 1)), ms=None, status="compile_error") for i in range(n_failed)
    ]
    with _one(tmp_path, ok + failed) as conn:
        said = conclusions.overview(conn)
        assert said.startswith(expected), said
        assert "mostly compile_error" in said or n_failed == 1
        assert ("did not time" in conclusions.explorer(conn)) and "compile_error" in conclusions.explorer(
            conn
        )


def test_overview_names_a_last_sweep_that_did_not_finish(tmp_path: Path) -> None:
    with _one(tmp_path, [record()], sweep_status="interrupted") as conn:
        assert "the last sweep, #1 'crafted', is interrupted" in conclusions.overview(conn)
        assert "did not finish (#1)" in conclusions.sweeps_verdict(conn)


# ---- Shape and Versus cuBLAS: who wins ----


@pytest.mark.parametrize(
    "cublas_ms, shape_says, cublas_says",
    [
        (0.5, "cuBLAS beats Triton's best (grouped) by 2.00x", "cuBLAS is as fast or faster on all 1 shapes"),
        (
            2.0,
            "Triton's best beats cuBLAS by 2.00x",
            "beats cuBLAS beyond noise on 1 of 1 shapes, by up to 2.00x",
        ),
        (1.01, "within noise", "cuBLAS is as fast or faster"),
    ],
    ids=["cublas-wins", "triton-wins", "tie"],
)
def test_shape_and_cublas_name_the_winner(
    tmp_path: Path, cublas_ms: float, shape_says: str, cublas_says: str
) -> None:
    records = [record("grouped", SQUARE, ms=1.0), record("cublas", SQUARE, ms=cublas_ms)]
    with _one(tmp_path, records) as conn:
        said = conclusions.shape(conn, **GPU, shape=SQUARE)
        assert shape_says in said, said
        assert conclusions.cublas(conn, **GPU).startswith(cublas_says) or cublas_says in conclusions.cublas(
            conn, **GPU
        )


def test_shape_names_a_time_under_a_millisecond_in_us(tmp_path: Path) -> None:
    with _one(tmp_path, [record("grouped", SQUARE, ms=0.00925)]) as conn:
        assert "at 9.25 us" in conclusions.shape(conn, **GPU, shape=SQUARE)


# ---- Split-K: pays under one tile per SM, or nowhere ----


@pytest.mark.parametrize(
    "split_ms, expected",
    [
        (
            0.05,
            "Split-K pays on 1 of 1 shapes, 1 of them under one output tile per SM; "
            "the most at 256x384x32768, 4.00x",
        ),
        (0.25, "Split-K pays on none of the 1 shapes here (best 0.80x at 256x384x32768"),
    ],
    ids=["split-pays", "split-loses"],
)
def test_splitk_says_where_splitting_pays(tmp_path: Path, split_ms: float, expected: str) -> None:
    records = [record("splitk", SKINNY, ms=0.2), record("splitk", SKINNY, ms=split_ms, split_k=8)]
    with _one(tmp_path, records) as conn:
        said = conclusions.splitk(conn, **GPU)
        assert said.startswith(expected), said


# ---- Grouping: pays past L2 in every run, or nothing beyond noise ----


@pytest.mark.parametrize(
    "grouped_ms, expected",
    [
        (
            0.8,
            "Grouped program order pays once the operands outgrow the 60 MiB L2: "
            "up to 1.25x at 16384x16384x16384",
        ),
        (0.99, "Grouped program order gains nothing beyond noise here (best 1.010x, run #1)"),
    ],
    ids=["grouping-pays", "within-noise"],
)
def test_grouping_says_whether_grouped_order_pays(tmp_path: Path, grouped_ms: float, expected: str) -> None:
    records = [record("grouped", BIG, ms=1.0), record("grouped", BIG, ms=grouped_ms, group_m=8)]
    with _one(tmp_path, records) as conn:
        said = conclusions.grouping(conn, **GPU)
        assert said.startswith(expected), said


def test_grouping_reports_every_run_not_only_the_newest(tmp_path: Path) -> None:
    """Run 1 measured 1.25x, its repeat 1.10x: both show, each from its own rows."""
    run = lambda ms: [record("grouped", BIG, ms=1.0), record("grouped", BIG, ms=ms, group_m=8)]
    batches = [Batch(H200, run(0.8), sweep="grouping"), Batch(H200, run(1 / 1.1), sweep="grouping")]
    with opened(tmp_path / "runs.db", batches) as conn:
        gains = conclusions.grouping_gain_by_run(conn, **GPU)
        assert dict(zip(gains.sweep_id, gains.time_gain)) == pytest.approx({1: 1.25, 2: 1.1})
        assert conclusions.grouping(conn, **GPU).endswith("by run: #1 up to 1.25x, #2 up to 1.10x.")


# ---- Accuracy: within rounding, beyond it, or wrong ----


@pytest.mark.parametrize(
    "rel_err, status, expected",
    [
        (1.7e-3, "ok", "Every checked result is within bfloat16 rounding (2^-8)"),
        (2e-2, "ok", "No checked row is wrong, but grouped in bfloat16 errs by 0.02"),
        (0.5, "wrong", "1 checked rows are wrong: grouped bfloat16 (1)"),
    ],
    ids=["within-rounding", "beyond-rounding", "wrong"],
)
def test_accuracy_says_whether_errors_are_rounding(
    tmp_path: Path, rel_err: float, status: str, expected: str
) -> None:
    records = [
        record("grouped", SQUARE),
        record("grouped", (4096, 4096, 2048), rel_err=rel_err, status=status),
    ]
    with _one(tmp_path, records) as conn:
        said = conclusions.accuracy_verdict(conn)
        assert said.startswith(expected), said


# ---- Compare: runs by name, never a run against itself, the newest pair that shares points ----


def _runs(tmp_path: Path, second_ms: float) -> Iterator[Connection]:
    """Runs 1 and 2 time the same two points (run 2 at second_ms); run 3, newest, times another shape."""
    points = lambda ms: [record("grouped", SQUARE, ms=ms), record("grouped", BIG, ms=ms * 10)]
    batches = [
        Batch(H200, points(1.0), sweep="grouping"),
        Batch(H200, points(second_ms), sweep="grouping"),
        Batch(H200, [record("splitk", SKINNY, ms=0.1)], sweep="splitk"),
    ]
    return opened(tmp_path / "runs.db", batches)


@pytest.mark.parametrize(
    "second_ms, expected",
    [
        (1.0, "Run #2 reproduces run #1: 100% of 2 shared points within noise"),
        (0.8, "Run #2 is faster than run #1: median time b / a 0.800"),
        (1.2, "Run #2 is slower than run #1: median time b / a 1.200"),
    ],
    ids=["same", "faster", "slower"],
)
def test_compare_opens_on_the_newest_pair_that_shares_points(
    tmp_path: Path, second_ms: float, expected: str
) -> None:
    with _runs(tmp_path, second_ms) as conn:
        # Run 3 is newest but shares no point: the pair is (1, 2), not (2, 3).
        assert conclusions.newest_shared_pair(conn) == (1, 2)
        said = conclusions.compare(conn, run_a=1, run_b=2)
        assert said.startswith(expected), said
        assert "says nothing" in conclusions.compare(conn, run_a=2, run_b=2)


def test_runs_are_named_by_date_preset_and_command(tmp_path: Path) -> None:
    with _runs(tmp_path, 1.0) as conn:
        names = conclusions.run_names(conn)
    assert list(names) == [3, 2, 1]  # newest first
    assert names[3].startswith("#3 ") and names[3].endswith(" splitk: farm sweep (splitk)")


@pytest.mark.parametrize(
    "command, expected",
    [
        (
            "/tmp/repo/cli/__main__.py sweep --preset grouping --db /tmp/x/g.db --no-progress --repeat",
            "farm sweep --preset grouping --repeat",
        ),
        ("farm sweep --spec llm.yaml --db=results.db", "farm sweep --spec llm.yaml"),
        (None, "command not stored"),
    ],
    ids=["module-path", "farm-entry-point", "none"],
)
def test_a_stored_command_reads_as_typed(command: str | None, expected: str) -> None:
    assert conclusions.short_command(command) == expected
