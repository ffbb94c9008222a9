"""db.queries' dashboard functions on crafted databases, and dashboard.frames' arithmetic: the split-K
verdict, roofs, size bins, the default sweep pair, interpreter GPUs, the accuracy log axis."""

from __future__ import annotations

import json
from pathlib import Path

import dashkit as kit
import pandas as pd
import pytest

from dashboard import frames
from dashboard.target import DEMO_DB
from db import queries
from db.engine import make_engine
from db.export import reading


def on(db: Path, fn, **kw):
    engine = make_engine(str(db), readonly=True)
    try:
        with engine.connect() as conn:
            return fn(conn, **kw)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def verdict_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return kit.splitk_verdict_db(tmp_path_factory.mktemp("verdict") / "verdict.db")


def test_splitk_best_is_best_split_over_best_unsplit_not_the_best_block_ratio(verdict_db: Path) -> None:
    [row] = on(verdict_db, queries.splitk_best).itertuples()
    assert (row.unsplit_ms, row.unsplit_block_m, row.unsplit_variant) == (0.0205, 64, "grouped")
    assert (row.split_ms, row.split_block_m, row.split_split_k) == (0.0229, 32, 4)
    assert row.speedup == pytest.approx(kit.VERDICT_SPEEDUP)  # 0.90: split loses
    assert row.unsplit_tiles_per_sm == pytest.approx(2 * 56 / 132)  # blocks A's grid, not B's
    assert (row.streamk_ms, row.streamk_speedup) == (0.0210, pytest.approx(0.0205 / 0.0210))
    # The view keeps its per-block meaning: B's own ratio is the 1.11 the old table showed.
    blocks = on(verdict_db, queries.splitk_speedup)
    assert blocks.speedup.max() == pytest.approx(kit.VERDICT_BLOCK_RATIO)
    # The curve agrees with the table: its split 4 point is the table's speedup.
    curve = on(
        verdict_db, queries.splitk_curve, gpu_name=kit.H200.gpu_name, dtype="bfloat16", m=96, n=7168, k=2048
    )
    assert dict(zip(curve.split_k, curve.speedup)) == pytest.approx({1: 1.0, 4: kit.VERDICT_SPEEDUP})


# One shape's unsplit and split rows, (variant, block, split_k) -> (ms, host_ms): each query ranks only
# the rows near its side's least time (db.queries.splitk.near_least), and must still pick the winner a
# ranking of every row picks. Stream time is ms, so eager time is max(ms, host_ms).
NEAR_LEAST = {
    ("grouped", (64, 64, 64), 1): (0.100, 0.010),  # ties B on ms, wins on eager time (0.100 < 0.105)
    ("grouped", (128, 64, 64), 1): (0.100, 0.105),  # B
    ("grouped", (128, 128, 64), 1): (0.120, 0.010),
    ("splitk", (64, 64, 64), 2): (0.030, 0.050),  # least eager time, host-bound: 5% ties it
    ("splitk", (64, 64, 64), 4): (0.025, 0.052),  # within 5% of it and faster kernels: the eager pick
    ("splitk", (64, 64, 64), 8): (0.020, 0.060),  # fastest kernels (the kernel-time pick), 20% over
}


def test_splitk_queries_rank_only_rows_near_the_least_and_keep_the_winners(tmp_path: Path) -> None:
    records = [
        kit.record(v, kit.VERDICT_SHAPE, env=kit.H200, ms=ms, host_ms=host, block=block, split_k=s)
        for (v, block, s), (ms, host) in NEAR_LEAST.items()
    ]
    db = kit.build(tmp_path / "near.db", [kit.Batch(kit.H200, records, sweep="near")])
    [best] = on(db, queries.splitk_best).itertuples()
    assert (best.unsplit_ms, best.unsplit_block_m, best.unsplit_block_n) == (0.100, 64, 64)
    assert (best.split_ms, best.split_split_k) == (0.020, 8)
    [eager] = on(db, queries.splitk_eager).itertuples()
    assert (eager.unsplit_eager_ms, eager.unsplit_eager_config_key) == (0.100, best.unsplit_config_key)
    assert (eager.split_eager_ms, eager.split_eager_split_k) == (0.052, 4)
    assert eager.eager_speedup == pytest.approx(0.100 / 0.052)


def test_hybrid_stream_k_is_stream_k_not_the_unsplit_baseline(tmp_path: Path) -> None:
    """streamk_hybrid splits K for its last partial wave: the fastest row of the shape, it must sit
    beside split-K (streamk_) and leave the unsplit baseline to the tiled grid."""
    records = [
        kit.record(variant, kit.VERDICT_SHAPE, env=kit.H200, ms=ms, block=block, split_k=s)
        for (variant, block, s), ms in kit.VERDICT_MS.items()
    ]
    hybrid = kit.record("streamk_hybrid", kit.VERDICT_SHAPE, env=kit.H200, ms=0.0150, block=kit.BLOCKS_A)
    records.append(hybrid)
    db = kit.build(tmp_path / "hybrid.db", [kit.Batch(kit.H200, records, sweep="splitk")])
    [row] = on(db, queries.splitk_best).itertuples()
    assert (row.unsplit_variant, row.unsplit_ms) == ("grouped", 0.0205)
    assert (row.streamk_variant, row.streamk_ms) == ("streamk_hybrid", 0.0150)
    assert row.speedup == pytest.approx(kit.VERDICT_SPEEDUP)
    curve = on(db, queries.splitk_curve, gpu_name=kit.H200.gpu_name, dtype="bfloat16", m=96, n=7168, k=2048)
    assert dict(zip(curve.split_k, curve.ms, strict=True))[1] == 0.0205


def test_splitk_table_says_split_loses_outside_the_noise(verdict_db: Path) -> None:
    table = frames.splitk_table(on(verdict_db, queries.splitk_best))
    assert table.verdict.tolist() == [kit.VERDICT]
    assert table.speedup_lo.iloc[0] < kit.VERDICT_SPEEDUP < table.speedup_hi.iloc[0] < 1


@pytest.mark.parametrize(
    ("unsplit", "split", "verdict"),
    [
        ((1.0, 0.98, 1.02), (0.5, 0.49, 0.51), "split wins"),
        ((1.0, 0.97, 1.03), (0.99, 0.96, 1.02), "within noise"),
    ],
    ids=["wins", "noise"],
)
def test_splitk_verdict_uses_both_p20_p80_ranges(unsplit, split, verdict) -> None:
    u = [pd.Series([x]) for x in unsplit]
    sp = [pd.Series([x]) for x in split]
    lo, hi = frames.ratio_band(*u, *sp)
    assert frames.verdict(u[0] / sp[0], lo, hi, "split wins", "split loses") == [verdict]


def test_roofs_meet_at_the_ridge_and_span_the_points() -> None:
    roofs = frames.roof_lines(989.4, 4800.0, 100.0, 3000.0)
    ridge = 989.4e3 / 4800.0  # 206 FLOP/B
    assert roofs.values.tolist() == [
        ["bandwidth", 100.0, 480.0],
        ["bandwidth", ridge, 989.4],
        ["compute", ridge, 989.4],
        ["compute", 3000.0, 989.4],
    ]
    # Points all left of the ridge still get a compute roof to look up to.
    assert frames.roof_lines(989.4, 4800.0, 10.0, 50.0).intensity.max() == pytest.approx(2 * ridge)


@pytest.mark.parametrize("peaks", [(0.0, 4800.0), (989.4, 0.0)], ids=["no-tflops", "no-bandwidth"])
def test_no_roofs_without_both_peaks(peaks: tuple[float, float]) -> None:
    assert frames.roof_lines(*peaks, 1.0, 10.0).empty


def test_size_bins_are_powers_of_two_of_operands_over_l2_and_the_axis_keeps_empty_bins() -> None:
    points = pd.DataFrame(
        {
            "m": [1, 2, 3, 4, 5],
            "n": 1,
            "k": 1,
            "group_m": 8,
            "operand_to_l2": [0.1, 0.5, 1.0, 1.9, 6.4],
            "speedup": [1.0, 1.02, 1.1, 1.3, 1.5],
        }
    )
    cells = frames.grouping_heatmap(points.assign(shape=frames.shape_label(points)))
    assert cells["size"].tolist() == ["1/16-1/8 L2", "1/2-1 L2", "1-2 L2", "4-8 L2"]
    assert cells.speedup.tolist() == pytest.approx([1.0, 1.02, 1.2, 1.5])  # 1.0 and 1.9 share a bin
    assert cells.n_shapes.tolist() == [1, 1, 2, 1]
    assert cells.stat.tolist() == ["1 config", "1 config", "median of 2 configs", "1 config"]
    assert frames.heatmap_bins(cells) == [
        "1/16-1/8 L2", "1/8-1/4 L2", "1/4-1/2 L2", "1/2-1 L2", "1-2 L2", "2-4 L2", "4-8 L2"
    ]  # fmt: skip


def test_accuracy_zero_is_drawn_under_the_smallest_error_as_exact() -> None:
    acc = pd.DataFrame({"variant": ["a", "b", "c"], "err": [0.0, 2e-3, 5e-2]})
    pts = frames.log_points(acc, "err")
    assert pts.value.tolist() == pytest.approx([2e-4, 2e-3, 5e-2])
    assert pts.shown.tolist() == ["exact", "0.002", "0.05"]


def test_roofline_needs_no_cublas_row(dbs: dict[str, Path]) -> None:
    filters = dict(gpu_name=kit.H200.gpu_name, dtype="bfloat16")
    best = on(dbs["small"], queries.best_configs, **filters)
    no_cublas = best[best.variant != "cublas"]
    pts = frames.roofline_points(no_cublas, on(dbs["small"], queries.shape_sizes, **filters), 989.4)
    assert set(pts.provider) == {"Triton (best)"} and pts.pct_peak.notna().all()
    square = pts[pts["shape"] == "4096x4096x4096"].iloc[0]
    assert square.pct_peak == pytest.approx(100 * 2 * 4096**3 / 0.250e-3 / 1e12 / 989.4)


def test_default_comparison_prefers_sweeps_sharing_a_gpu(dbs: dict[str, Path]) -> None:
    assert on(dbs["small"], queries.default_comparison) == (1, 2)  # not (2, 3): sweep 3 is the A100's alone
    assert on(dbs["interpreter"], queries.default_comparison) is None  # one sweep


def test_default_comparison_prefers_two_runs_of_one_study() -> None:
    """The demo: runs 1 and 2 of `grouping`, not run 2 against `splitk` (sweep 3), which share no point."""
    with reading(str(DEMO_DB)) as conn:
        assert queries.default_comparison(conn) == (1, 2)


def test_interpreter_gpus_come_from_the_environments(dbs: dict[str, Path]) -> None:
    assert on(dbs["interpreter"], queries.interpreter_gpus) == [kit.INTERPRETER.gpu_name]
    assert on(dbs["small"], queries.interpreter_gpus) == []


# ---- measurement fidelity: eager time, energy, timing regimes ----


@pytest.fixture(scope="module")
def fidelity_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return kit.fidelity_db(tmp_path_factory.mktemp("fidelity") / "fidelity.db")


H200_BF16 = dict(gpu_name=kit.H200.gpu_name, dtype="bfloat16")


def test_grouping_gain_pairs_each_group_m_with_group_m_1_in_time_and_energy(fidelity_db: Path) -> None:
    gain = on(fidelity_db, queries.grouping_gain, **H200_BF16)
    got = {(r.m, r.group_m): (r.time_gain, r.energy_gain) for r in gain.itertuples()}
    want = {(8192, g): pair for g, pair in kit.FIDELITY_GAINS.items()} | {(1024, 8): (0.02 / 0.019, None)}
    assert set(got) == set(want)
    for key, (time, energy) in want.items():
        assert got[key][0] == pytest.approx(time), key
        assert pd.isna(got[key][1]) if energy is None else got[key][1] == pytest.approx(energy), key
    # The time gain is the grouping_effect view's speedup, pair for pair.
    view = on(fidelity_db, queries.grouping_effect, **H200_BF16)
    assert dict(zip(zip(view.m, view.group_m), view.speedup)) == pytest.approx(
        {key: t for key, (t, _) in got.items()}
    )
    assert set(gain.timing_regime_group1) == {"steady", "interleaved"}


def test_splitk_eager_picks_each_sides_best_eager_time(fidelity_db: Path) -> None:
    [row] = on(fidelity_db, queries.splitk_eager, **H200_BF16).itertuples()
    assert (row.unsplit_eager_ms, row.split_eager_ms, row.split_eager_split_k) == (0.105, 0.065, 8)
    assert row.eager_speedup == pytest.approx(kit.FIDELITY_EAGER_SPEEDUP)
    [best] = on(fidelity_db, queries.splitk_best, **H200_BF16).itertuples()
    assert (best.split_split_k, best.speedup) == (4, pytest.approx(kit.FIDELITY_KERNEL_SPEEDUP))


def test_eager_time_needs_both_stream_and_host_time(fidelity_db: Path) -> None:
    rows = on(fidelity_db, queries.results, **H200_BF16)
    details = on(fidelity_db, queries.measurement_details, ids=rows.id.tolist()).set_index("id")
    split4 = rows[(rows.variant == "splitk") & (rows.split_k == 4)].id.item()
    assert details.loc[split4, "eager_ms"] == 0.080  # host 0.080 > stream 0.070
    unsplit = rows[(rows.variant == "splitk") & (rows.split_k == 1)].id.item()
    assert details.loc[unsplit, "eager_ms"] == 0.105  # stream 0.105 > host 0.020
    legacy = rows[rows.timing_regime == "interleaved"].id
    assert details.loc[legacy, "eager_ms"].isna().all()  # no host time before revision 0002


def test_timing_regimes_count_the_rows_a_filter_selects(fidelity_db: Path, dbs: dict[str, Path]) -> None:
    assert on(fidelity_db, queries.timing_regimes, **H200_BF16) == {"steady": 6, "interleaved": 2}
    assert on(fidelity_db, queries.timing_regimes, shape=kit.SMALL_SQUARE) == {"interleaved": 2}
    # The H200's 21 ok rows and its wrong one were timed; its compile_error and timeout rows never were
    # (no regime), counted only when the status filter lets them in.
    assert on(dbs["small"], queries.timing_regimes, status=None, gpu_name=kit.H200.gpu_name) == {
        "steady": 22,
        "": 2,
    }
    assert on(dbs["small"], queries.timing_regimes, gpu_name=kit.H200.gpu_name) == {"steady": 21}


@pytest.mark.parametrize(
    ("value", "fmt", "text"),
    [
        (0.0125, frames.readable_time, "12.5 us"),
        (1.234, frames.readable_time, "1.23 ms"),
        (2500.0, frames.readable_time, "2.5 s"),
        (float("nan"), frames.readable_time, ""),
        (0.034, frames.readable_energy, "34 mJ"),
        (1.25, frames.readable_energy, "1.25 J"),
        (None, frames.readable_energy, "no energy reading"),
        (687.4, frames.readable_watts, "687 W"),
        (float("nan"), frames.readable_watts, "no energy reading"),
        (0.0125, frames.readable_per_tflop, "0.0125 J/TFLOP"),
    ],
    ids=["us", "ms", "s", "nan", "mJ", "J", "none", "W", "W-none", "J-per-TFLOP"],
)
def test_readable_units(value, fmt, text: str) -> None:
    assert fmt(value) == text


@pytest.mark.postgres
def test_fidelity_queries_give_the_same_numbers_on_postgresql(pg_target: str, fidelity_db: Path) -> None:
    kit.fidelity_db(pg_target)
    for fn in (queries.grouping_gain, queries.splitk_eager):
        got, want = on(pg_target, fn, **H200_BF16), on(fidelity_db, fn, **H200_BF16)
        pd.testing.assert_frame_equal(
            got.drop(columns=["id", "id_group1"], errors="ignore"),
            want.drop(columns=["id", "id_group1"], errors="ignore"),
            check_dtype=False,
        )
    assert on(pg_target, queries.timing_regimes, **H200_BF16) == {"steady": 6, "interleaved": 2}
    ids = on(pg_target, queries.results, **H200_BF16).id.tolist()
    details = on(pg_target, queries.measurement_details, ids=ids)
    assert details.eager_ms.notna().sum() == 6  # the two pre-0002 rows have no host time


def test_a_row_stored_with_zero_joules_has_no_energy_gain(tmp_path: Path) -> None:
    """Visit 14 stored 0 J for blocks NVML's energy counter did not tick in: no gain, not infinity."""
    rows = [
        kit.record("grouped", kit.BIG_SQUARE, env=kit.H200, ms=ms, group_m=g, avg_watts=watts)
        for g, ms, watts in ((1, 1.0, 600.0), (8, 0.9, 0.0))  # 600 J / 0 J was infinity
    ]
    db = kit.build(tmp_path / "zero.db", [kit.Batch(kit.H200, rows, sweep="zero")])
    [row] = on(db, queries.grouping_gain, **H200_BF16).itertuples()
    assert row.time_gain == pytest.approx(1 / 0.9)
    assert pd.isna(row.energy_gain)


@pytest.mark.parametrize(
    ("watts", "trusted"), [(690.0, True), (1084.0, False)], ids=["at-the-limit", "misread"]
)
def test_energy_above_the_power_limit_is_not_reported(tmp_path: Path, watts: float, trusted: bool) -> None:
    """Visit 19 stored 1084 W on average for rows throttled at 700 W: such energy is left out of
    gains and details, while the time gain stays."""
    rows = [
        kit.record("grouped", kit.BIG_SQUARE, env=kit.H200, ms=ms, group_m=g, avg_watts=w)
        for g, ms, w in ((1, 1.0, 600.0), (8, 0.9, watts))
    ]
    db = kit.build(tmp_path / "watts.db", [kit.Batch(kit.H200, rows, sweep="watts")])
    [row] = on(db, queries.grouping_gain, **H200_BF16).itertuples()
    assert row.time_gain == pytest.approx(1 / 0.9)
    assert pd.notna(row.energy_gain) is trusted
    details = on(db, queries.measurement_details, ids=[row.id])
    assert pd.notna(details.joules_per_launch.iloc[0]) is trusted
    assert pd.notna(details.avg_watts.iloc[0]) is trusted
    if trusted:
        assert row.energy_gain == pytest.approx(0.6 / (watts * 0.9 / 1e3))


@pytest.mark.parametrize(
    ("timing", "said"),
    [
        ({"regime": "interleaved"}, "interleaved"),
        ({"regime": "rest", "rest_s": 0.5}, "rest, 0.5 s before each launch"),
        ({"regime": "do_bench", "rep_ms": 100}, "do_bench"),  # tools/serial_loop.py's databases
        ({"regime": "steady"}, "steady"),  # stored before max_settle_s existed: unknown
    ],
)
def test_a_sweeps_timing_is_read_from_its_stored_spec(timing: dict, said: str) -> None:
    assert frames.sweep_timing(json.dumps({"name": "x", "timing": timing})) == said


@pytest.mark.parametrize("spec", [None, "", "{}", "[1, 2]", "not json", '{"timing": {}}'])
def test_a_spec_without_timing_says_nothing(spec: str | None) -> None:
    assert frames.sweep_timing(spec) == ""
