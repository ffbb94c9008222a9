"""Every page under AppTest on the test databases: no exception, and each chart gets the expected rows."""

from __future__ import annotations

import io
import math
from pathlib import Path

import dashkit as kit
import pandas as pd
import pytest
from pagekit import PAGES, app, charts, layer, render, show, texts

from dashboard import cache, target
from dashboard.texts import GPU_LABEL, INTERPRETER_LABEL
from db import queries

H200, A100 = kit.H200.gpu_name, kit.A100.gpu_name


@pytest.fixture(scope="module")
def verdict_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return kit.splitk_verdict_db(tmp_path_factory.mktemp("verdict") / "verdict.db")


def label(shape: tuple[int, int, int]) -> str:
    return "x".join(map(str, shape))


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def by_key(df: pd.DataFrame, keys: list[str], values: list[str]) -> dict:
    """{tuple of keys: tuple of values} of a chart's rows (one value: not a tuple)."""
    out = {}
    for row in df.itertuples(index=False):
        key = tuple(getattr(row, k) for k in keys)
        vals = tuple(getattr(row, v) for v in values)
        out[key if len(key) > 1 else key[0]] = vals if len(vals) > 1 else vals[0]
    return out


def assert_close(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9), key


# ---- empty database: the same message on every page ----


@pytest.mark.parametrize("page", PAGES, ids=list(PAGES))
def test_empty_database_says_how_to_fill_it(dbs: dict[str, Path], page: str) -> None:
    at = render(dbs["empty"], page)
    no_exception(at)
    [info] = texts(at, "info")
    assert f"farm sweep --preset smoke --db {dbs['empty']}" in info
    assert not charts(at)


# ---- the small database: known values on every page ----


def test_overview_counts(dbs: dict[str, Path]) -> None:
    at = render(dbs["small"], "overview")
    no_exception(at)
    assert at.title[0].value == PAGES["overview"]
    assert [m.value for m in at.metric] == ["26", "23", "3", "2"]
    by_status, by_gpu = charts(at)
    assert by_key(layer(by_status, "measurements by status").data, ["status"], ["measurements"]) == {
        "ok": 23,
        "wrong": 1,
        "compile_error": 1,
        "timeout": 1,
    }
    assert by_key(layer(by_gpu, "measurements by GPU").data, ["gpu"], ["measurements"]) == {H200: 24, A100: 2}
    assert "small-a100" in texts(at, "success")[0] and not texts(at, "warning")


def test_splitk_plots_best_split_over_best_unsplit_per_shape_and_each_block_shape(
    dbs: dict[str, Path],
) -> None:
    with app(dbs["small"]) as at:
        show(at, "splitk")
        no_exception(at)
        scatter, curve = charts(at)
        best = layer(scatter, "best split against best unsplit", "point")
        assert_close(
            by_key(best.data, ["m", "n", "k"], ["tiles_per_sm", "split_split_k", "speedup"]),
            kit.SMALL_SPLITK_BEST,
        )
        assert best.encoding["x"]["scale"]["type"] == "log" and best.encoding["color"]["field"] == "k"
        assert {"shape", "verdict", "unsplit_config", "split_config"} <= {
            t["field"] for t in best.encoding["tooltip"]
        }
        bars = layer(scatter, "best split against best unsplit", "rule").data
        assert (bars.speedup_lo < bars.speedup).all() and (bars.speedup < bars.speedup_hi).all()
        same_blocks = layer(scatter, "same blocks", "circle")
        assert_close(
            by_key(
                same_blocks.data,
                ["m", "n", "k", "block_m", "block_n"],
                ["tiles_per_sm", "best_split_k", "speedup"],
            ),
            {(*s, *b): v for (s, b), v in kit.SMALL_SPLITK.items()},
        )
        assert layer(scatter, "one tile per SM", "rule").data.tiles_per_sm.tolist() == [1.0]
        assert layer(scatter, "speedup 1", "rule").data.speedup.tolist() == [1.0]
        # The table lists the dots' numbers, and the diamonds' eager ones.
        table = at.dataframe[0].value
        assert_close(
            by_key(table, ["shape"], ["speedup"]), {label(s): v[2] for s, v in kit.SMALL_SPLITK_BEST.items()}
        )
        assert_close(
            by_key(table, ["shape"], ["eager_speedup"]),
            {label(s): v for s, v in kit.SMALL_SPLITK_EAGER.items()},
        )
        eager = layer(scatter, "eager speedup per shape", "point").data
        assert_close(by_key(eager, ["m", "n", "k"], ["eager_speedup"]), kit.SMALL_SPLITK_EAGER)
        # The companion curve opens on the shape with the largest speedup, and names it.
        assert at.selectbox(key="splitk_shape").value == label(kit.SKINNY)
        assert label(kit.SKINNY) in curve["spec"]["title"]["text"]
        assert_close(
            by_key(layer(curve, "speedup per SPLIT_K", "line").data, ["split_k"], ["speedup"]),
            kit.SKINNY_CURVE,
        )
        assert max(kit.SKINNY_CURVE.values()) == pytest.approx(kit.SMALL_SPLITK_BEST[kit.SKINNY][2])
        band = layer(curve, "speedup per SPLIT_K", "rule").data
        assert (band.speedup_lo < band.speedup).all() and (band.speedup < band.speedup_hi).all()

        at.selectbox(key="splitk_shape").set_value(label(kit.MID)).run()
        curve = charts(at)[1]
        assert_close(
            by_key(layer(curve, "speedup per SPLIT_K", "line").data, ["split_k"], ["speedup"]),
            {1: 1.0, 2: 1.5},
        )

        at.selectbox(key="gpu").set_value(A100).run()
        best = layer(charts(at)[0], "best split against best unsplit", "point").data
        assert_close(by_key(best, ["m", "n", "k"], ["tiles_per_sm", "speedup"]), {kit.SKINNY: (4 / 108, 2.0)})


def test_splitk_verdict_agrees_in_table_dots_and_curve(verdict_db: Path) -> None:
    """96x7168x2048: best unsplit 0.0205 ms (blocks A) beats best split 0.0229 ms (blocks B, whose own
    unsplit time is 0.0254): 0.90, split loses, everywhere the page says it."""
    at = render(verdict_db, "splitk")
    no_exception(at)
    scatter, curve = charts(at)
    [row] = at.dataframe[0].value.itertuples()
    assert (row.verdict, row.speedup) == (kit.VERDICT, pytest.approx(kit.VERDICT_SPEEDUP))
    [dot] = layer(scatter, "best split against best unsplit", "point").data.itertuples()
    assert dot.speedup == pytest.approx(kit.VERDICT_SPEEDUP)
    assert dot.tiles_per_sm == pytest.approx(2 * 56 / 132)  # blocks A's unsplit grid
    line = layer(curve, "speedup per SPLIT_K", "line").data
    assert by_key(line, ["split_k"], ["speedup"]) == pytest.approx({1: 1.0, 4: kit.VERDICT_SPEEDUP})
    # The same-blocks layer keeps its own 1.11, under its own name.
    blocks = layer(scatter, "same blocks", "circle").data
    assert blocks.speedup.max() == pytest.approx(kit.VERDICT_BLOCK_RATIO)
    assert layer(curve, "stream-K", "rule").data.speedup.tolist() == pytest.approx([0.0205 / 0.0210])
    assert any("Throttled: 1 of 4 ok rows" in w and "1,500 MHz" in w for w in texts(at, "warning"))


def test_explorer_shows_clock_and_throttle_state_per_row(verdict_db: Path) -> None:
    at = render(verdict_db, "explorer")
    no_exception(at)
    table = at.dataframe[0].value
    throttled = table[table.throttled.fillna(False).astype(bool)]
    assert throttled[["variant", "sm_clock_mhz", "throttle_reasons"]].values.tolist() == [
        ["streamk", 1500, "sw_power_cap"]
    ]
    assert any(
        "1 of the rows shown ran while the GPU reported a throttle reason" in w for w in texts(at, "warning")
    )


def test_grouping_plots_speedup_against_operands_over_l2_and_the_heatmap(dbs: dict[str, Path]) -> None:
    at = render(dbs["small"], "grouping")
    no_exception(at)
    scatter, heatmap = charts(at)
    dots = layer(scatter, "median gain per shape", "point")
    time = dots.data[dots.data.measure == "time"]
    assert_close(
        by_key(time, ["m", "n", "k", "group_m"], ["operand_to_l2", "gain"]),
        {(*s, g): v for (s, g), v in kit.SMALL_GROUPING.items()},
    )
    # Energy on 8192^3 only, at one power: its energy gains are its time gains.
    energy = dots.data[dots.data.measure == "energy"]
    assert_close(
        by_key(energy, ["m", "n", "k", "group_m"], ["gain"]),
        {(*s, g): v for (s, g), (_, v) in kit.SMALL_GROUPING.items() if s == kit.BIG_SQUARE},
    )
    assert any("Energy gain for 2 of 3 pairs" in c.value for c in at.caption)
    assert dots.encoding["x"]["scale"]["type"] == "log"
    assert layer(scatter, "L2 size", "rule").data.operand_to_l2.tolist() == [1.0]
    cells = layer(heatmap, "median speedup per cell", "rect")
    assert_close(by_key(cells.data, ["size_lo", "group_m"], ["speedup"]), kit.SMALL_HEATMAP)
    assert set(cells.data["size"]) == {"4-8 L2", "1/16-1/8 L2"}
    assert (cells.encoding["x"]["field"], cells.encoding["y"]["field"]) == ("size", "group_m")


def test_cublas_page_compares_best_triton_and_draws_the_roofline(dbs: dict[str, Path]) -> None:
    at = render(dbs["small"], "cublas")
    no_exception(at)
    scatter, roof = charts(at)
    dots = layer(scatter, "best Triton against cuBLAS per shape").data
    assert_close(by_key(dots, ["m", "n", "k"], ["triton_ms", "ratio"]), kit.SMALL_VS_CUBLAS)
    assert_close(
        by_key(dots, ["m", "n", "k"], ["triton_tflops"]),
        {s: 2 * math.prod(s) / (ms * 1e-3) / 1e12 for s, (ms, _) in kit.SMALL_VS_CUBLAS.items()},
    )
    points = layer(roof, "best Triton and cuBLAS per shape", "point").data
    triton_shapes = {*kit.SMALL_VS_CUBLAS, kit.MID, kit.SMALL_SQUARE}  # every shape with a Triton row
    assert len(points) == len(triton_shapes) + len(kit.CUBLAS_MS)
    operand = {s: 2 * (s[0] * s[2] + s[2] * s[1] + s[0] * s[1]) for s in kit.SMALL_VS_CUBLAS}
    assert_close(
        by_key(points[points.provider == "cuBLAS"], ["m", "n", "k"], ["intensity", "tflops"]),
        {
            s: (2 * math.prod(s) / operand[s], 2 * math.prod(s) / (kit.CUBLAS_MS[s] * 1e-3) / 1e12)
            for s in kit.SMALL_VS_CUBLAS
        },
    )
    roofs = layer(roof, "roofs", "line").data
    ridge = kit.H200.peak_tflops * 1e3 / kit.H200.peak_gbps
    compute = roofs[roofs.roof == "compute"]
    assert compute.tflops.tolist() == [kit.H200.peak_tflops] * 2 and compute.intensity.min() == ridge
    bandwidth = roofs[roofs.roof == "bandwidth"]
    assert (bandwidth.tflops / bandwidth.intensity).tolist() == pytest.approx([kit.H200.peak_gbps / 1e3] * 2)
    assert bandwidth.intensity.max() == ridge
    assert roof["spec"]["layer"][0]["encoding"]["x"]["scale"]["type"] == "log"


def test_explorer_filters_the_table_and_downloads_every_matching_row(dbs: dict[str, Path]) -> None:
    with app(dbs["small"]) as at:
        show(at, "explorer")
        no_exception(at)
        table = at.dataframe[0].value
        assert len(table) == 26 and table.columns[0] == "timing" and set(table.timing) == {GPU_LABEL}
        assert "26 rows" in at.get("download_button")[0].label

        at.multiselect(key="x_status").set_value(["wrong", "timeout"]).run()
        table = at.dataframe[0].value
        assert sorted(table.status) == ["timeout", "wrong"]
        # The timeout row was never timed: it names no regime, so the wrong row's steady is all there is.
        assert any("Timing regime :blue-badge[steady]" in c.value for c in at.caption)
        assert not any("mix timing regimes" in w for w in texts(at, "warning"))
        at.slider(key="x_k").set_value((8193, 65536)).run()
        assert at.dataframe[0].value.k.tolist() == [65536]

        # The button's CSV is built on click from the same filters, every column included.
        csv = pd.read_csv(io.BytesIO(cache.csv_download(queries.results, status=["wrong"])()))
        assert len(csv) == 1 and csv.rel_err.tolist() == [0.5] and "config_key" in csv.columns


def test_accuracy_by_variant_and_dtype_and_atomic_nondeterminism(dbs: dict[str, Path]) -> None:
    at = render(dbs["small"], "accuracy")
    no_exception(at)
    errors, nondeterminism = charts(at)
    assert by_key(layer(errors, "relative error", "point").data, ["variant", "dtype"], ["rel_err_max"]) == {
        ("cublas", "bfloat16"): 1e-3,
        ("grouped", "bfloat16"): 1e-3,
        ("splitk", "bfloat16"): 0.5,  # the wrong row
    }
    # Only atomic split-K ran repeatedly; over sqrt(K) the wrong row's 0.1 at K = 65536 is the largest.
    assert by_key(
        layer(nondeterminism, "nondeterminism", "point").data,
        ["variant", "dtype"],
        ["nondeterminism_rel_max"],
    ) == {("splitk", "bfloat16"): pytest.approx(0.1 / 256)}
    dots = layer(errors, "relative error", "point")
    assert dots.encoding["y"]["scale"]["type"] == "log" and (dots.data.value > 0).all()
    assert texts(at, "warning") == [
        "Rows that failed the accuracy check (status `wrong`): splitk / bfloat16 1 of 15."
    ]


def test_sweeps_and_environments(dbs: dict[str, Path]) -> None:
    at = render(dbs["small"], "sweeps")
    no_exception(at)
    sweeps, envs = (d.value for d in at.dataframe)
    assert by_key(sweeps, ["name"], ["status", "n_measurements", "timing_regime"]) == {
        "small-a": ("finished", 21, "steady, no settling"),
        "small-b": ("finished", 3, "steady, settling up to 1.5 s at the limit, 2 passes at the limit"),
        "small-a100": ("finished", 2, ""),  # a spec without a timing section
    }
    assert sorted(envs.gpu_name) == [A100, H200] and set(envs.timing) == {GPU_LABEL}
    assert not texts(at, "error") and not texts(at, "warning")


def test_compare_runs_per_point_verdicts(dbs: dict[str, Path]) -> None:
    with app(dbs["small"]) as at:
        show(at, "compare")
        no_exception(at)
        # Three runs of three studies: no study has two, so any two runs; the default pair is 1 and 2.
        assert at.selectbox(key="cmp_study").options == ["any study"]
        assert (at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value) == (1, 2)
        [chart] = charts(at)
        dots = layer(chart, "points of both runs", "circle").data
        got = {(r.variant, (r.m, r.n, r.k), r.config_key): r.verdict for r in dots.itertuples()}
        assert got == kit.SMALL_COMPARE
        assert by_key(dots, ["variant", "m"], ["ratio_b_over_a"]) == pytest.approx(
            {("splitk", 256): 0.042 / 0.045, ("splitk", 4096): 0.300 / 0.250, ("grouped", 8192): 1.61 / 1.6}
        )
        bars = {
            ly.encoding["y"]["field"]: ly.data
            for ly in chart["layers"]
            if ly.mark == "rule" and "y2" in ly.encoding
        }
        assert set(bars) == {"a_lo", "b_lo"}  # both runs' p20-p80 intervals, over run a's median
        assert bars["a_lo"].a_lo.tolist() == pytest.approx([0.98] * 3)
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["points in both runs"] == "3" and metrics["run b faster / slower"] == "1 / 1"
        assert metrics["within noise"] == "33%"
        # The points that moved, run b's largest slowdown first: 1.2 (slower), then 0.933 (faster).
        assert at.dataframe[0].value.verdict.tolist() == ["slower", "faster"]

        at.selectbox(key="cmp_b").set_value(3).run()  # the A100 sweep shares no point with sweep 1
        assert "share no ok point" in texts(at, "info")[0]


# ---- measurement fidelity: eager time, energy and timing regimes (revision 0002's columns) ----


@pytest.fixture(scope="module")
def fidelity_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return kit.fidelity_db(tmp_path_factory.mktemp("fidelity") / "fidelity.db")


def test_grouping_gain_in_time_and_in_energy(fidelity_db: Path) -> None:
    """8192^3, group_m 8: 10% less time and 15% less energy than group_m 1 are gains of 1.11 and 1.18."""
    at = render(fidelity_db, "grouping")
    no_exception(at)
    gains = layer(charts(at)[0], "median gain per shape", "point")
    time = gains.data[gains.data.measure == "time"]
    energy = gains.data[gains.data.measure == "energy"]
    big = {(*kit.BIG_SQUARE, g): pair for g, pair in kit.FIDELITY_GAINS.items()}
    legacy = (*kit.SMALL_SQUARE, 8)
    assert_close(
        by_key(time, ["m", "n", "k", "group_m"], ["gain"]),
        {**{k: t for k, (t, _) in big.items()}, legacy: 0.02 / 0.019},
    )
    # Energy only where both rows have it: group_m 4 has no reading, the pre-0002 pair none at all.
    assert_close(by_key(energy, ["m", "n", "k", "group_m"], ["gain"]), {(*kit.BIG_SQUARE, 8): 1 / 0.85})
    [g8] = energy.itertuples()
    assert (round(g8.time_gain, 2), round(g8.gain, 2)) == (1.11, 1.18)
    assert gains.encoding["shape"]["field"] == "measure"
    assert {"time_gain", "energy_gain", "best_config", "configs"} <= {
        t["field"] for t in gains.encoding["tooltip"]
    }
    # The readings behind a gain: the pairs table, a row per config (the chart's marks are per shape).
    pair = at.dataframe[0].value.set_index(["shape", "group_m"]).loc[("8192x8192x8192", 8)]
    assert (pair.joules_per_launch, pair.joules_group1, pair.us, pair.us_group1) == (
        "0.51 J",
        "0.6 J",
        900,
        1000,
    )
    assert any("Energy gain for 1 of 3 pairs" in c.value for c in at.caption)
    assert not any("No grouped pair here has energy" in i for i in texts(at, "info"))
    # The pre-0002 pair is interleaved, the 6 other ok rows of the H200 steady: the page says they mix.
    assert any("mix timing regimes (steady 6, interleaved 2 rows)" in w for w in texts(at, "warning"))


def test_splitk_eager_speedup_beside_the_kernel_time_one(fidelity_db: Path) -> None:
    """Kernel time: split 4 (0.050 ms) over unsplit (0.100 ms) = 2.0. Eager time per call, max(stream,
    host): unsplit 0.105 ms; split 4 waits on its host (0.080), split 8 on its stream (0.065), so the
    eager caller picks split 8: 0.105 / 0.065 = 1.62."""
    at = render(fidelity_db, "splitk")
    no_exception(at)
    scatter = charts(at)[0]
    [row] = at.dataframe[0].value.itertuples()
    assert row.speedup == pytest.approx(kit.FIDELITY_KERNEL_SPEEDUP)
    assert row.eager_speedup == pytest.approx(kit.FIDELITY_EAGER_SPEEDUP)
    assert "sk8" in row.split_eager_config and "sk1" in row.unsplit_eager_config
    # Energy per launch, power and J/TFLOP of the kernel-time winners (unsplit, split 4): 2 x 256 x 256 x
    # 65536 FLOP = 0.00859 TFLOP, so 0.034 J is 3.958 J/TFLOP; split 4 drew 0.034 J in 0.05 ms = 680 W.
    assert (row.unsplit_joules_per_launch, row.split_joules_per_launch) == ("0.06 J", "0.034 J")
    assert (row.unsplit_avg_watts, row.split_avg_watts) == ("600 W", "680 W")
    assert row.split_joules_per_tflop == "3.958 J/TFLOP"
    [dot] = layer(scatter, "best split against best unsplit", "point").data.itertuples()
    [diamond] = layer(scatter, "eager speedup per shape", "point").data.itertuples()
    assert (dot.speedup, diamond.eager_speedup) == pytest.approx(
        (kit.FIDELITY_KERNEL_SPEEDUP, kit.FIDELITY_EAGER_SPEEDUP)
    )
    assert diamond.tiles_per_sm == dot.tiles_per_sm
    assert (dot.split_energy, dot.split_host_time, dot.split_stream_time, dot.split_power) == (
        "34 mJ",
        "80 us",
        "70 us",
        "680 W",
    )


def test_splitk_without_host_times_draws_kernel_time_alone(dbs: dict[str, Path]) -> None:
    with app(dbs["small"]) as at:
        show(at, "splitk")
        assert any("Timing regime :blue-badge[steady]" in c.value for c in at.caption)
        assert not any("mix timing regimes" in w for w in texts(at, "warning"))
        at.selectbox(key="gpu").set_value(A100).run()  # the A100 pair was stored before revision 0002
        no_exception(at)
        assert any("No shape here has host times" in i for i in texts(at, "info"))
        assert not any(ly.description == "eager speedup per shape" for ly in charts(at)[0]["layers"])
        assert at.dataframe[0].value.eager_speedup.isna().all()
        assert any("Timing regime :blue-badge[interleaved]" in c.value for c in at.caption)


def test_explorer_shows_stream_host_regime_and_energy(fidelity_db: Path) -> None:
    at = render(fidelity_db, "explorer")
    no_exception(at)
    table = at.dataframe[0].value
    split4 = table[(table.variant == "splitk") & (table.split_k == 4)].iloc[0]
    # Times in us like every table's (0.070 ms stream, 0.080 ms host), numbers to sort.
    assert (split4.stream_us, split4.host_us, split4.timing_regime) == pytest.approx((70.0, 80.0, "steady"))
    assert (split4.avg_watts, split4.joules_per_launch) == pytest.approx((680.0, 0.034))  # W, J
    legacy = table[table.timing_regime == "interleaved"]
    assert len(legacy) == 2 and legacy.host_us.isna().all() and legacy.joules_per_launch.isna().all()
    assert any("mix timing regimes (steady 6, interleaved 2 rows)" in w for w in texts(at, "warning"))
    config = at.dataframe[0].proto.columns
    assert "%.3g J" in config and "%.0f W" in config and "%.1f us" in config and " ms" not in config


# ---- interpreter-only and failed-sweep databases ----

TIMED_PAGES = ["overview", "shape", "splitk", "grouping", "cublas", "explorer"]


@pytest.mark.parametrize("page", TIMED_PAGES, ids=TIMED_PAGES)
def test_interpreter_rows_are_labelled_not_gpu_timings(dbs: dict[str, Path], page: str) -> None:
    at = render(dbs["interpreter"], page)
    no_exception(at)
    assert any("not GPU timings" in w for w in texts(at, "warning"))
    for chart in charts(at)[: 2 if page != "overview" else 0]:
        assert "not GPU timings" in chart["spec"]["title"]["subtitle"]


def test_interpreter_charts_still_show_the_cpu_times(dbs: dict[str, Path]) -> None:
    at = render(dbs["interpreter"], "splitk")
    every = layer(charts(at)[0], "best split against best unsplit", "point").data
    # Split 4 took twice the splitk unsplit time; the best unsplit time is grouped GROUP_SIZE_M 2's 0.95x.
    assert by_key(every, ["m", "n", "k"], ["speedup"]) == {s: pytest.approx(0.475) for s in kit.SMOKE_SHAPES}
    assert at.selectbox(key="gpu").options == [f"{kit.INTERPRETER.gpu_name} (CPU times, not GPU timings)"]
    grouping = render(dbs["interpreter"], "grouping")  # no energy counter on a CPU
    assert any("No grouped pair here has energy on both rows" in i for i in texts(grouping, "info"))
    assert set(layer(charts(grouping)[0], "median gain per shape", "point").data.measure) == {"time"}
    cublas = render(dbs["interpreter"], "cublas")
    assert any("No peak TFLOP/s" in i for i in texts(cublas, "info"))
    assert not any(ly.description == "roofs" for ly in charts(cublas)[1]["layers"])


def test_cublas_page_draws_the_roofline_without_cublas_rows(verdict_db: Path) -> None:
    at = render(verdict_db, "cublas")
    no_exception(at)
    assert "no head-to-head" in texts(at, "info")[0]
    [roof] = charts(at)
    [dot] = layer(roof, "best Triton and cuBLAS per shape", "point").data.itertuples()
    assert dot.pct_peak == pytest.approx(100 * 2 * 96 * 7168 * 2048 / 0.0205e-3 / 1e12 / kit.H200.peak_tflops)


def test_shape_page_lists_every_config_with_percent_of_peak(dbs: dict[str, Path]) -> None:
    with app(dbs["small"]) as at:
        show(at, "shape")
        at.selectbox(key="shape_pick").set_value(label(kit.SKINNY)).run()
        no_exception(at)
        best, every = (d.value for d in at.dataframe)
        assert best.variant.tolist() == ["cublas", "splitk"]  # cuBLAS 0.032 ms, split-K 0.040 ms
        assert every.us.is_monotonic_increasing and len(every) == 8  # 7 ok split-K rows + cuBLAS
        # Times in us, numbers (to sort): cuBLAS's 0.032 ms kernel reads 32 us, its stream time beside it.
        assert every.us.iloc[0] == pytest.approx(32.0) and every.stream_us.dtype.kind == "f"
        assert best.pct_peak.iloc[0] == pytest.approx(
            100 * 2 * math.prod(kit.SKINNY) / 0.032e-3 / 1e12 / 989.4
        )
        configs, roof = charts(at)
        bars = layer(configs, "configs of the shape", "rule").data
        assert (bars.rel_lo <= bars.vs_best).all() and (bars.vs_best <= bars.rel_hi).all()
        assert layer(roof, "the chosen shape", "point").data["shape"].tolist() == [label(kit.SKINNY)] * 2
    table = render(dbs["interpreter"], "explorer").dataframe[0].value
    assert set(table.timing) == {INTERPRETER_LABEL} and len(table) == len(kit.interpreter_records())


@pytest.mark.parametrize("page", PAGES, ids=list(PAGES))
def test_failed_sweep_gives_messages_not_tracebacks(dbs: dict[str, Path], page: str) -> None:
    at = render(dbs["failed_sweep"], page)
    no_exception(at)
    said = " ".join(texts(at, "info") + texts(at, "error"))
    expect = {
        "overview": "Last sweep #1 'smoke': failed",
        "shape": "No ok rows",
        "splitk": "No split-K or stream-K rows",
        "grouping": "No grouped pairs",
        "cublas": "No ok rows",
        "accuracy": "No checked rows",
        "sweeps": "Sweep #1 'smoke': failed, 0 ok and 4 failed of 4 points.",
        "compare": "Comparing needs two runs",
        "search": "--search model --budget 10%",
    }
    if page == "explorer":
        assert sorted(at.dataframe[0].value.status) == sorted(kit.FAILED_STATUSES)
    else:
        assert expect[page] in said


# ---- a database the app cannot use ----


def test_missing_or_foreign_database_is_an_error_message(tmp_path: Path) -> None:
    at = render(tmp_path / "nowhere.db", "overview")
    no_exception(at)
    assert "no database at" in texts(at, "error")[0]
    foreign = tmp_path / "foreign.db"
    import sqlite3

    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    at = render(foreign, "splitk")
    no_exception(at)
    assert "is not a farm results database" in texts(at, "error")[0]


def test_db_argument_after_double_dash_else_environment_else_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert target.parse_db(["--", "--db", "a.db"]) == "a.db"
    assert target.parse_db(["--db", "postgresql://u@h/d"]) == "postgresql://u@h/d"
    monkeypatch.setenv("FARM_DB", "env.db")
    assert target.parse_db(["--server.port", "1"]) == "env.db"
    monkeypatch.delenv("FARM_DB")
    monkeypatch.chdir(tmp_path)
    # No results.db here: the shipped demo (tests/dashboard/test_dashboard_demo.py has the rest).
    assert target.parse_db([]) == str(target.DEMO_DB)
    kit.empty_db(tmp_path / "results.db")
    assert target.parse_db([]) == "results.db"
