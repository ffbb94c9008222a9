"""A sweep on a cluster whose GPUs another job holds: it says within 10 s what it waits for and who
holds the GPUs, and `--wait-s` ends the wait with one line and exit status 75 (cli.sweep.EXIT_NO_GPUS).
Before, it printed nothing for 10 minutes, then a GetTimeoutError traceback and exit 1."""

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from farmkit import REPO, farm_command, subprocess_env, write_spec

from cli.sweep import EXIT_NO_GPUS

# Another job: a local Ray with one logical GPU, and an actor of its own holding it.
HOLDER = textwrap.dedent(
    """
    import sys, ray
    ray.init(num_cpus=1, num_gpus=1, include_dashboard=False, log_to_driver=False)

    @ray.remote(num_gpus=1, num_cpus=0)
    class GpuHog:
        def ping(self):
            return 1

    hog = GpuHog.options(name="someone-elses-training").remote()
    ray.get(hog.ping.remote())
    print(ray.get_runtime_context().gcs_address, flush=True)
    sys.stdin.read()  # hold the GPU until the test closes stdin
    """
)


@pytest.fixture
def held_gpu_head():
    env = {**subprocess_env(), "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        address = proc.stdout.readline().strip()
        assert address, "the holder's Ray did not start"
        yield address, env
    finally:
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


@pytest.mark.slow
def test_a_sweep_waiting_for_held_gpus_says_so_and_gives_up_at_wait_s(held_gpu_head, tmp_path) -> None:
    address, env = held_gpu_head
    spec = write_spec(tmp_path)
    db = tmp_path / "r.db"
    cmd = farm_command("sweep", "--spec", str(spec), "--db", str(db), "--address", address, "--wait-s", "12")
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(
        target=lambda: lines.extend((time.monotonic() - start, line.rstrip()) for line in proc.stderr)
    )
    reader.start()
    try:
        code = proc.wait(90)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(10)
    waiting = [(t, line) for t, line in lines if line.startswith("waiting for GPUs")]
    said = "\n".join(line for _, line in lines)
    assert waiting, said
    first_s, first = waiting[0]
    assert lines[-1][0] - first_s >= 6, said  # said early in the 12 s wait, however long start-up took
    assert "asked for 1 GPU(s), one per worker, 1 still unplaced; the cluster has 0 of 1 GPU(s) free" in first
    assert "actor GpuHog 'someone-elses-training'" in first and "job " in first
    assert code == EXIT_NO_GPUS, said
    assert lines[-1][1].startswith("error: gave up after 12 s (--wait-s): asked for 1 GPU(s)"), said
    assert "Traceback" not in said
