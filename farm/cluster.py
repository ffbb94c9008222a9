"""Ray's lifecycle for a sweep: join the cluster running where the driver runs, or start a local
Ray when none is; start one GPU worker actor per GPU, and stop them.

How to init is decided by a pure function (`plan_ray_init`), in this order:
1. `--address`: that cluster, always.
2. RAY_ADDRESS: the cluster the environment names (`ray job submit` sets it for the entrypoint).
3. A Ray head already running on this node (`ray start --head`, as `ray up` does): `ray submit`
   runs `python ~/sweep.py` there with no address at all. Ray records the head's address in
   <ray temp dir>/ray_current_cluster; a stale file (the head was killed) is not a running head.
4. Otherwise a local Ray with the GPUs NVML reports (as CUDA_VISIBLE_DEVICES limits them), or
   one logical GPU per worker where there are none.
Joining never passes num_cpus/num_gpus: Ray refuses them when connecting ("When connecting to an
existing cluster, num_cpus and num_gpus must not be provided").

Kept workers (`farm sweep --keep-workers`): on a running cluster the workers can outlive the sweep
as detached, named actors, and the next sweep takes them over instead of starting its own: no
`import torch`, no CUDA context, Triton's in-memory kernels and a warm GPU (on an H200 host a new
worker is up 13 s after the command; docs/design.md, "Start-up"). Their names carry a digest of
the code they run (farm, kernels, db), the plugins and the worker options, so a sweep never runs
on a worker holding other code: those are stopped, since they hold the GPUs the new ones need.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from farm.errors import UserError
from farm.worker import GpuWorker, WorkerInfo

log = logging.getLogger("farm")

# A head that does not accept a TCP connection in this long is not there: Ray itself would retry
# for minutes (seen: "Failed to connect to GCS ... within 5 seconds", repeated past 2 minutes).
PROBE_TIMEOUT_S = 5.0
# Connecting to a Ray cluster at this address form goes through Ray Client, not the GCS port.
_SCHEMES = ("ray://", "http://", "https://")
# Restarts Ray gives each worker actor (CUDA errors poison a process: the worker exits, Ray restarts it).
MAX_RESTARTS = 20
# Batches in flight per worker: one timed while the next one compiles.
INFLIGHT_PER_WORKER = 2
# Kept workers: named actors `farm-gpu-worker-<digest>-<index>` in this Ray namespace.
KEPT_NAMESPACE = "farm"
KEPT_PREFIX = "farm-gpu-worker-"
# The packages a worker runs: a kept worker is reused only by a sweep of the same sources.
WORKER_PACKAGES = ("farm", "kernels", "db")
# Waiting for workers: a sweep whose workers Ray cannot place (another job holds the GPUs) says so
# this soon, then this often, polling Ray this often. The issue this answers: 10 silent minutes.
WAIT_FIRST_SAY_S, WAIT_SAY_EVERY_S, WAIT_POLL_S = 5.0, 30.0, 1.0
# A worker on its GPU is up in 4.3 s on an H200 host (import torch, open the GPU); this long and it
# is stuck (a hung driver, a full disk for the Triton cache).
START_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class RayInit:
    """How to init Ray: join `address`, or start a local Ray when it is None."""

    address: str | None
    source: str  # where the address came from, for messages

    @property
    def joins(self) -> bool:
        return self.address is not None


def plan_ray_init(address: str | None, env_address: str | None, local_head: str | None) -> RayInit:
    """The decision alone, from what the command line, the environment and this node say."""
    if address:
        return RayInit(address, "--address")
    if env_address:
        return RayInit(env_address, "RAY_ADDRESS")
    if local_head:
        return RayInit(local_head, "the Ray head running on this node")
    return RayInit(None, "a new local Ray")


def ray_address_file() -> Path:
    """Where `ray start` records the head's address (mirrors ray._common.utils, a private module)."""
    if "RAY_TMPDIR" in os.environ:
        temp = os.environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in os.environ:
        temp = os.environ["TMPDIR"]
    else:
        temp = "/tmp"
    return Path(temp) / "ray" / "ray_current_cluster"


def local_head(address_file: Path | None = None) -> str | None:
    """The address of a Ray head running on this node, or None (no file, or nothing listening)."""
    path = address_file or ray_address_file()
    try:
        address = path.read_text().strip()
    except OSError:
        return None
    return address if address and reachable(address) else None


def _host_port(address: str) -> tuple[str, int] | None:
    """host and port of `host:port` (any of _SCHEMES in front); None for `auto` and other forms."""
    for scheme in _SCHEMES:
        address = address.removeprefix(scheme)
    host, sep, port = address.rstrip("/").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    return host.strip("[]"), int(port)


def reachable(address: str, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """True when something accepts a TCP connection at the address (or it is not host:port)."""
    where = _host_port(address)
    if where is None:
        return True  # `auto` and the like: Ray resolves them and says what failed
    try:
        with socket.create_connection(where, timeout=timeout):
            return True
    except OSError:
        return False


def connect(ray, address: str | None, workers: int | None, *, join_only: bool = False) -> bool:
    """Init Ray as `plan_ray_init` decides; True when this process started it (and stops it).
    join_only: a running cluster or a UserError, never a new local Ray (it would die with us)."""
    if ray.is_initialized():
        return False
    plan = plan_ray_init(address, os.environ.get("RAY_ADDRESS"), local_head())
    if join_only and not plan.joins:
        raise UserError(
            "no Ray cluster is running here to keep workers on: start one with `ray start --head` "
            "(then every sweep joins it), or give --address"
        )
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    if plan.joins:
        if not reachable(plan.address):
            raise UserError(f"cannot reach the Ray cluster at {plan.address} (from {plan.source})")
        refused = auth_refusal(plan.address)
        if refused:
            raise UserError(f"cannot join the Ray cluster at {plan.address} ({plan.source}): {refused}")
        try:
            ray.init(address=plan.address, **quiet)
        except ConnectionError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            # Ray 2.60's `ray start --head` turns token authentication on; a client without
            # RAY_AUTH_MODE=token is refused ("InvalidAuthToken") and sees only "Failed to connect".
            hint = (
                ""
                if os.environ.get("RAY_AUTH_MODE")
                else "; a head with token auth needs RAY_AUTH_MODE=token"
            )
            raise UserError(
                f"cannot join the Ray cluster at {plan.address} ({plan.source}): {first}{hint}"
            ) from exc
        log.info("joined the Ray cluster at %s (%s)", plan.address, plan.source)
        return False
    gpus = visible_gpus(nvml_gpu_count(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    ray.init(num_gpus=gpus or workers or 2, include_dashboard=False, **quiet)
    return True


def expected_backend(address: str | None, backend: str) -> str | None:
    """The backend the workers will run, where it is known before Ray starts: the one asked for, or
    for `auto` on a local Ray the interpreter when this host has no GPU, CUDA when it has one; None
    when joining a cluster (its workers say once they are up)."""
    if backend != "auto":
        return backend
    if plan_ray_init(address, os.environ.get("RAY_ADDRESS"), local_head()).joins:
        return None
    gpus = visible_gpus(nvml_gpu_count(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    return "cuda" if gpus else "interpreter"


def auth_refusal(address: str) -> str | None:
    """Why the head at `address` refuses this process (token authentication), or None. One GCS
    request, 22 ms here; ray.init retries it for 20 s and prints a gcs_client warning each second
    (20 lines) before it fails. A ray:// or http address, or a Ray without this private client, is
    left to ray.init."""
    if _host_port(address) is None or address.startswith(_SCHEMES):
        return None
    try:
        from ray._raylet import GcsClient
    except ImportError:
        return None
    try:
        with _stderr_silenced():  # the C++ client's one warning line; the error below says it
            GcsClient(address=address)
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        if "InvalidAuthToken" in text or "Unauthenticated" in text or "AuthenticationError" in text:
            mode = os.environ.get("RAY_AUTH_MODE", "unset")
            return (
                f"it requires token authentication (RAY_AUTH_MODE is {mode}): set RAY_AUTH_MODE=token and "
                "give the cluster's token (~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN)"
            )
    return None


@contextlib.contextmanager
def _stderr_silenced():
    """File descriptor 2 to /dev/null for the block: C++ code writes there, past sys.stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def nvml_gpu_count() -> int:
    """GPUs the NVIDIA driver reports (0 without one). NVML, not torch: the driver imports no torch
    (2.8 s of start-up on an H200 host; docs/design.md, "Start-up")."""
    try:
        import pynvml
    except ImportError:
        return 0
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:  # no driver (a CPU machine)
        log.debug("no NVML: %s", exc)
        return 0
    try:
        return pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()


def visible_gpus(count: int, cuda_visible_devices: str | None) -> int:
    """GPUs this process may use: `count` of the node, limited by CUDA_VISIBLE_DEVICES where it is
    set. Like CUDA, the list ends at its first invalid entry: "" and "-1" hide every GPU."""
    if cuda_visible_devices is None:
        return count
    listed = 0
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-"):
            break
        listed += 1
    return min(count, listed)


@dataclass
class WorkerHandle:
    """One GPU worker actor and what the driver knows about it."""

    actor: object
    kept: bool = False  # a detached actor that outlives the sweep (not stopped by it)
    info: WorkerInfo | None = None
    env_id: int | None = None
    alive: bool = True
    recovering: object = None  # ObjectRef of the info() call that says it is back
    fault: object = None  # the farm.faults.Fault it is recovering from
    inflight: int = 0


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
                self.ray.shutdown()


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
            ray.shutdown()
        raise
    return Launched(ray, handles, started_ray)


class WaitTimeout(Exception):
    """The GPUs (or the workers on them) were not there within the time the caller allowed; the
    message is one line, for the command line to print (cli/sweep.py: exit status 75)."""


def await_workers(
    ray,
    handles: list[WorkerHandle],
    *,
    wait_s: float | None = None,
    say: Callable[[str], None] | None = None,
) -> None:
    """Each started worker's info(), once it is up. A worker Ray has not placed yet waits for a GPU
    another job holds: that is said within WAIT_FIRST_SAY_S and again every WAIT_SAY_EVERY_S (what
    the sweep asked for, what is free, who holds the rest), and `wait_s` bounds it (WaitTimeout).
    A placed worker has START_TIMEOUT_S to import torch and open its GPU."""
    say = say or _say
    refs = [w.actor.info.remote() for w in handles]
    start = time.monotonic()
    placed_at: float | None = None  # when the last unplaced worker got its GPU
    next_say = start + WAIT_FIRST_SAY_S
    while True:
        try:
            infos = ray.get(refs, timeout=WAIT_POLL_S)
            break
        except ray.exceptions.GetTimeoutError:
            pass
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, UserError):  # a worker could not start: GpuWorker.startup_error
                raise exc.cause from None
            raise
        except ray.exceptions.RayActorError as exc:
            raise UserError(f"a GPU worker died while starting: {_first_line(exc)}") from None
        now = time.monotonic()
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        up = set(ready)
        unplaced = unplaced_workers(ray, [w for w, ref in zip(handles, refs) if ref not in up])
        if unplaced:
            placed_at = None
            if wait_s is not None and now - start > wait_s:
                report = gpu_wait_report(ray, len(handles), unplaced)
                raise WaitTimeout(f"gave up after {wait_s:g} s (--wait-s): {report}")
            if now >= next_say:
                say(f"waiting for GPUs ({now - start:.0f} s): {gpu_wait_report(ray, len(handles), unplaced)}")
                next_say = now + WAIT_SAY_EVERY_S
        else:
            placed_at = placed_at or now
            if now - placed_at > START_TIMEOUT_S:
                raise WaitTimeout(
                    f"{len(refs) - len(up)} GPU worker(s) placed but not up after {START_TIMEOUT_S:.0f} s "
                    "(importing torch and opening a GPU takes 4.3 s on an H200 host): see the Ray logs"
                )
    for w, info in zip(handles, infos):
        w.info = info
    log.info("workers: %s", ", ".join(f"{i.worker} ({i.environment.gpu_name})" for i in infos))


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _actor_table(ray) -> dict[str, dict] | None:
    """Ray's actor table from the GCS, by actor id (hex); None where this Ray cannot say. The public
    state API (ray.util.state) needs the dashboard's server, which a local Ray here starts without;
    the GCS table answers in about 1 ms either way."""
    try:
        return ray._private.state.actors()
    except Exception as exc:  # a private API: a Ray that moved it only loses the detail
        log.debug("no actor table: %s", exc)
        return None


def unplaced_workers(ray, handles: list[WorkerHandle]) -> list[WorkerHandle]:
    """The workers Ray has not placed on a GPU yet (PENDING_CREATION). Without an actor table,
    every worker not up counts as waiting."""
    table = _actor_table(ray)
    if table is None:
        return list(handles)
    out = []
    for w in handles:
        entry = table.get(w.actor._actor_id.hex(), {})
        if entry.get("State", "PENDING_CREATION") in ("PENDING_CREATION", "DEPENDENCIES_UNREADY"):
            out.append(w)
    return out


def gpu_wait_report(ray, asked: int, unplaced: list[WorkerHandle]) -> str:
    """One line: what the sweep asked for, what the cluster has free, and who holds the GPUs."""
    total = ray.cluster_resources().get("GPU", 0)
    free = ray.available_resources().get("GPU", 0)
    line = (
        f"asked for {asked} GPU(s), one per worker, {len(unplaced)} still unplaced; "
        f"the cluster has {free:g} of {total:g} GPU(s) free"
    )
    holders = gpu_holders(ray)
    return line + (f"; held by {'; '.join(holders)}" if holders else "")


def gpu_holders(ray) -> list[str]:
    """Who holds GPUs, as far as Ray can tell: the live actors of other jobs (with the resources each
    asked for where Ray's state API runs, with its dashboard), and those jobs' drivers. A task holding
    a GPU shows as its job."""
    me = ray.get_runtime_context().get_job_id()
    try:
        jobs = {j["JobID"]: j for j in ray._private.state.jobs() if not j.get("IsDead") and j["JobID"] != me}
    except Exception as exc:
        log.debug("no job table: %s", exc)
        jobs = {}
    gpus = _actor_gpus(ray)
    out = []
    for actor_id, a in (_actor_table(ray) or {}).items():
        if a.get("State") != "ALIVE" or a.get("JobID") == me:
            continue
        if gpus is not None and not gpus.get(actor_id):
            continue  # the state API says it holds no GPU
        where = (a.get("Address") or {}).get("IPAddress", "")
        name = f" {a['Name']!r}" if a.get("Name") else ""
        held = f", {gpus[actor_id]:g} GPU" if gpus else ""
        pid = f"pid {a.get('Pid')} on {where}"
        out.append(f"actor {a.get('ActorClassName', '?')}{name} (job {a.get('JobID')}, {pid}{held})")
    for job_id, j in jobs.items():
        entry = " ".join(str(j.get("Entrypoint", "")).split())
        entry = entry if len(entry) <= 80 else entry[:77] + "..."
        out.append(f"job {job_id} (driver pid {j.get('DriverPid')} on {j.get('DriverIPAddress')}: {entry})")
    return out[:8]


def _actor_gpus(ray) -> dict[str, float] | None:
    """GPUs each live actor asked for, by actor id, from Ray's state API; None without its server."""
    try:
        from ray.util.state import list_actors

        actors = list_actors(
            filters=[("state", "=", "ALIVE")], detail=True, timeout=2, raise_on_missing_output=False
        )
    except Exception as exc:  # no dashboard: the state API's server is not running
        log.debug("no state API: %s", exc)
        return None
    return {a.actor_id: float((a.required_resources or {}).get("GPU", 0)) for a in actors}


def stop_workers(ray, handles: list[WorkerHandle]) -> None:
    """Stop the sweep's own workers; kept ones stay for the next sweep."""
    for w in handles:
        if not w.kept:
            ray.kill(w.actor, no_restart=True)
