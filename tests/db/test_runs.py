"""Runs and claims (revision 0006) through the real sweep driver on fake workers (fakefarm): `--repeat`
keeps every run and the views show the newest, compare_runs says b over a, two drivers into one database
measure each point once, and a dead sweep's claims expire."""

from __future__ import annotations

import multiprocessing
import subprocess
from datetime import timedelta

import fakefarm
import pytest
from sqlalchemy import Engine, select, text, update
from sqlalchemy.orm import Session

from db import claims, queries
from db.models import Claim, Sweep
from db.writes import environment_id, start_sweep
from farm.plan import code_versions, expand
from farm.spec import parse_spec


def time_a(point) -> float:
    """Run a's times: split_k 2 at 0.5 ms, else group_m 2 at 0.8 ms, else 1 ms."""
    if point.config.split_k == 2:
        return 0.5
    return 0.8 if point.config.group_m == 2 else 1.0


def time_b(point) -> float:
    """Run b's: the split_k 2 points 25% slower (0.625 ms), the rest as in run a."""
    return 0.625 if point.config.split_k == 2 else time_a(point)


def target_of(engine: Engine) -> str:
    """What `farm sweep --db` takes for this engine's database."""
    if engine.dialect.name == "sqlite":
        return str(engine.url.database)
    return engine.url.render_as_string(hide_password=False)


def rows(engine: Engine, sql: str) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql))]


def test_repeat_keeps_both_runs_views_show_the_newest_and_compare_runs_is_b_over_a(engine: Engine) -> None:
    target = target_of(engine)
    a = fakefarm.run(target, time_of=time_a)
    again = fakefarm.run(target, time_of=time_b)  # no --repeat: every point is held, nothing measured
    b = fakefarm.run(target, repeat=True, time_of=time_b)
    assert (a.measured, again.measured, again.skipped, b.measured) == (27, 0, 27, 27)

    n = fakefarm.TINY_POINTS
    assert rows(
        engine, "SELECT sweep_id, COUNT(*), SUM(latest) FROM measurements GROUP BY sweep_id ORDER BY 1"
    ) == [
        (a.sweep_id, n, 0),
        (b.sweep_id, n, n),
    ]
    with engine.connect() as conn:
        newest = queries.results(conn)
        assert len(newest) == n and set(newest.sweep_id) == {b.sweep_id}
        assert len(queries.results(conn, sweep=a.sweep_id)) == n
        counts = queries.summary(conn)
        assert (counts["measurements"], counts["rows_all_runs"]) == (n, 2 * n)
        # A newer slower run displaces the older faster one in the summaries: splitk's best is b's 0.625 ms.
        best = queries.best_configs(conn, gpu_name=fakefarm.FAKE_ENV.gpu_name).groupby("variant").ms.min()
        assert best.to_dict() == {"cublas": 1.0, "grouped": 0.8, "splitk": 0.625, "tiled": 1.0}
        # per block shape: 0.8 / 0.625 where a group_m 2 row is the unsplit best, else 1 / 0.625 (b's, not
        # a's 1.6 and 2.0)
        assert sorted(queries.splitk_speedup(conn).speedup.round(12).unique()) == [1.28, 1.6]
        cmp = queries.compare_runs(conn, a.sweep_id, b.sweep_id)
        with pytest.raises(Exception, match="no sweep with id 999"):
            queries.compare_runs(conn, a.sweep_id, 999)

    points = cmp.points
    assert list(points.columns) == list(queries.RUN_POINT_COLUMNS) and len(points) == n
    split = points.config_key.str.contains("_sk2_")
    # splitk's split_k 2 points: 2 block_n x 2 group_m on 40x48x64, 3 on 24x32x40 (group_m 2 pruned at
    # block_n 32: one tile column)
    assert split.sum() == 7
    assert set(points[split].verdict) == {"slower"} and set(points[~split].verdict) == {"same"}
    assert set(points[split].ratio_b_over_a) == {1.25} and set(points[~split].ratio_b_over_a) == {1.0}
    # split-K: 0.8 / 0.5 = 1.6 in a, 0.8 / 0.625 = 1.28 in b; grouping: 1 / 0.8 in both
    assert cmp.splitk[["speedup_a", "speedup_b"]].values.tolist() == [[1.6, 1.28]] * 2
    assert cmp.splitk.diff_b_minus_a.round(12).tolist() == [-0.32, -0.32]
    assert len(cmp.grouping) > 0 and set(cmp.grouping.diff_b_minus_a) == {0.0}
    s = cmp.summary
    assert (s["run_a"], s["run_b"], s["n_points"], s["n_slower"], s["n_faster"]) == (
        a.sweep_id,
        b.sweep_id,
        n,
        7,
        0,
    )
    assert s["share_same"] == 20 / 27 and s["median_ratio_b_over_a"] == 1.0
    assert (s["n_splitk_shapes"], round(s["median_splitk_diff_b_minus_a"], 12)) == (2, -0.32)
    assert s["median_grouping_diff_b_minus_a"] == 0.0


def _keys(spec_text: str = fakefarm.TINY_SPEC) -> set[tuple]:
    spec = parse_spec(spec_text)
    versions = code_versions(spec.variants)
    return {p.key(versions[p.variant]) for p in expand(spec)[0]}


def _dead_sweep(engine: Engine, heartbeat_age_s: float) -> tuple[int, int]:
    """A sweep left `running` holding a claim on every point of the tiny spec, its heartbeat that old."""
    with Session(engine) as s:
        env_id = environment_id(s, fakefarm.FAKE_ENV)
        sweep_id = start_sweep(s, name="killed", spec={}, command="", n_points=fakefarm.TINY_POINTS)
        got = claims.claim(s, sweep_id=sweep_id, run=0, environment_ids=[env_id], keys=_keys())
        assert len(got.ours) == fakefarm.TINY_POINTS
        beat = s.get(Sweep, sweep_id).heartbeat_at - timedelta(seconds=heartbeat_age_s)
        s.execute(update(Sweep).where(Sweep.id == sweep_id).values(heartbeat_at=beat))
        s.commit()
    return sweep_id, env_id


def test_claims_of_a_live_sweep_are_skipped_and_said(engine: Engine, capsys) -> None:
    holder, _ = _dead_sweep(engine, heartbeat_age_s=0.0)  # alive: its heartbeat is fresh
    target = target_of(engine)
    result = fakefarm.run(target)
    assert (result.measured, result.claimed_elsewhere) == (0, fakefarm.TINY_POINTS)
    with Session(engine) as s:  # start_sweep stores this machine's host name
        host = s.get(Sweep, holder).host
    assert f"27 points claimed by sweep #{holder} on {host}, skipped" in capsys.readouterr().err


def test_a_dead_sweeps_claims_expire_and_it_is_marked_interrupted(engine: Engine, capsys) -> None:
    dead, _ = _dead_sweep(engine, heartbeat_age_s=claims.STALE_AFTER_S + 1)
    target = target_of(engine)
    result = fakefarm.run(target)
    assert (result.measured, result.claimed_elsewhere) == (fakefarm.TINY_POINTS, 0)
    with Session(engine) as s:
        assert (
            s.get(Sweep, dead).status == "interrupted" and s.get(Sweep, result.sweep_id).status == "finished"
        )
        assert s.scalars(select(Claim)).all() == []  # the dead sweep's reaped, the new one's released
    assert f"sweep #{dead} had stopped" in capsys.readouterr().err


def test_a_sweep_whose_process_is_gone_is_dead_at_once(engine: Engine) -> None:
    """A driver killed on this host (kill -9): its heartbeat is fresh, but its process is gone, so a sweep
    resumed right after it measures the points it had claimed."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead, _ = _dead_sweep(engine, heartbeat_age_s=0.0)
    with Session(engine) as s:
        s.execute(update(Sweep).where(Sweep.id == dead).values(pid=gone.pid))
        s.commit()
    result = fakefarm.run(target_of(engine))
    assert (result.measured, result.claimed_elsewhere) == (fakefarm.TINY_POINTS, 0)
    with Session(engine) as s:
        assert s.get(Sweep, dead).status == "interrupted"


def test_a_claim_expires_when_its_sweeps_heartbeat_is_stale(engine: Engine) -> None:
    """The boundary: a claim holds STALE_AFTER_S after its sweep's last heartbeat, not longer."""
    keys = sorted(_keys())[:3]
    with Session(engine) as s:
        env_id = environment_id(s, fakefarm.FAKE_ENV)
        first, second = (start_sweep(s, name=n, spec={}, command="", n_points=3) for n in ("first", "second"))
        assert claims.claim(s, sweep_id=first, run=0, environment_ids=[env_id], keys=keys).ours == set(keys)
        beat = s.get(Sweep, first).heartbeat_at
        s.commit()
        alive = beat + timedelta(seconds=claims.STALE_AFTER_S - 1)
        got = claims.claim(s, sweep_id=second, run=0, environment_ids=[env_id], keys=keys, now=alive)
        assert got.ours == set() and got.held[first][1] == 3
        # A --repeat run claims under its own run: the first sweep's claims do not stop it.
        assert claims.claim(
            s, sweep_id=second, run=second, environment_ids=[env_id], keys=keys, now=alive
        ).ours == set(keys)
        stale = beat + timedelta(seconds=claims.STALE_AFTER_S + 1)
        assert claims.claim(
            s, sweep_id=second, run=0, environment_ids=[env_id], keys=keys, now=stale
        ).ours == set(keys)
        claims.heartbeat(s, second, now=stale)  # the second beats; the first has not since `beat`
        assert claims.reap(s, now=stale) == [first]
        s.commit()
        assert s.get(Sweep, first).status == "interrupted"


def test_two_drivers_into_one_database_measure_each_point_once(engine: Engine) -> None:
    """Two sweep drivers started together in two processes: every point measured exactly once."""
    target = target_of(engine)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = ctx.Barrier(2)  # passed once both processes have imported the driver (a fixed 4 s before)
    procs = [ctx.Process(target=fakefarm.run_at, args=(target, start, 0.05, out)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    measured = [r[1] for r in results]
    assert sum(measured) == fakefarm.TINY_POINTS, results
    for _, n, elsewhere, skipped in results:
        assert n + elsewhere + skipped == fakefarm.TINY_POINTS, results
    per_point = rows(engine, "SELECT COUNT(*) FROM measurements GROUP BY variant, m, n, k, config_key")
    assert len(per_point) == fakefarm.TINY_POINTS and {c for (c,) in per_point} == {1}
    assert rows(engine, "SELECT COUNT(*) FROM claims") == [(0,)]
