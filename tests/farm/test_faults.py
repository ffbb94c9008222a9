"""The farm under faults: killed actors, processes killed from outside, kernels that kill their
process or hang. Every point ends stored exactly once; the sweep goes on."""

import os
import signal
import sqlite3
import threading
import time

import pytest
from farmkit import PLUGINS, TINY_POINTS, measurements, write_spec

from cli.sweep import print_summary
from db.records import Status
from farm.driver import Driver, SweepOptions
from farm.spec import load_spec


def _kill_when_running(driver: Driver, kill) -> threading.Thread:
    """Once the driver has stored a few points, kill worker 0 while it has work in flight."""

    def watch():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            busy = driver.workers and driver.workers[0].inflight and driver.workers[0].info
            if busy and sum(driver.counts.values()) >= 3:
                kill(driver.workers[0])
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


KILLS = [
    pytest.param(lambda ray, w: ray.kill(w.actor, no_restart=False), id="ray-kill"),
    pytest.param(lambda ray, w: os.kill(w.info.pid, signal.SIGKILL), id="sigkill-from-outside"),
]


@pytest.mark.parametrize("kill", KILLS)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_killed_worker_loses_and_duplicates_nothing(ray_cluster, tiny_spec, tmp_path, kill, workers):
    """With one worker the sweep waits for Ray to restart it, and says how long that took. With two,
    the other worker may store every point left before the killed one is back (the interpreter's tiny
    points: about 0.3 s each): the sweep then ends without waiting, its fault "not back"."""
    db = tmp_path / "results.db"
    options = SweepOptions(db=str(db), workers=workers, progress=False)
    driver = Driver(load_spec(path=str(tiny_spec)), options, "t")
    watcher = _kill_when_running(driver, lambda w: kill(ray_cluster, w))
    result = driver.run()
    watcher.join(timeout=1)
    rows = measurements(db)
    assert result.status == "finished"
    assert len(rows) == TINY_POINTS and len({r[:5] for r in rows}) == TINY_POINTS
    assert {status for *_, status in rows} == {"ok"}
    assert [f.kind for f in result.faults] == ["worker lost"]
    recovery_s = result.faults[0].recovery_s
    if workers == 1:
        assert recovery_s is not None and recovery_s < 60
    else:
        assert recovery_s is None or recovery_s < 60


def test_crashing_and_hanging_kernels(ray_cluster, tmp_path, capsys):
    spec = write_spec(
        tmp_path,
        """\
        name: faulty
        dtypes: [bfloat16]
        variants: [grouped, kills_itself, hangs]
        shapes: [{m: 40, n: 64, k: 32}, {m: 24, n: 64, k: 48}]
        configs: {block_m: [16], block_n: [16, 32], block_k: [16], group_m: [1],
                  num_warps: [4], num_stages: [2]}
        timing: {min_reps: 2, max_reps: 2}
        """,
    )
    db = tmp_path / "faulty.db"
    # One worker, one batch at a time: the bad configs meet their second shape after quarantine.
    options = SweepOptions(
        db=str(db),
        plugins=[str(PLUGINS / "faulty.py")],
        workers=1,
        inflight_per_worker=1,
        point_timeout_s=4,
        progress=False,
    )
    result = Driver(load_spec(path=str(spec)), options, "t").run()
    print_summary(result, str(db))
    rows = {(variant, m, key): status for variant, m, _, _, key, status in measurements(db)}
    bad = "bm16_bn32_bk16_gm1_sk1_w4_s2_ieee"
    assert len(rows) == 12  # 2 shapes x 3 variants x 2 configs, each exactly once
    assert {rows[("kills_itself", m, bad)] for m in (40, 24)} == {Status.CRASHED}
    assert {rows[("hangs", m, bad)] for m in (40, 24)} == {Status.TIMEOUT}
    assert {s for (v, m, key), s in rows.items() if key != bad or v == "grouped"} == {Status.OK}

    with sqlite3.connect(db) as conn:
        errors = dict(
            conn.execute(
                "SELECT variant || ' ' || m, error FROM measurements WHERE config_key = ? "
                "AND variant != 'grouped'",
                (bad,),
            ).fetchall()
        )
    # One shape ran the bad config (the crash twice: first try and one retry); the other was quarantined.
    assert sorted(e.startswith("quarantined") for e in errors.values()) == [False, False, True, True]
    crash_faults = [f for f in result.faults if f.kind == "worker lost" and f.point]
    timeouts = [f for f in result.faults if f.kind == "timeout"]
    assert len(crash_faults) == 2 and len(timeouts) == 1
    (culprit,) = {f.point for f in crash_faults}  # the first try and its retry blame one point
    assert culprit.startswith("kills_itself bfloat16") and culprit.endswith(bad)
    # Once in a full run on this 2-core VM (session 13), a batch sent just after the worker's restart
    # met Ray's "actor is temporarily unavailable" and was counted as a loss of its own, on no point
    # ("worker lost on a batch"): requeued, nothing lost or doubled (the rows above). Tolerated; a loss
    # blamed on a point would not be.
    assert all(f.kind in ("worker lost", "timeout") for f in result.faults)
    assert all(f.recovery_s is not None and f.recovery_s < 60 for f in result.faults)
    out = capsys.readouterr().out
    assert "fault: worker" in out and "back after" in out
    assert "crashed 2" in out and "timeout 2" in out
