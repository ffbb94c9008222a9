"""Every page on the 100,000-row database: no exception, and each chart holds what the queries return."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import dashkit as kit
import pandas as pd
import pytest
from pagekit import PAGES, charts, layer, render, texts
from sqlalchemy import Connection

from dashboard import charts as chartkit
from dashboard import frames
from db import queries
from db.engine import make_engine

GPU, DTYPE = kit.H200.gpu_name, "bfloat16"  # the page defaults: the GPU with most rows, bfloat16
SCOPE = dict(gpu_name=GPU, dtype=DTYPE)


def same_rows(got: pd.DataFrame, want: pd.DataFrame, columns: list[str]) -> None:
    """The chart's rows are the query's rows (order aside) on these columns."""
    key = columns[: min(len(columns), 6)]
    a = got[columns].sort_values(key).reset_index(drop=True)
    b = want[columns].sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def check_overview(at, conn: Connection) -> None:
    by_status, by_gpu = charts(at)
    counts = layer(by_status, "measurements by status").data
    assert dict(zip(counts.status, counts.measurements)) == queries.summary(conn)["by_status"]
    assert counts.measurements.sum() == 100_000
    assert f"{kit.INTERPRETER.gpu_name} (CPU times, not GPU timings)" in set(
        layer(by_gpu, "measurements by GPU").data.gpu
    )
    assert any("interpreter" in w for w in texts(at, "warning"))


def check_shape(at, conn: Connection) -> None:
    configs, _roofline = charts(at)
    best, every = (d.value for d in at.dataframe)
    m, n, k = (int(x) for x in at.selectbox(key="shape_pick").value.split("x"))
    ok = queries.results(conn, **SCOPE, status="ok", m_range=(m, m), n_range=(n, n), k_range=(k, k))
    assert len(every) == len(ok.dropna(subset=["ms"])) and every.us.is_monotonic_increasing  # times in us
    assert sorted(best.variant) == sorted(ok.variant.unique())
    assert len(layer(configs, "configs of the shape", "point").data) == min(len(every), 40)


def check_splitk(at, conn: Connection) -> None:
    scatter, curve = charts(at)
    want = frames.splitk_table(queries.splitk_best(conn, **SCOPE))
    want = want[(want.tiles_per_sm > 0) & (want.speedup > 0)]
    best = layer(scatter, "best split against best unsplit", "point").data
    same_rows(best, want, ["m", "n", "k", "tiles_per_sm", "speedup"])
    eager = queries.splitk_eager(conn, **SCOPE)
    eager = eager.merge(want[["m", "n", "k"]], on=["m", "n", "k"])
    same_rows(layer(scatter, "eager speedup per shape").data, eager, ["m", "n", "k", "eager_speedup"])
    blocks = queries.splitk_speedup(conn, **SCOPE)
    blocks = blocks[(blocks.tiles_per_sm > 0) & (blocks.speedup > 0)]
    same_rows(layer(scatter, "same blocks").data, blocks, ["m", "n", "k", "block_m", "block_n", "speedup"])
    top = best.sort_values("speedup", ascending=False).iloc[0]
    assert at.selectbox(key="splitk_shape").value == top["shape"]
    m, n, k = (int(top[d]) for d in "mnk")
    expect = queries.splitk_curve(conn, gpu_name=GPU, dtype=DTYPE, m=m, n=n, k=k)
    line = layer(curve, "speedup per SPLIT_K", "line").data
    same_rows(line, expect, ["split_k", "ms", "speedup"])
    assert line.speedup.max() == pytest.approx(max(top.speedup, 1.0))  # the curve's best split is the dot


def check_grouping(at, conn: Connection) -> None:
    scatter, heatmap = charts(at)
    points = frames.grouping_points(queries.grouping_effect(conn, **SCOPE))
    shape_key = ["m", "n", "k", "group_m"]
    # One mark per shape and GROUP_SIZE_M, not per config (4,144 pairs): the median of the
    # grouping_effect view's speedups over the shape's configs, and its worst and best config.
    drawn = layer(scatter, "median gain per shape", "point").data
    time = drawn[drawn.measure == "time"]
    want = points.groupby(shape_key).speedup.agg(gain="median", gain_lo="min", gain_hi="max", configs="size")
    same_rows(time, want.reset_index(), [*shape_key, "gain", "gain_lo", "gain_hi", "configs"])
    assert len(time) < len(points) / 5
    ranges = layer(scatter, "time gain range over configs", "rule").data
    same_rows(ranges, time[time.gain_hi > time.gain_lo], [*shape_key, "gain_lo", "gain_hi"])
    # Every sample GPU row has energy: each shape has a median energy gain, the query's; the chart draws
    # those within its energy axis and counts the rest in its subtitle.
    pairs = queries.grouping_gain(conn, **SCOPE)
    assert len(pairs) == len(points) == len(at.dataframe[0].value)  # the table lists every pair
    energy = pairs.groupby(shape_key).energy_gain.median().rename("gain").reset_index()
    low, high = chartkit.ENERGY_GAIN_AXIS
    inside = energy[energy.gain.between(low, high)]
    same_rows(drawn[drawn.measure == "energy"], inside, [*shape_key, "gain"])
    left_out = len(energy) - len(inside)
    assert (f"{left_out} energy gain(s) outside" in str(scatter["spec"])) == (left_out > 0)
    cells = layer(heatmap, "median speedup per cell", "rect").data
    same_rows(cells, frames.grouping_heatmap(points), ["size_lo", "group_m", "speedup", "n_configs"])
    assert set(cells.group_m) == {4, 8}


def check_cublas(at, conn: Connection) -> None:
    scatter, roof = charts(at)
    want = queries.vs_cublas(conn, **SCOPE)
    same_rows(layer(scatter, "best Triton against cuBLAS per shape").data, want, ["m", "n", "k", "ratio"])
    points = layer(roof, "best Triton and cuBLAS per shape", "point").data
    n_shapes = len(queries.best_configs(conn, **SCOPE).drop_duplicates(["m", "n", "k"]))
    assert len(points) == n_shapes + len(want)
    assert set(layer(roof, "roofs").data.tflops.round(1)) >= {kit.H200.peak_tflops}


def check_explorer(at, conn: Connection) -> None:
    assert len(at.dataframe[0].value) == 5_000
    assert "100,000 measurements match (the first 5,000 are shown" in at.caption[0].value
    assert "(100,000 rows" in at.get("download_button")[0].label


def check_accuracy(at, conn: Connection) -> None:
    errors, nondeterminism = charts(at)
    acc = queries.accuracy(conn)
    same_rows(
        layer(errors, "relative error", "point").data, acc, ["variant", "dtype", "rel_err_max", "n_checked"]
    )
    atomic = layer(nondeterminism, "nondeterminism", "point").data
    assert set(atomic.variant) == {"splitk"}  # only the atomic variant differs between runs


def check_sweeps(at, conn: Connection) -> None:
    sweeps = at.dataframe[0].value
    assert sweeps.n_measurements.sum() == 100_000 and len(sweeps) == 5
    assert ["a100-large" in e and "failed" in e for e in texts(at, "error")] == [True]


def check_compare(at, conn: Connection) -> None:
    assert (at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value) == (1, 3)  # the two H200 hosts
    judged = queries.compare_runs(conn, run_a=1, run_b=3).judgement.points
    dots = layer(charts(at)[0], "points of both runs", "circle").data
    # 4,629 points, 1,242 flagged: the chart draws the 500 flagged farthest from 1, either way
    flagged = judged[judged.judgement != "same"]
    want = flagged.loc[(flagged.ratio_b_over_a.map(math.log).abs()).nlargest(500).index]
    assert len(judged) == 4629 and len(flagged) == 1242 and len(dots) == 500
    assert set(dots.judgement) == {"regressed", "improved"}
    same_rows(dots, want, ["variant", "dtype", "m", "n", "k", "config_key", "ratio_b_over_a", "judgement"])


def check_search(at, conn: Connection) -> None:
    assert "--search model --budget 10%" in texts(at, "info")[0] and not charts(at)


CHECKS: dict[str, Callable] = {
    "search": check_search,
    "overview": check_overview,
    "shape": check_shape,
    "splitk": check_splitk,
    "grouping": check_grouping,
    "cublas": check_cublas,
    "explorer": check_explorer,
    "accuracy": check_accuracy,
    "sweeps": check_sweeps,
    "compare": check_compare,
}
assert set(CHECKS) == set(PAGES)


@pytest.mark.parametrize("page", PAGES, ids=list(PAGES))
def test_page_on_100k_rows(big_db: Path, page: str) -> None:
    at = render(big_db, page)
    assert not at.exception, [e.value for e in at.exception]
    engine = make_engine(str(big_db), readonly=True)
    try:
        with engine.connect() as conn:
            CHECKS[page](at, conn)
    finally:
        engine.dispose()
