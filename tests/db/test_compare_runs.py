"""tools/compare_runs.py: two sweeps of the same points against issue #13's repeatability bars."""

import json
import sqlite3

import pytest

from tests.samples import H200, Batch, build, record
from tools.compare_runs import gain_difference, main, read_run, time_deviation

SHAPE = (8192, 8192, 8192)


def _run(path, factor_group1: float, watts: float):
    """tiled and grouped points of one shape: group_m 1 at 10 ms x factor, group_m 8 at 9 ms (gain
    1.111 x factor), and one cuBLAS point; energy at `watts` on the grouped ones."""
    records = [
        record("grouped", SHAPE, ms=10.0 * factor_group1, group_m=1, avg_watts=watts),
        record("grouped", SHAPE, ms=9.0, group_m=8, avg_watts=watts, throttled=True),
        record("tiled", SHAPE, ms=11.0, throttled=False),
        record("cublas", SHAPE, ms=8.0, throttled=False),
    ]
    return build(path, [Batch(H200, records, sweep="grouping")])


def test_time_gain_and_energy_differences_between_two_runs(tmp_path, capsys):
    first = _run(tmp_path / "run1.db", factor_group1=1.0, watts=690.0)
    second = _run(tmp_path / "run2.db", factor_group1=1.03, watts=700.0)
    (p1, g1), (p2, g2) = read_run(str(first)), read_run(str(second))

    both = time_deviation(p1, p2).set_index("variant")
    assert len(both) == 4  # the two grouped configs, tiled, cuBLAS
    grouped = both.loc["grouped"].sort_values("dev")
    assert list(grouped.dev) == pytest.approx([0.0, 1 - 1 / 1.03])
    assert both.loc["tiled"].dev == 0.0
    # joules = watts x ms: 690 x 9 against 700 x 9 at group_m 8, 690 x 10 against 700 x 10.3 at 1
    assert list(grouped.energy_dev) == pytest.approx([1 - 690 / 700, 1 - 6900 / 7210])
    assert both.loc[["tiled", "cublas"]].energy_dev.isna().all()

    gains = gain_difference(g1, g2)
    assert len(gains) == 1 and gains.group_m.item() == 8
    assert gains.time_gain_1.item() == 10.0 / 9.0
    assert abs(gains["diff"].item() - 0.3 / 9.0) < 1e-12  # 10.3/9 - 10/9

    main([str(first), str(second)])
    out = capsys.readouterr().out
    assert "run 1 vs run 2: 4 common points" in out
    assert "grouping gains: 1 pairs; median |gain1-gain2| 0.033, 0% within 0.02" in out
    assert "energy per launch: 2 of 4 points read on both sides" in out


def test_by_shape_table(tmp_path, capsys):
    first = _run(tmp_path / "run1.db", factor_group1=1.0, watts=690.0)
    second = _run(tmp_path / "run2.db", factor_group1=1.03, watts=700.0)
    main([str(first), str(second), "--by-shape"])
    row = capsys.readouterr().out.splitlines()[-1]
    # 4 points: the group_m 1 point 2.9% off, the rest 0; 1 of the 3 read throttled (group_m 1: not
    # read); one gain pair 0.033 apart
    assert row == "| bfloat16 8192x8192x8192 | 4 | 0.00% | 2.04% | 33% | 1 | 0.033 | 0% |"


def test_identical_runs_meet_every_bar(tmp_path, capsys):
    first = _run(tmp_path / "a.db", factor_group1=1.0, watts=690.0)
    second = _run(tmp_path / "b.db", factor_group1=1.0, watts=690.0)
    main([str(first), str(second)])
    out = capsys.readouterr().out
    assert "median |t1/t2-1| 0.00%" in out
    assert "median |gain1-gain2| 0.000, 100% within 0.02" in out
    assert "median |e1/e2-1| 0.00% (bar 3%), 100% within it" in out


def test_the_serial_loop_writes_a_run_that_compares(tmp_path, monkeypatch, capsys):
    """tools/serial_loop.py's rows (launched for real, do_bench replaced by a fixed 2 ms) in a results
    database that compare_runs pairs, grouping gains included."""
    from tools import serial_loop

    spec = tmp_path / "two.yaml"
    spec.write_text(
        "name: two\ndtypes: [bfloat16]\nvariants: [grouped, tiled]\nshapes: [{m: 24, n: 32, k: 40}]\n"
        "configs: {block_m: [16], block_n: [16], block_k: [16], group_m: [1, 2], num_warps: [4],\n"
        "          num_stages: [2]}\n"
    )
    launched = []

    def fixed(fn):
        launched.append(fn())
        return 2.0

    monkeypatch.setattr(serial_loop, "time_point", fixed)
    for name in ("a.db", "b.db"):
        serial_loop.main(["--spec", str(spec), "--db", str(tmp_path / name)])
    assert len(launched) == 6 and all(c.shape == (24, 32) for c in launched)  # 3 points, twice
    points, gains = read_run(str(tmp_path / "a.db"))
    assert sorted(points.variant) == ["grouped", "grouped", "tiled"] and set(points.ms) == {2.0}
    assert list(gains.time_gain) == [1.0] and gains.timing_regime.item() == serial_loop.REGIME
    # its sweep row says how it timed (the dashboard's Sweeps page reads it), the grid as a sweep's
    with sqlite3.connect(tmp_path / "a.db") as conn:
        (stored,) = conn.execute("SELECT spec FROM sweeps").fetchone()
    stored = json.loads(stored)
    assert stored["timing"]["regime"] == "do_bench" and stored["variants"] == ["grouped", "tiled"]
    main([str(tmp_path / "a.db"), str(tmp_path / "b.db")])
    out = capsys.readouterr().out
    assert "run 1 vs run 2: 3 common points; median |t1/t2-1| 0.00%" in out
    assert "grouping gains: 1 pairs; median |gain1-gain2| 0.000, 100% within 0.02" in out


def test_the_serial_loop_times_every_nth_point_and_says_what_all_would_take(tmp_path, monkeypatch, capsys):
    from tools import serial_loop

    spec = tmp_path / "three.yaml"
    spec.write_text(
        "name: three\ndtypes: [bfloat16]\nvariants: [grouped, tiled]\nshapes: [{m: 24, n: 32, k: 40}]\n"
        "configs: {block_m: [16], block_n: [16], block_k: [16], group_m: [1, 2], num_warps: [4],\n"
        "          num_stages: [2]}\n"
    )
    monkeypatch.setattr(serial_loop, "time_point", lambda fn: 2.0)
    serial_loop.main(["--spec", str(spec), "--db", str(tmp_path / "s.db"), "--every", "2"])
    points, _ = read_run(str(tmp_path / "s.db"))
    assert len(points) == 2  # points 1 and 3 of the plan's 3
    out = capsys.readouterr().out
    assert "2 of 2 points timed" in out and "all 3 points of the plan take" in out
    with pytest.raises(SystemExit) as stopped:
        serial_loop.main(["--spec", str(spec), "--db", str(tmp_path / "t.db"), "--every", "0"])
    assert stopped.value.code == 2 and not (tmp_path / "t.db").exists()
    assert "--every 0: must be 1 or more" in capsys.readouterr().err
