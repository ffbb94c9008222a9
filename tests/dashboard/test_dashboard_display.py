"""What the pages show and in which order: one tie rule on every page, the Split-K table's why columns
first, the Shape best table by either objective, grouping coloured by shape on small sweeps, readable
Accuracy labels, Compare in one direction."""

from __future__ import annotations

from pathlib import Path

import dashkit as kit
import pandas as pd
import pytest
from pagekit import app, charts, layer, render, show
from samples import H200, Batch, build, record

from dashboard import charts as chartkit
from dashboard import frames
from db import queries
from db.schema import open_engine

# ---- one tie rule: a crafted tie, every page names the same winner ----

TIE = (2500, 2500, 2500)
TIE_MS = 0.07175
# Stored in this order (ids 1, 2, 3): ranking by (ms, id) named persistent_tma_pad; WINNER_ORDER names
# persistent_tma_bands (same ms, same eager time, the lower name). `grouped` ties on kernel time too,
# but its stream time (0.09 ms) makes its eager time per call the longest: it loses before names count.
TIE_ROWS = [
    ("persistent_tma_pad", {}),
    ("persistent_tma_bands", {}),
    ("grouped", {"stream_ms": 0.09}),
]
WINNER = "persistent_tma_bands"


@pytest.fixture(scope="module")
def tie_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    records = [record(v, TIE, env=H200, ms=TIE_MS, **kw) for v, kw in TIE_ROWS]
    records.append(record("cublas", TIE, env=H200, ms=0.08))
    return build(tmp_path_factory.mktemp("tie") / "tie.db", [Batch(H200, records, sweep="tie")])


def test_rank_winners_orders_by_ms_eager_variant_config_id() -> None:
    df = pd.DataFrame(
        {
            "id": [1, 2, 3, 4],
            "variant": ["b", "a", "a", "c"],
            "config_key": ["k1", "k2", "k1", "k0"],
            "ms": [1.0, 1.0, 1.0, 0.9],
            "stream_ms": [1.0, 1.0, 1.0, 0.9],
            "host_ms": [0.5, 0.5, 0.5, 2.0],
        }
    )
    # id 4 is fastest; ids 1-3 tie on ms and eager time (1.0): variant a before b, then config k1 before k2.
    assert queries.rank_winners(df).id.tolist() == [4, 3, 2, 1]


def test_every_page_names_the_same_winner_of_a_tie(tie_db: Path) -> None:
    engine = open_engine(str(tie_db))
    with engine.connect() as conn:
        best = queries.best_configs(conn, gpu_name=H200.gpu_name, dtype="bfloat16")
        vs = queries.vs_cublas(conn, gpu_name=H200.gpu_name, dtype="bfloat16")
    engine.dispose()
    assert best.variant.iloc[0] == WINNER and vs.triton_variant.tolist() == [WINNER]

    shape = render(tie_db, "shape")
    assert shape.dataframe[0].value.variant.iloc[0] == WINNER  # best config of each variant
    assert shape.dataframe[1].value.variant.iloc[0] == WINNER  # every config, fastest first
    configs = layer(charts(shape)[0], "configs of the shape", "point").data
    assert configs.config.iloc[0].startswith(f"1. {WINNER} ")
    roof = layer(charts(shape)[1], "best Triton and cuBLAS per shape", "point").data
    assert roof[roof.provider == "Triton (best)"].config.iloc[0].startswith(WINNER)

    cublas = render(tie_db, "cublas")
    assert cublas.dataframe[0].value.triton_variant.tolist() == [WINNER]
    roof_table = cublas.dataframe[1].value
    assert roof_table[roof_table.provider == "Triton (best)"].config.iloc[0].startswith(WINNER)


# ---- Shape: the best table ranks by the objective the switch names ----

# splitk's kernels are faster (20.5 us against 25.4) but its launcher takes 76 us of host a call, so an
# eager caller waits 76 us for it and 30 us for persistent_tma_pad: host time decides the eager winner.
HOST_SHAPE = (96, 7168, 2048)
HOST_ROWS = [
    ("splitk", {"ms": 0.0205, "split_k": 2, "host_ms": 0.076}),
    ("persistent_tma_pad", {"ms": 0.0254, "host_ms": 0.030}),
]
RANKED_BY = {"kernel": "kernel time", "eager": "eager call"}  # the switch's labels, as the caption says them


@pytest.fixture(scope="module")
def host_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    records = [record(v, HOST_SHAPE, env=H200, **kw) for v, kw in HOST_ROWS]
    return build(tmp_path_factory.mktemp("host") / "host.db", [Batch(H200, records, sweep="host")])


def test_shape_best_table_switches_objective(host_db: Path) -> None:
    with app(host_db) as at:
        shape = show(at, "shape")
        tables = {}
        for objective in ("kernel", "eager"):
            shape.radio(key="shape_objective").set_value(objective).run()
            best = shape.dataframe[0].value
            tables[objective] = (best.variant.tolist(), best.eager_us.round(1).tolist())
            captions = [c.value for c in shape.caption]
            assert sum(c.startswith("Ranked by ") for c in captions) == 1
            assert any(c.startswith(f"Ranked by {RANKED_BY[objective]} ") for c in captions), captions
    assert tables == {
        "kernel": (["splitk", "persistent_tma_pad"], [76.0, 30.0]),  # eager us: the host's 0.076 ms
        "eager": (["persistent_tma_pad", "splitk"], [30.0, 76.0]),
    }


# ---- Split-K: the why columns first, shapes written on the largest dots ----

# fmt: off
SPLITK_WHY = ["shape", "verdict", "speedup", "eager_speedup", "tiles_per_sm", "waves", "occupancy",
              "split_split_k", "split_programs_per_sm", "streamk_speedup", "throttled"]
# fmt: on


def test_splitk_table_puts_the_why_columns_first(dbs: dict[str, Path]) -> None:
    at = render(dbs["small"], "splitk")
    table = at.dataframe[0].value
    assert table.columns[: len(SPLITK_WHY)].tolist() == SPLITK_WHY
    # Energy columns follow, and say so where a point has no reading (the small database has none here).
    assert {"unsplit_joules_per_launch", "split_avg_watts", "split_joules_per_tflop"} <= set(table.columns)
    assert set(table.split_joules_per_tflop) == {"no energy reading"}
    scatter = charts(at)[0]
    dots = layer(scatter, "best split against best unsplit", "point")
    assert dots.encoding["size"]["field"] == "gflop"
    # The headline (largest speedup, SKINNY at 4.0) is named first, then the largest problems, each where
    # its text crosses no other.
    labels = layer(scatter, "shape labels", "text")
    assert labels.data["shape"].tolist()[0] == dots.data.loc[dots.data.speedup.idxmax(), "shape"]
    assert (
        set(labels.data["shape"]) <= set(dots.data["shape"]) and labels.encoding["text"]["field"] == "shape"
    )


# ---- Grouping: the x axis over the data, colour by shape on small sweeps ----


def test_grouping_colours_by_shape_on_a_small_sweep(dbs: dict[str, Path]) -> None:
    at = render(dbs["small"], "grouping")
    dots = layer(charts(at)[0], "median gain per shape", "point")
    assert dots.encoding["color"]["field"] == "shape"
    # Legend in size order: 1024^3 (0.1 of L2), then 8192^3 (6.4x).
    assert dots.encoding["color"]["scale"]["domain"] == ["1024x1024x1024", "8192x8192x8192"]
    assert "shape" in {t["field"] for t in dots.encoding["tooltip"]}
    # Fitted: 0.1 and 6.4 (and the L2 line at 1) padded 20%, not rounded out to decades.
    assert dots.encoding["x"]["scale"]["domain"] == pytest.approx([0.1 / 1.2, 6.4 * 1.2])
    # One mark per shape: the tooltip names the config behind its best gain (one config here: its own).
    assert dots.data.best_config.tolist() == ["grouped 128x128x64 w8 s3"] * len(dots.data)
    pairs = at.dataframe[0].value
    assert pairs.time_gain.tolist() == pytest.approx([1.25, 2.0 / 1.8, 1.0])  # largest time gain first
    assert pairs.joules_per_launch.tolist()[:2] == ["1.04 J", "1.17 J"]  # 650 W x 1.6 ms, x 1.8 ms
    assert pairs.joules_per_launch.tolist()[2] == "no energy reading"


def _gains(n_shapes: int) -> pd.DataFrame:
    """frames.grouping_gains' rows for n_shapes square shapes, one pair each."""
    sizes = [1024 * (i + 1) for i in range(n_shapes)]
    raw = pd.DataFrame(
        {
            "m": sizes, "n": sizes, "k": sizes, "variant": "grouped", "block_m": 128, "block_n": 128,
            "block_k": 64, "num_warps": 8, "num_stages": 3, "group_m": 8, "ms": 1.0, "ms_group1": 1.1,
            "joules_per_launch": None, "joules_group1": None, "avg_watts": None, "avg_watts_group1": None,
            "time_gain": 1.1, "energy_gain": None, "operand_to_l2": [0.5 * (i + 1) for i in range(n_shapes)],
            "timing_regime": "steady",
        }
    )  # fmt: skip
    return frames.grouping_gains(raw)


@pytest.mark.parametrize(
    ("n_shapes", "colour"), [(12, "shape"), (13, "group_m")], ids=["12-shapes-by-shape", "13-shapes-by-group"]
)
def test_grouping_colour_by_shape_up_to_twelve(n_shapes: int, colour: str) -> None:
    spec = chartkit.grouping_gains(_gains(n_shapes)).to_dict()
    [dots] = [ly for ly in spec["layer"] if ly.get("description") == "median gain per shape"]
    assert dots["encoding"]["color"]["field"] == colour
    assert "shape" in {t["field"] for t in dots["encoding"]["tooltip"]}


def test_grouping_draws_one_mark_per_shape_over_its_configs() -> None:
    """Three configs of 128x8192x32768 at GROUP_SIZE_M 8 (one without energy) and one of 8192x128x4096: a
    mark per shape and measure, the median over the configs that have it, the range and the best config."""
    tall, flat = (128, 8192, 32768), (8192, 128, 4096)
    raw = pd.DataFrame(
        {
            "m": [tall[0]] * 3 + [flat[0]], "n": [tall[1]] * 3 + [flat[1]], "k": [tall[2]] * 3 + [flat[2]],
            "variant": "grouped", "block_m": [64, 128, 128, 64], "block_n": [64, 128, 64, 256],
            "block_k": 64, "num_warps": [4, 8, 8, 4], "num_stages": 3, "group_m": 8,
            "time_gain": [0.9, 1.2, 1.05, 1.02], "energy_gain": [1.1, None, 1.3, None],
            "joules_per_launch": [1.0, None, 1.0, None], "joules_group1": [1.1, None, 1.3, None],
            "operand_to_l2": [8.7, 8.7, 8.7, 1.2],
        }
    )  # fmt: skip
    gains = frames.grouping_gains(raw)
    got = {
        (r.shape, r.measure): (r.gain, r.gain_lo, r.gain_hi, r.configs, r.best_config)
        for r in gains.itertuples()
    }
    assert got == {
        ("128x8192x32768", "time"): (pytest.approx(1.05), 0.9, 1.2, 3, "grouped 128x128x64 w8 s3"),
        ("128x8192x32768", "energy"): (pytest.approx(1.2), 1.1, 1.3, 2, "grouped 128x64x64 w8 s3"),
        ("8192x128x4096", "time"): (pytest.approx(1.02), 1.02, 1.02, 1, "grouped 64x256x64 w4 s3"),
    }
    # Each row carries both medians: the energy mark's tooltip says the shape's time gain too.
    [energy] = gains[gains.measure == "energy"].itertuples()
    assert (energy.time_gain, energy.energy_gain) == (pytest.approx(1.05), pytest.approx(1.2))
    spec = chartkit.grouping_gains(gains).to_dict()
    [ranges] = [ly for ly in spec["layer"] if ly.get("description") == "time gain range over configs"]
    assert (ranges["encoding"]["y"]["field"], ranges["encoding"]["y2"]["field"]) == ("gain_lo", "gain_hi")


def test_grouping_axis_fits_the_time_gains_not_an_energy_outlier() -> None:
    """A rough energy gain of 3.6 (below the power limit) must not squeeze time gains of 1.1 into a line."""
    raw = _gains(3).query("measure == 'time'")
    outlier = raw.iloc[[0]].assign(measure="energy", gain=3.6, energy_gain=3.6)
    spec = chartkit.grouping_gains(pd.concat([raw, outlier])).to_dict()
    [dots] = [ly for ly in spec["layer"] if ly.get("description") == "median gain per shape"]
    low, high = dots["encoding"]["y"]["scale"]["domain"]
    assert high == pytest.approx(1.1 * 1.1) and low < 1
    assert "1 energy gain(s) outside 0.5-2.0 not drawn" in spec["title"]["subtitle"]


# ---- Accuracy: variant names whole ----


def test_accuracy_labels_are_not_truncated(dbs: dict[str, Path]) -> None:
    at = render(dbs["small"], "accuracy")
    for chart in charts(at):
        [dots] = [ly for ly in chart["layers"] if ly.mark == "point"]
        axis = dots.encoding["x"]["axis"]
        assert (axis["labelLimit"], axis["labelAngle"]) == (0, -30)


# ---- Compare: run b over run a, in the chart and in the table ----

SLOW = (1024, 1024, 4096)  # cuBLAS: 1.0 ms in run a, 1.25 ms in run b
FAST = kit.SKINNY  # splitk: 0.050 ms in run a, 0.040 ms in run b


@pytest.fixture(scope="module")
def pair_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def run(slow_ms: float, fast_ms: float) -> Batch:
        rows = [record("cublas", SLOW, env=H200, ms=slow_ms), record("splitk", FAST, env=H200, ms=fast_ms)]
        return Batch(H200, rows, sweep="study")

    return build(tmp_path_factory.mktemp("pair") / "pair.db", [run(1.0, 0.050), run(1.25, 0.040)])


def test_compare_chart_and_table_agree_on_direction(pair_db: Path) -> None:
    with app(pair_db) as at:
        show(at, "compare")
        assert not at.exception
        assert at.selectbox(key="cmp_study").value == "study"  # both runs of one study
        assert (at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value) == (1, 2)
        dots = layer(charts(at)[0], "points of both runs", "circle").data
        table = at.dataframe[0].value
        chart_ratio = {r.variant: (r.ratio_b_over_a, r.verdict) for r in dots.itertuples()}
        table_ratio = {r.variant: (r.ratio_b_over_a, r.verdict) for r in table.itertuples()}
        assert chart_ratio == table_ratio
        assert chart_ratio["cublas"] == (pytest.approx(1.25), "slower")  # b took 1.25x a's time
        assert chart_ratio["splitk"] == (pytest.approx(0.8), "faster")
        assert table.variant.tolist() == ["cublas", "splitk"]  # run b's largest slowdown first
        assert {m.label: m.value for m in at.metric}["median time b / a"] == f"{(1.25 + 0.8) / 2:.4f}"


# ---- Grouping / L2: the run the charts draw is chosen ----

BIG = (16384, 16384, 16384)  # operands 1.5 GiB: 26x the H200's 60 MiB L2


@pytest.fixture(scope="module")
def two_runs_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two grouping runs of one pair: run 1 gains 1.25 (0.8 ms at GROUP_SIZE_M 8), its repeat 1.10."""
    run = lambda ms: [record("grouped", BIG, ms=1.0), record("grouped", BIG, ms=ms, group_m=8)]
    batches = [Batch(H200, run(0.8), sweep="grouping"), Batch(H200, run(1 / 1.1), sweep="grouping")]
    return build(tmp_path_factory.mktemp("runs") / "runs.db", batches)


def test_grouping_draws_the_run_chosen(two_runs_db: Path) -> None:
    with app(two_runs_db) as at:
        show(at, "grouping")
        assert not at.exception
        picker = at.selectbox(key="grouping_run")
        assert picker.value == 0 and picker.options[0] == "each point's newest"  # the default
        gains = layer(charts(at)[0], "median gain per shape", "point").data
        assert gains.gain.tolist() == pytest.approx([1.1])
        assert at.dataframe[0].value.time_gain.tolist() == pytest.approx([1.1])
        assert picker.options[1].startswith("#2 ") and picker.options[2].startswith("#1 ")  # newest first
        picker.set_value(1).run()
        assert not at.exception
        chart, heatmap = charts(at)
        assert layer(chart, "median gain per shape", "point").data.gain.tolist() == pytest.approx([1.25])
        assert layer(heatmap, "median speedup per cell", "rect").data.speedup.tolist() == pytest.approx(
            [1.25]
        )
        assert at.dataframe[0].value.time_gain.tolist() == pytest.approx([1.25])
        assert chart["spec"]["title"]["text"][1].startswith("run #1 ")  # the title names the run it draws


# ---- times in us on every table of every page ----


@pytest.mark.parametrize("page", ["shape", "splitk", "grouping", "cublas", "compare", "explorer", "search"])
def test_every_table_shows_times_in_us(dbs: dict[str, Path], page: str) -> None:
    """No table column in ms: each time is a numeric column in microseconds (kernels of 5 us read
    "0.0050" in ms), named us, *_us or us_*."""
    at = render(dbs["small"], page)
    assert not at.exception
    for table in at.dataframe:
        words = [set(c.split("_")) for c in table.value.columns]
        assert not any("ms" in w for w in words), list(table.value.columns)
        for column in (c for c, w in zip(table.value.columns, words) if "us" in w):
            assert table.value[column].dtype.kind == "f", column


def test_in_us_renames_and_scales_only_time_columns() -> None:
    raw = pd.DataFrame({"ms": [0.00925], "ms_p20": [0.009], "triton_ms": [1.5], "status": ["ok"], "k": [8]})
    shown = frames.in_us(raw)
    assert list(shown.columns) == ["us", "us_p20", "triton_us", "status", "k"]
    assert shown.iloc[0][["us", "us_p20", "triton_us"]].tolist() == pytest.approx([9.25, 9.0, 1500.0])


# ---- timing regimes: the early cut is explained, and mixes no regime ----


def test_cut_points_are_explained_not_called_a_mix(tmp_path: Path) -> None:
    rows = [
        record("grouped", BIG, ms=1.0),
        record("grouped", BIG, ms=3.5, block=(64, 64, 64), timing_regime="steady+cut"),
    ]
    at = render(build(tmp_path / "cut.db", [Batch(H200, rows, sweep="grouping")]), "shape")
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert ":blue-badge[steady+cut]" in captions and "3x the best time stored for its shape" in captions
    assert not any("mix timing regimes" in w.value for w in at.warning)
    every = at.dataframe[1].value
    assert set(every.timing_regime) == {"steady", "steady+cut"}
