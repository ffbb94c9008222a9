"""Nothing lost and nothing silent: a full disk mid-sweep is one line (exit 3) with the sweep left
`interrupted`, its claims released and the database whole; a huge plan is priced from its axes and
refused at once; the database is checked before Ray starts; signals are exit status 130 whenever they
come, with nothing left running; a running sweep's counts are in its row."""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from farmkit import HALF_POINTS, REPO, SLOW_HALF_SPEC, TINY_SPEC, farm_command, subprocess_env, write_spec
from sqlalchemy import Engine, event

import cli
import farm.sink
from db.records import Backend
from farm.cluster import WorkerHandle
from farm.errors import UserError
from farm.options import SweepOptions
from farm.plan import estimate_gpu_seconds, expand
from farm.price import price
from farm.spec import load_spec, parse_spec
from farm.worker import WorkerInfo

# The fake GPU workers of the database tests (tests/db/fakefarm.py): the driver's loop, its sink and
# its claims are real; each point is "measured" by a short sleep.
sys.path.insert(0, str(Path(__file__).parents[1] / "db"))
import fakefarm

# About 1.7e7 points over 4,096 shapes (16 x 16 x 16) x 2 dtypes x 2 variants' pruned configs.
SIZES = [512 * i for i in range(1, 17)]
HUGE_SPEC = f"""\
name: huge
dtypes: [bfloat16, float16]
variants: [tiled, splitk]
shapes:
  - {{m: {SIZES}, n: {SIZES}, k: {SIZES}}}
configs:
  block_m: [32, 64, 128, 256]
  block_n: [32, 64, 128, 256]
  block_k: [32, 64, 128]
  split_k: [1, 2, 4, 8, 16]
  num_warps: [2, 4, 8]
  num_stages: [2, 3, 4, 5]
"""


def _fake_launch(seconds: float = 0.05):
    """SweepOptions.launch replaced: one fake worker in this process, no Ray."""

    def launch(self, plugin_sources):
        info = WorkerInfo(fakefarm.FAKE_ENV, "fake:0", "", Backend.INTERPRETER, 232448, os.getpid(), "node")
        actor = fakefarm.FakeActor(info, seconds, lambda point: 1.0)
        return fakefarm.FakeLaunched([WorkerHandle(actor=actor)])

    return launch


def _sweep(spec: Path, db: Path, *extra: str) -> int:
    return cli.main(
        ["sweep", "--spec", str(spec), "--db", str(db), "--backend", "interpreter", "--no-progress", *extra]
    )


def test_disk_full_mid_sweep_is_one_line_and_leaves_the_sweep_interrupted(
    tmp_path, monkeypatch, capsys
) -> None:
    """SQLite's own error, raised from the second INSERT of measurements on: what a full disk gives."""
    monkeypatch.setattr(SweepOptions, "launch", _fake_launch())
    monkeypatch.setattr(farm.sink, "FLUSH_EVERY_S", 0.0)  # a flush per loop: several before the fault
    inserts = []

    def disk_full(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO MEASUREMENTS"):
            inserts.append(statement)
            if len(inserts) > 1:
                raise sqlite3.OperationalError("database or disk is full")

    spec, db = write_spec(tmp_path, TINY_SPEC), tmp_path / "results.db"
    event.listen(Engine, "before_cursor_execute", disk_full)
    try:
        code = _sweep(spec, db)
    finally:
        event.remove(Engine, "before_cursor_execute", disk_full)
    err = capsys.readouterr().err
    assert code == 3
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith(f"error: cannot write to {db}: database or disk is full"), line
    assert f"free in {tmp_path}" in line and "points left need about" in line
    assert "run the same command again" in line
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        status, n_ok = conn.execute("SELECT status, n_ok FROM sweeps").fetchone()
        stored = conn.execute("SELECT count(*) FROM measurements").fetchone()[0]
        claims = conn.execute("SELECT count(*) FROM claims").fetchone()[0]
    assert status == "interrupted" and claims == 0
    assert 0 < stored < fakefarm.TINY_POINTS and n_ok == stored


def test_the_same_command_resumes_after_the_disk_is_freed(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(SweepOptions, "launch", _fake_launch(0.0))

    def disk_full(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO MEASUREMENTS"):
            raise sqlite3.OperationalError("database or disk is full")

    spec, db = write_spec(tmp_path, TINY_SPEC), tmp_path / "results.db"
    event.listen(Engine, "before_cursor_execute", disk_full)
    try:
        assert _sweep(spec, db) == 3
    finally:
        event.remove(Engine, "before_cursor_execute", disk_full)
    assert _sweep(spec, db) == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM measurements").fetchone()[0] == fakefarm.TINY_POINTS
        assert conn.execute("SELECT status FROM sweeps ORDER BY id").fetchall() == [
            ("interrupted",),
            ("finished",),
        ]


def test_a_running_sweep_keeps_its_counts_in_its_row(tmp_path) -> None:
    """The dashboard read "0 ok of 277" beside 105 stored rows: n_ok was written at the end alone.
    The sweep runs here (the driver sets a SIGTERM handler: main thread only); a thread reads."""
    db = tmp_path / "results.db"
    seen, done = [], threading.Event()

    def read() -> None:
        while not done.is_set():
            try:
                with sqlite3.connect(db, timeout=5) as conn:
                    row = conn.execute("SELECT status, n_ok FROM sweeps").fetchone()
                    ok = conn.execute("SELECT count(*) FROM measurements WHERE status = 'ok'").fetchone()[0]
            except sqlite3.OperationalError:  # no tables yet
                row = None
            if row and row[0] == "running" and ok:
                seen.append((row[1], ok))
            time.sleep(0.1)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        fakefarm.run(str(db), seconds=0.15)
    finally:
        done.set()
        reader.join()
    assert seen, "never saw the sweep running with rows stored"
    assert all(n_ok == ok for n_ok, ok in seen), seen  # one transaction writes both
    assert any(0 < n_ok < fakefarm.TINY_POINTS for n_ok, _ in seen)


# -- a huge plan ------------------------------------------------------------------------------------


def test_a_huge_spec_is_refused_at_once_with_its_estimate(tmp_path) -> None:
    """10^7 points: refused in one line with the points, the GPU time and the flag that takes the risk,
    within 5 s of pricing and under 500 MB of the command's peak memory (it planned for 140 s in 4.1 GB)."""
    spec_path = write_spec(tmp_path, HUGE_SPEC, "huge.yaml")
    started = time.perf_counter()
    plan = price(load_spec(path=str(spec_path)))
    assert time.perf_counter() - started < 5
    assert plan.points > 10**7 and not plan.exact

    db = tmp_path / "results.db"
    # The command in a fresh interpreter, its peak resident memory read from the child's rusage.
    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
        "print(p.returncode, peak, time.perf_counter() - t)\n"
        "print(p.stderr, end='')\n"
    )
    command = farm_command("sweep", "--spec", str(spec_path), "--db", str(db), "--workers", "2")
    out = subprocess.run(
        [sys.executable, "-c", probe, *command],
        env=subprocess_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    head, *err = out.stdout.splitlines()
    code, peak, seconds = head.split()
    assert int(code) == 2, out.stdout
    assert int(peak) < 500 * 2**20, f"peak {int(peak) / 2**20:.0f} MiB"
    assert float(seconds) < 60  # the pricing alone is held to 5 s above; this is the interpreter's start too
    assert len(err) == 1, err
    assert err[0].startswith("error: this plan is about ") and "points over about 4,096 shapes" in err[0]
    assert "days of GPU time" in err[0] and "--allow-huge" in err[0]
    assert not db.exists()  # nothing created
    assert (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 4 * 2**20 * 1024
    )  # this process never planned it


def test_dry_run_prices_a_huge_spec_without_expanding_it(tmp_path, monkeypatch, capsys) -> None:
    spec_path = write_spec(tmp_path, HUGE_SPEC, "huge.yaml")

    def no_expand(*args, **kwargs):
        raise AssertionError("expanded")

    monkeypatch.setattr("farm.plan.expand", no_expand)
    assert cli.main(["sweep", "--spec", str(spec_path), "--dry-run", "--backend", "cuda"]) == 0
    out = capsys.readouterr().out
    assert "about 1" in out and "not expanded" in out and "estimated GPU time" in out


@pytest.mark.parametrize("preset", ["smoke", "splitk", "llm"])
def test_price_agrees_with_expand(preset) -> None:
    spec = load_spec(preset=preset)
    points, pruned = expand(spec)
    exact = price(spec)
    assert exact.exact and exact.points == len(points) and exact.pruned == pruned
    timing = spec.timing
    seconds = estimate_gpu_seconds(points, 8, timing.regime, timing.limit_passes, timing.energy_window_s)
    assert exact.gpu_seconds == pytest.approx(seconds)
    sampled = price(spec, exact_work=0, sample_work=2_000)  # a sample of shapes and configs
    assert not sampled.exact
    assert sampled.points == pytest.approx(len(points), rel=0.35)
    assert sampled.gpu_seconds == pytest.approx(seconds, rel=0.35)


def test_unknown_variant_names_the_spec_line(tmp_path, capsys) -> None:
    spec = write_spec(
        tmp_path, TINY_SPEC.replace("variants: [tiled, grouped, splitk, cublas]", "variants: [tiled, nope]")
    )
    assert cli.main(["sweep", "--spec", str(spec), "--dry-run"]) == 2
    err = capsys.readouterr().err
    line = TINY_SPEC.splitlines().index("variants: [tiled, grouped, splitk, cublas]") + 1
    assert err.startswith(f"error: {spec}:{line}: variants[1]: unknown variant 'nope'"), err


# -- the database before Ray --------------------------------------------------------------------------


def _newer(db: Path) -> None:
    fakefarm.run(str(db), spec_text=fakefarm.TINY_SPEC)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'f00d'")


def _corrupt(db: Path) -> None:
    fakefarm.run(str(db), spec_text=fakefarm.TINY_SPEC)
    with sqlite3.connect(db) as conn:  # everything into the file: no WAL left to mend page 1 from
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the first page's b-tree header and cells: sqlite_master
    db.write_bytes(bytes(data))


@pytest.mark.parametrize(("damage", "said"), [(_newer, "newer version"), (_corrupt, "cannot open")])
def test_the_database_is_checked_before_ray_starts(tmp_path, monkeypatch, capsys, damage, said) -> None:
    db = tmp_path / "results.db"
    damage(db)
    before = db.read_bytes()

    def launch(self, plugin_sources):
        raise AssertionError("Ray started")

    monkeypatch.setattr(SweepOptions, "launch", launch)
    assert _sweep(write_spec(tmp_path, TINY_SPEC), db) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err
    assert db.read_bytes() == before


def test_the_spec_parses_its_lines_for_later_checks() -> None:
    spec = parse_spec(TINY_SPEC, "tiny.yaml")
    assert spec.where("variants", 2) == "tiny.yaml:3"
    assert spec.where("no_such_field") == "tiny.yaml:1"


# -- signals -----------------------------------------------------------------------------------------


def _start(spec: Path, db: Path) -> subprocess.Popen:
    return subprocess.Popen(
        farm_command("sweep", "--spec", str(spec), "--db", str(db), "--workers", "2", "--no-progress"),
        cwd=REPO,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its Ray's processes in its session: what is left is found by session
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's driver gets it
    )


def _session(pid: int) -> list[str]:
    # -ww: whole command lines. With COLUMNS=80 (CI sets it) ps cut each at 80 characters, which took
    # "gcs_server" and "raylet" off the paths of a checkout under /check/work/main: the start-up test's
    # wait then matched only the raylet's zombie while the sweep, done, shut Ray down.
    out = subprocess.run(["ps", "-ww", "-o", "pid=,args=", "-s", str(pid)], capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line.strip()]


def _left_running(pid: int, grace_s: float = 30) -> list[str]:
    """Processes of the sweep's session still there after `grace_s` (Ray's take a moment to exit)."""
    deadline = time.monotonic() + grace_s
    while (left := _session(pid)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if left:
        subprocess.run(["pkill", "-9", "-s", str(pid)], check=False)
    return left


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def _stored(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM measurements").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
def test_two_ctrl_cs_0_3_s_apart_exit_130_with_nothing_left_running(tmp_path) -> None:
    db = tmp_path / "results.db"
    proc = _start(write_spec(tmp_path, SLOW_HALF_SPEC, "half.yaml"), db)
    _wait_for(lambda: db.exists() and _stored(db) > 0, proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, output[-3000:]
    assert _left_running(proc.pid) == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM sweeps").fetchone() == ("interrupted",)
        assert conn.execute("SELECT count(*) FROM claims").fetchone() == (0,)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert _stored(db) <= HALF_POINTS


def test_a_stop_while_ray_fails_to_start_is_exit_130(tmp_path, monkeypatch, capsys) -> None:
    """SIGTERM while Ray starts is held until ray.init returns; when it raises instead (a raylet that
    died: 30 s, then one line), the command stops as asked, 130, and does not report the failure."""

    def launch(self, plugin_sources):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler runs at the next bytecode
        raise UserError("a local Ray did not start: The current node timed out during startup.")

    monkeypatch.setattr(SweepOptions, "launch", launch)
    code = _sweep(write_spec(tmp_path, TINY_SPEC, "tiny.yaml"), tmp_path / "results.db")
    err = capsys.readouterr().err
    assert code == 130, err
    assert err.splitlines() == ["stopping once Ray has started (a few seconds)", "interrupted"]


@pytest.mark.slow
def test_sigterm_during_ray_start_up_exits_130_with_nothing_left_running(tmp_path) -> None:
    """Sent once Ray's first process is up (ray.init has set its own SIGTERM handler by then)."""
    db = tmp_path / "results.db"
    proc = _start(write_spec(tmp_path, SLOW_HALF_SPEC, "half.yaml"), db)
    _wait_for(lambda: any("gcs_server" in line or "raylet" in line for line in _session(proc.pid)), proc)
    running = _session(proc.pid)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=180)
    # What ran when the signal went, so a failure names its moment.
    assert proc.returncode == 130, (
        f"exit {proc.returncode}; at the signal: {running}; said: {output[-3000:]!r}"
    )
    assert "interrupted" in output
    assert _left_running(proc.pid) == []
    assert _stored(db) == 0
