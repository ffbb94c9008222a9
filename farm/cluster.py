"""A sweep's GPU workers on Ray: one worker actor per GPU, started, kept or taken over, and stopped.
`launch` joins or starts Ray (farm.ray_connect) and starts them; farm.gpu_wait waits until they are up.

Kept workers (`farm sweep --keep-workers`): on a running cluster the workers can outlive the sweep
as detached, named actors, and the next sweep takes them over instead of starting its own: no
`import torch`, no CUDA context, Triton's in-memory kernels and a warm GPU (on an H200 host a new
worker is up 13 s after the command; docs/design.md, "Start-up"). Their names carry a digest of
the code they run (farm, kernels, db), the plugins and the worker options, so a sweep never runs
on a worker holding other code: those are stopped, since they hold the GPUs the new ones need.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from farm.errors import UserError
from farm.ray_connect import connect, shutdown
from farm.worker import GpuWorker, WorkerInfo

log = logging.getLogger("farm")

# Restarts Ray gives each worker actor (CUDA errors poison a process: the worker exits, Ray restarts it).
MAX_RESTARTS = 20
# Batches in flight per worker: one timed while the next one compiles.
INFLIGHT_PER_WORKER = 2
# Kept workers: named actors `farm-gpu-worker-<digest>-<index>` in this Ray namespace.
KEPT_NAMESPACE = "farm"
KEPT_PREFIX = "farm-gpu-worker-"
# The packages a worker runs: a kept worker is reused only by a sweep of the same sources.
WORKER_PACKAGES = ("farm", "kernels", "db")


@dataclass
class WorkerHandle:
    """One GPU worker actor and what the driver knows about it."""

    actor: object
    kept: bool = False  # a detached actor that outlives the sweep (not stopped by it)
    info: WorkerInfo | None = None
    env_id: int | None = None
    alive: bool = True
    # the ray.ObjectRef of a restarted worker's info() call, which answers once it is back; None
    # while the worker is not recovering
    info_call: object | None = None
    fault: object = None  # the farm.faults.Fault it is recovering from
    inflight: int = 0

    @property
    def recovering(self) -> bool:
        """Restarted after a fault, and not heard back from yet."""
        return self.info_call is not None


def start_workers(
    ray,
    plugin_sources: list,
    *,
    backend: str,
    compile_threads: int,
    workers: int | None,
    max_restarts: int,
    inflight_per_worker: int,
    keep: bool = False,
) -> list[WorkerHandle]:
    """One actor per GPU of the cluster (at most `workers`), started; `await_workers` waits for them.
    Starting is quick; each actor then imports torch and opens its GPU (seconds), which the driver
    overlaps with opening the database. Kept workers of this code on the cluster are taken over
    (and new ones kept) when `keep` is set or when there are any: they hold the GPUs."""
    gpus = int(ray.cluster_resources().get("GPU", 0))
    count = min(gpus, workers) if workers else gpus
    if count < 1:
        raise UserError("the Ray cluster has no GPUs; on a machine without one, run locally (no --address)")
    actor_class = ray.remote(GpuWorker)
    options = {
        "num_gpus": 1,
        "num_cpus": 0,
        "max_restarts": max_restarts,
        "max_task_retries": 0,
        "max_concurrency": inflight_per_worker,
    }
    args = (plugin_sources, backend, compile_threads)
    prefix = f"{KEPT_PREFIX}{worker_digest(*args)}-"
    ours = stop_kept_workers(ray, keep_prefix=prefix)
    if not keep and not ours:
        return [WorkerHandle(actor_class.options(**options).remote(*args)) for _ in range(count)]
    options |= {"namespace": KEPT_NAMESPACE, "lifetime": "detached", "get_if_exists": True}
    return [
        WorkerHandle(actor_class.options(name=f"{prefix}{i}", **options).remote(*args), kept=True)
        for i in range(count)
    ]


def worker_digest(plugin_sources: list, backend: str, compile_threads: int) -> str:
    """What a worker runs, hashed: the sources of WORKER_PACKAGES, the plugins and the options
    (about 5 ms for the 60 files)."""
    digest = hashlib.sha256(repr((plugin_sources, backend, compile_threads)).encode())
    root = Path(__file__).resolve().parents[1]
    for package in WORKER_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def kept_worker_names(ray) -> list[str]:
    """The kept worker actors alive on the cluster, by name."""
    return sorted(
        actor["name"]
        for actor in ray.util.list_named_actors(all_namespaces=True)
        if actor["namespace"] == KEPT_NAMESPACE and actor["name"].startswith(KEPT_PREFIX)
    )


def stop_kept_workers(ray, keep_prefix: str | None = None) -> list[str]:
    """Stop the kept workers whose names do not start with `keep_prefix` (all, when None); the
    names of those left running."""
    left = []
    for name in kept_worker_names(ray):
        if keep_prefix is not None and name.startswith(keep_prefix):
            left.append(name)
            continue
        try:
            ray.kill(ray.get_actor(name, namespace=KEPT_NAMESPACE), no_restart=True)
        except ValueError:  # it died between the listing and now
            continue
        log.warning("stopped kept worker %s%s", name, " (other code or options)" if keep_prefix else "")
    return left


@dataclass
class Launched:
    """Ray joined or started, and the GPU worker actors created on it (they may still be starting)."""

    ray: object  # the ray module
    workers: list[WorkerHandle]
    started_ray: bool  # this process started Ray, and shuts it down

    def stop(self) -> None:
        try:
            stop_workers(self.ray, self.workers)
        finally:
            if self.started_ray:
                shutdown(self.ray)


def launch(
    address: str | None,
    workers: int | None,
    plugin_sources: list,
    *,
    backend: str = "auto",
    compile_threads: int = 8,
    max_restarts: int = MAX_RESTARTS,
    inflight_per_worker: int = INFLIGHT_PER_WORKER,
    keep_workers: bool = False,
) -> Launched:
    """Join or start Ray and create the workers (or take over kept ones); returns at once while they
    import torch and open their GPUs (4.3 s on an H200 host, 3.3 s of it `import torch`), which the driver
    overlaps with its own set-up. Call it before importing the database modules: they take 1-1.5 s
    the workers can hide. keep_workers: the workers outlive the sweep (a running cluster only)."""
    import ray

    started_ray = connect(ray, address, workers, join_only=keep_workers)
    try:
        handles = start_workers(
            ray,
            plugin_sources,
            backend=backend,
            compile_threads=compile_threads,
            workers=workers,
            max_restarts=max_restarts,
            inflight_per_worker=inflight_per_worker,
            keep=keep_workers,
        )
    except BaseException:
        if started_ray:
            shutdown(ray)
        raise
    return Launched(ray, handles, started_ray)


def stop_workers(ray, handles: list[WorkerHandle]) -> None:
    """Stop the sweep's own workers; kept ones stay for the next sweep."""
    for w in handles:
        if not w.kept:
            ray.kill(w.actor, no_restart=True)
