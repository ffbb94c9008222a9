"""QuietHost's measurement switch (farm.quiet_host.SWITCH_ENV) and benchmarks/quiet_host_cost.py's tiny
mode: the same three-point sweep under the interpreter with QuietHost as shipped and off, one CSV row a
mode, its numbers those of the runs' databases."""

import csv
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import pytest
from farmkit import REPO, subprocess_env

from farm.quiet_host import SWITCH_ENV, LoudHost, QuietHost, worker_quiet_host

BENCH = str(REPO / "benchmarks" / "quiet_host_cost.py")


@pytest.mark.parametrize(
    ("environ", "kind"),
    [({}, QuietHost), ({SWITCH_ENV: "1"}, QuietHost), ({SWITCH_ENV: "0"}, LoudHost)],
    ids=["unset", "1", "0"],
)
def test_the_switch_picks_the_workers_quiet_host(environ, kind):
    assert type(worker_quiet_host(environ)) is kind


def test_a_worker_started_with_the_switch_holds_no_compile_back(monkeypatch, tmp_path):
    """The worker reads the switch when it starts; its LoudHost lets a compile run beside host times."""
    from farm.worker import GpuWorker

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(SWITCH_ENV, "0")
    worker = GpuWorker([], backend="interpreter", compile_threads=1)
    worker.pool.shutdown()
    assert type(worker.quiet) is LoudHost
    monkeypatch.delenv(SWITCH_ENV)
    shipped = GpuWorker([], backend="interpreter", compile_threads=1)
    shipped.pool.shutdown()
    assert type(shipped.quiet) is QuietHost

    started = threading.Event()

    def compile_one():
        with worker.quiet.compiling():
            started.set()

    with worker.quiet.quiet():
        compiling = threading.Thread(target=compile_one)
        compiling.start()
        assert started.wait(timeout=30)  # not held until the host times are taken
    compiling.join()


def _host_ms(db) -> dict:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT variant, dtype, m, n, k, config_key, host_ms FROM measurements "
            "WHERE status = 'ok' AND host_ms IS NOT NULL"
        )
        return {tuple(r[:6]): r[6] for r in rows}


@pytest.mark.slow
def test_the_tiny_bench_writes_a_row_per_mode_from_its_runs(tmp_path):
    ray_tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths stay short
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    table, keep = tmp_path / "cost.csv", tmp_path / "keep"
    env = {**subprocess_env(), "RAY_TMPDIR": ray_tmp, "TMPDIR": str(own_tmp)}
    command = [sys.executable, BENCH, "--tiny", "--csv", str(table), "--keep", str(keep)]
    t0 = time.monotonic()
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    bench_s = time.monotonic() - t0
    assert not list(own_tmp.glob("quiet-host-cost-*"))  # the runs' databases and caches went with it
    assert done.stdout.splitlines()[-3].split()[0] == "mode"  # the table comes last
    assert (tmp_path / "cost.csv.meta").read_text().startswith("# command: python ")

    rows = list(csv.DictReader(table.open()))
    assert [(r["mode"], r["run"]) for r in rows] == [("shipped", "1"), ("off", "2")]
    times = {r["mode"]: _host_ms(keep / f"{r['mode']}.db") for r in rows}
    common = sorted(set(times["shipped"]) & set(times["off"]))
    assert len(common) == 3  # two tiled configs and cuBLAS, ok in both runs
    for r in rows:
        with sqlite3.connect(keep / f"{r['mode']}.db") as conn:
            stored, ok = conn.execute("SELECT COUNT(*), SUM(status = 'ok') FROM measurements").fetchone()
            (gpu,) = conn.execute("SELECT gpu_name FROM environments").fetchone()
        assert int(r["points"]) == stored == 3 and int(r["ok"]) == ok == 3
        assert r["gpu"] == gpu and int(r["common"]) == len(common)
        loop_s, command_s = float(r["loop_s"]), float(r["command_s"])
        assert 0 < loop_s <= command_s < bench_s
        # points a minute from the row's points and loop seconds (rounded to 0.1 s: its bounds)
        rate = float(r["points_per_min"])
        assert 60 * 3 / (loop_s + 0.05) <= rate <= 60 * 3 / max(loop_s - 0.05, 1e-3)
        mine = [times[r["mode"]][key] for key in common]
        assert float(r["host_us_median"]) == pytest.approx(1e3 * statistics.median(mine), abs=0.006)
        assert min(mine) * 1e3 - 0.006 <= float(r["host_us_p90"]) <= max(mine) * 1e3 + 0.006
        assert float(r["host_us_p90"]) >= float(r["host_us_median"])
        ratio = statistics.median(times[r["mode"]][key] / times["shipped"][key] for key in common)
        assert float(r["host_ratio_median"]) == pytest.approx(ratio, abs=6e-4)
        (cublas,) = [ms for key, ms in times[r["mode"]].items() if key[0] == "cublas"]
        assert float(r["cublas_host_us"]) == pytest.approx(1e3 * cublas, abs=0.006)
    assert rows[0]["host_ratio_median"] == "1.0"
