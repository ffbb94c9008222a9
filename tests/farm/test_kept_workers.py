"""Kept workers (`farm sweep --keep-workers`): the GPU workers outlive a sweep on a running cluster
and the next sweep of the same code takes them over, process and all; other code replaces them."""

import sqlite3
import subprocess

import pytest
from farmkit import REPO, farm_command, subprocess_env, write_spec

from farm import cluster, ray_connect
from farm.driver import Driver, SweepOptions
from farm.errors import UserError
from farm.spec import load_spec

# One shape, two points: each sweep is a few seconds of interpreter work.
SPEC = """\
name: kept
dtypes: [float16]
variants: [tiled]
shapes: [{m: 16, n: 32, k: 16}]
configs: {block_m: [16], block_n: [16, 32], block_k: [16], num_warps: [4], num_stages: [2]}
timing: {min_reps: 2, max_reps: 2}
"""


def _sweep(tmp_path, name: str, **options):
    spec = load_spec(path=str(write_spec(tmp_path, SPEC)))
    db = tmp_path / f"{name}.db"
    result = Driver(spec, SweepOptions(db=str(db), progress=False, workers=2, **options), "t").run()
    with sqlite3.connect(db) as conn:
        workers = {w for (w,) in conn.execute("SELECT DISTINCT worker FROM measurements")}
    return result, workers


def _pids(ray) -> dict[str, int]:
    return {
        name: ray.get(ray.get_actor(name, namespace=cluster.KEPT_NAMESPACE).info.remote()).pid
        for name in cluster.kept_worker_names(ray)
    }


def test_kept_workers_serve_the_next_sweep_and_other_code_replaces_them(ray_cluster, tmp_path):
    ray = ray_cluster
    assert cluster.kept_worker_names(ray) == []

    first, workers_1 = _sweep(tmp_path, "first", keep_workers=True)
    assert first.status == "finished" and first.measured == 2
    kept = _pids(ray)
    assert len(kept) == 2 and all(name.startswith(cluster.KEPT_PREFIX) for name in kept)

    # Without the flag too: the kept workers hold the GPUs, so a sweep of the same code uses them.
    second, workers_2 = _sweep(tmp_path, "second")
    assert second.status == "finished" and second.measured == 2
    assert _pids(ray) == kept  # the same processes: nothing started again
    assert workers_2 <= workers_1

    # Other worker options (or code, or plugins): the kept workers are stopped, the sweep's own
    # workers do the work and go with it, and nothing stays behind.
    third, _ = _sweep(tmp_path, "third", compile_threads=3)
    assert third.status == "finished" and third.measured == 2
    assert cluster.kept_worker_names(ray) == []


def test_the_digest_follows_the_worker_options_and_plugins():
    base = cluster.worker_digest([], "auto", 8)
    assert base == cluster.worker_digest([], "auto", 8)
    assert len({base, cluster.worker_digest([], "auto", 4), cluster.worker_digest([], "cuda", 8)}) == 3
    assert base != cluster.worker_digest(["a plugin"], "auto", 8)


class _NoRay:
    """A Ray that is not initialized and must not be started."""

    def is_initialized(self):
        return False

    def init(self, **kwargs):
        raise AssertionError(f"ray.init{kwargs} called: keeping workers must not start a local Ray")


def test_keeping_workers_without_a_running_cluster_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray_connect, "local_head", lambda: None)
    with pytest.raises(UserError, match="ray start --head"):
        ray_connect.connect(_NoRay(), None, None, join_only=True)


def test_farm_workers_without_a_running_cluster_is_one_line_and_exit_2(tmp_path):
    env = {**subprocess_env(), "RAY_TMPDIR": str(tmp_path)}  # no head recorded there
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(farm_command("workers"), env=env, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: no Ray cluster is running here to keep workers on: start one with `ray start --head` "
        "(then every sweep joins it), or give --address"
    ]
