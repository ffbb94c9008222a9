"""The point-source seam: the grid is today's plan, a searched sweep stops at its budget, resumes
after a kill without measuring a point twice, and its rows read in every view."""

import sqlite3
import subprocess
import time
from collections import Counter

import pytest
from farmkit import REPO, TINY_SPEC, farm_command, measurements, subprocess_env, write_spec

from cli import main as farm
from db.records import Status
from farm.plan import expand, make_batches
from farm.search import parse_budget
from farm.source import GridSource, SearchSource
from farm.spec import load_spec

# The tiny spec: 40x48x64 has 14 Triton candidates (tiled 2, grouped 4, splitk 8) and 24x32x40 has 11,
# each shape one cublas baseline. A budget of 4 measures 4 + 1 points a shape: 10 of the grid's 27.
BUDGET = 4
SEARCHED_POINTS = 2 * (BUDGET + 1)
# The same points timed over 20 repetitions: rows arrive over seconds (4 s; over 1.2 s with 8), so a
# kill lands mid-search.
SLOW_TINY_SPEC = TINY_SPEC.replace("min_reps: 2, max_reps: 2", "min_reps: 20, max_reps: 20")
assert SLOW_TINY_SPEC != TINY_SPEC
WORKERS = ("--workers", "2", "--no-progress")


def _plan(tmp_path, text=TINY_SPEC):
    spec = load_spec(path=str(write_spec(tmp_path, text)))
    return spec, expand(spec)[0]


def _record(point, ms):
    return point.record(Status.OK, ms=ms) if ms is not None else point.record(Status.COMPILE_ERROR, "no")


def test_grid_source_hands_out_todays_plan_once(tmp_path):
    spec, points = _plan(tmp_path)
    source = GridSource(points, spec.seed)
    assert source.size == len(points) == 27
    batches = source.take()
    expected = make_batches(points, spec.seed)
    assert [(b.m, b.n, b.k, b.points) for b in batches] == [(b.m, b.n, b.k, b.points) for b in expected]
    assert source.exhausted and source.take() == []


@pytest.mark.parametrize("strategy", ["grid", "random", "tpe", "model"])
def test_search_source_measures_each_shape_within_its_budget_and_every_baseline(tmp_path, strategy):
    _, points = _plan(tmp_path)
    source = SearchSource(points, strategy=strategy, budget=parse_budget(str(BUDGET)), seed=3, stored={})
    assert source.size == SEARCHED_POINTS
    handed: list = []
    while not source.exhausted:
        batches = source.take()
        assert batches, "a source that is not exhausted hands out work once everything is told"
        for batch in batches:
            assert len({(p.variant, p.config.key) for p in batch.points}) == len(batch.points)
            for p in batch.points:
                handed.append(p)
                source.tell(p, _record(p, ms=float(p.config.block_n + p.config.split_k)))
    assert len(handed) == len(set(handed)) == SEARCHED_POINTS
    per_shape = Counter((p.shape, p.variant == "cublas") for p in handed)
    assert per_shape == {((40, 48, 64), False): 4, ((40, 48, 64), True): 1, ((24, 32, 40), False): 4,
                         ((24, 32, 40), True): 1}  # fmt: skip


def test_search_source_resumes_from_what_is_stored(tmp_path):
    _, points = _plan(tmp_path)
    shape = [p for p in points if p.shape == (40, 48, 64)]
    stored = {shape[0]: 1.0, shape[1]: None, next(p for p in shape if p.variant == "cublas"): 0.5}
    source = SearchSource(points, strategy="random", budget=parse_budget(str(BUDGET)), seed=0, stored=stored)
    # two of the shape's four are spent already; its baseline is stored
    assert source.size == SEARCHED_POINTS - 3
    handed = []
    while not source.exhausted:
        for batch in source.take():
            for p in batch.points:
                handed.append(p)
                source.tell(p, _record(p, 1.0))
    assert not set(handed) & set(stored)
    assert len(handed) == SEARCHED_POINTS - 3


def test_a_point_another_sweep_holds_is_told_as_none_and_the_search_goes_on(tmp_path):
    _, points = _plan(tmp_path)
    source = SearchSource(points, strategy="random", budget=parse_budget("2"), seed=0, stored={})
    handed = [p for b in source.take() for p in b.points]
    for p in handed:
        source.tell(p, None)
    more = [p for b in source.take() for p in b.points]
    assert not set(more) & set(handed)


def _views(db) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")]
        return {name: conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in names}


def _start(spec, db, *extra):
    return subprocess.Popen(
        farm_command(
            "sweep", "--spec", str(spec), "--db", str(db), "--workers", "2", "--no-progress", *extra
        ),
        cwd=REPO,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _wait_for_rows(db, proc, timeout=240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        try:
            with sqlite3.connect(db, timeout=5) as conn:
                if conn.execute("SELECT count(*) FROM measurements").fetchone()[0]:
                    return
        except sqlite3.OperationalError:  # not created yet
            pass
        time.sleep(0.2)
    raise AssertionError("the search stored nothing in time")


@pytest.mark.slow
def test_a_searched_sweep_stops_at_its_budget_resumes_after_sigkill_and_reads_in_every_view(
    ray_cluster, tmp_path
):
    """The stopped and resumed runs are `farm sweep` processes, each with a local Ray of its own; the
    last run, in this process, joins the session's Ray (ray_cluster), which this process does not
    advertise to those: a local Ray started and stopped here took 6 s more."""
    spec = write_spec(tmp_path, SLOW_TINY_SPEC)
    db = tmp_path / "search.db"
    search = ("--search", "random", "--budget", str(BUDGET))
    for _attempt in range(3):
        db.unlink(missing_ok=True)
        proc = _start(spec, db, *search)
        _wait_for_rows(db, proc)
        proc.kill()
        proc.communicate(timeout=120)
        subprocess.run(["pkill", "-9", "-s", str(proc.pid)], check=False)  # its Ray processes
        saved = measurements(db)
        if len(saved) < SEARCHED_POINTS:  # the kill must land mid-search
            break
    assert 0 < len(saved) < SEARCHED_POINTS
    rerun = _start(spec, db, *search)
    output, _ = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, output
    rows = measurements(db)
    assert len(rows) == SEARCHED_POINTS, output
    assert len({r[:5] for r in rows}) == SEARCHED_POINTS  # no point twice
    assert set(saved) <= set(rows)
    assert Counter((m, n, k) for _, m, n, k, *_ in rows) == {(40, 48, 64): 5, (24, 32, 40): 5}
    views = _views(db)
    assert views["results"] == views["run_results"] == SEARCHED_POINTS
    assert views["best_configs"] > 0 and views["vs_cublas"] > 0, views
    # run again: the budget is spent, nothing more is measured
    assert (
        farm(["sweep", "--spec", str(spec), "--db", str(db), "--no-progress", "--workers", "2", *search]) == 0
    )
    assert len(measurements(db)) == SEARCHED_POINTS


def test_search_options_are_checked_before_anything_starts(tmp_path, capsys):
    spec = write_spec(tmp_path)
    db = tmp_path / "never.db"
    with pytest.raises(SystemExit) as exit_:
        farm(["sweep", "--spec", str(spec), "--db", str(db), "--search", "annealing"])
    assert exit_.value.code == 2 and "invalid choice" in capsys.readouterr().err
    for args, message in [
        (["--search", "random", "--budget", "ten"], "--budget"),
        (["--search", "random", "--budget", "0%"], "--budget"),
        (["--search", "random", "--train", str(db)], "--train"),
    ]:
        assert farm(["sweep", "--spec", str(spec), "--db", str(db), *args]) == 2
        assert message in capsys.readouterr().err
    assert not db.exists()


def test_a_record_for_a_point_never_handed_out_changes_nothing(tmp_path):
    _, points = _plan(tmp_path)
    source = SearchSource(points, strategy="grid", budget=parse_budget("1"), seed=0, stored={})
    source.tell(points[-1], _record(points[-1], 1.0))
    assert source.size == 4  # one candidate and one baseline per shape
    assert len([p for b in source.take() for p in b.points]) == 4
