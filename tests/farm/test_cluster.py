"""The farm as Ray users launch it: `ray job submit` against a real `ray start --head`, and one
worker per (logical) GPU with the work spread across them."""

import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from farmkit import (
    REPO,
    TINY_POINTS,
    TWO_BATCH_POINTS,
    TWO_BATCH_SPEC,
    measurements,
    subprocess_env,
    write_spec,
)

from farm.driver import Driver, SweepOptions
from farm.spec import load_spec
from tools.ports import free_port, stop_group

RAY = str(Path(sys.executable).with_name("ray"))


@pytest.fixture(scope="module")
def ray_head():
    """`ray start --head` with 2 logical GPUs and the Jobs server; stopped with its process group.
    One head for the module's tests that use it: each sweep's driver and workers end with the sweep,
    and a head took 10 s to start and 5 s to stop a test here."""
    port, dashboard = free_port(), free_port()
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths must stay under 108 bytes
    # Token authentication on, as on a real cluster: the head and every client share the secret.
    token = Path(temp_dir) / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {**subprocess_env(), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    # Ray's temp dir under RAY_TMPDIR, where Ray (and farm/cluster.py) look for a running head's
    # address file, <RAY_TMPDIR>/ray/ray_current_cluster: this head is "the one on this node".
    env["RAY_TMPDIR"] = temp_dir
    proc = subprocess.Popen(
        [
            RAY,
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--num-cpus=2",
            "--num-gpus=2",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard}",
            f"--temp-dir={temp_dir}/ray",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    address = f"http://127.0.0.1:{dashboard}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        probe = subprocess.run(
            [RAY, "job", "list", "--address", address], env=env, capture_output=True, text=True
        )
        if probe.returncode == 0:
            break
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(1)
    else:
        raise AssertionError("the Ray head did not come up")
    yield address, env
    # A throwaway head: its graceful shutdown took 33 s here, a third of this file's time, so SIGKILL
    # follows SIGTERM after 1 s (a grace of 5 s was waited out whole: 6.6 s of teardown).
    stop_group(proc, 1)
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def two_batch_spec(tmp_path) -> Path:
    """Two batches, one for each of the head's 2 GPUs: 4 points instead of the tiny spec's 27 (about
    10 s of interpreter work less a sweep)."""
    return write_spec(tmp_path, TWO_BATCH_SPEC)


@pytest.mark.slow
def test_ray_job_submit_runs_the_sweep_into_the_database(ray_head, two_batch_spec, tmp_path):
    address, env = ray_head
    db = tmp_path / "results.db"
    command = [RAY, "job", "submit", "--address", address, "--working-dir", str(REPO), "--", "python",
               "farm/sweep.py", "--spec", str(two_batch_spec), "--db", str(db), "--no-progress"]  # fmt: skip
    # The head's job agent starts after the head answers: on a loaded 2-core machine a submit can come
    # first and be refused with "please try again later" before anything runs. A user tries again.
    for _ in range(10):
        job = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        if "No available agent to submit job" not in job.stderr:
            break
        time.sleep(3)
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    assert f"sweep finished: {TWO_BATCH_POINTS} points measured" in job.stdout
    rows = measurements(db)
    assert len(rows) == TWO_BATCH_POINTS and {status for *_, status in rows} == {"ok"}
    with sqlite3.connect(db) as conn:
        workers = {w for (w,) in conn.execute("SELECT DISTINCT worker FROM measurements")}
    assert len(workers) == 2  # both logical GPUs of the head did work


@pytest.mark.slow
def test_sweep_joins_the_head_on_this_node_without_flags(ray_head, two_batch_spec, tmp_path):
    """As `ray submit` runs it on the head node: `python ~/sweep.py ARGS`, no address anywhere.
    Before, ray.init(num_gpus=...) found this head and refused: "When connecting to an existing
    cluster, num_cpus and num_gpus must not be provided"."""
    _, env = ray_head
    env = {k: v for k, v in env.items() if k != "RAY_ADDRESS"}
    record = Path(env["RAY_TMPDIR"]) / "ray" / "ray_current_cluster"
    deadline = time.monotonic() + 60  # `ray start` writes it once the head is up, after the Jobs server
    while not record.is_file() and time.monotonic() < deadline:
        time.sleep(1)
    assert record.is_file(), sorted(str(p) for p in Path(env["RAY_TMPDIR"]).rglob("*current*"))
    db = tmp_path / "results.db"
    run = subprocess.run(
        [sys.executable, "farm/sweep.py", "--spec", str(two_batch_spec), "--db", str(db), "--no-progress"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"sweep finished: {TWO_BATCH_POINTS} points measured" in run.stdout
    assert len(measurements(db)) == TWO_BATCH_POINTS


def test_one_worker_per_gpu_and_the_work_is_spread(ray_cluster, tmp_path):
    spec = write_spec(
        tmp_path,
        """\
        name: spread
        dtypes: [float16]
        variants: [tiled, cublas]
        shapes: [{m: [16, 32, 48, 64], n: [16, 48], k: 32}]
        configs: {block_m: [16], block_n: [16], block_k: [16], num_warps: [4], num_stages: [2]}
        timing: {min_reps: 2, max_reps: 2}
        """,
    )
    db = tmp_path / "results.db"
    result = Driver(load_spec(path=str(spec)), SweepOptions(db=str(db), progress=False), "t").run()
    assert result.status == "finished" and result.measured == 16  # 8 shapes, 8 batches of 2 points
    with sqlite3.connect(db) as conn:
        per_worker = dict(conn.execute("SELECT worker, count(*) FROM measurements GROUP BY worker"))
        environments = conn.execute("SELECT count(*) FROM environments").fetchone()[0]
    assert len(per_worker) == 4  # the session's Ray has 4 logical GPUs: one worker each
    assert {w.split(":")[1] for w in per_worker} == {
        "gpu0",
        "gpu1",
        "gpu2",
        "gpu3",
    }  # distinct CUDA_VISIBLE_DEVICES
    assert sum(per_worker.values()) == 16
    assert environments == 1  # same host and stack: one environment


def test_sweep_py_runs_as_a_lone_file(tmp_path, tiny_spec):
    """`ray submit` copies farm/sweep.py alone to the head node: it must import the installed package."""
    lone = tmp_path / "elsewhere"
    lone.mkdir()
    shutil.copy(REPO / "farm" / "sweep.py", lone / "sweep.py")
    env = subprocess_env()
    env.pop("PYTHONPATH")  # only what is installed, as on a cluster node
    run = subprocess.run(
        [sys.executable, str(lone / "sweep.py"), "--spec", str(tiny_spec), "--dry-run"],
        cwd=lone,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert f"sweep 'tiny': {TINY_POINTS} points over 2 shapes" in run.stdout
