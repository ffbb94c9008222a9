"""Waiting for a sweep's GPU workers to come up: a worker Ray has not placed yet waits for a GPU
another job holds, and the sweep says who holds it instead of waiting in silence."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

from farm.cluster import WorkerHandle
from farm.errors import UserError

log = logging.getLogger("farm")

# Waiting for workers: a sweep whose workers Ray cannot place (another job holds the GPUs) says so
# this soon, then this often, polling Ray this often. The issue this answers: 10 silent minutes.
WAIT_FIRST_SAY_S, WAIT_SAY_EVERY_S, WAIT_POLL_S = 5.0, 30.0, 1.0
# A worker on its GPU is up in 4.3 s on an H200 host (import torch, open the GPU); this long and it
# is stuck (a hung driver, a full disk for the Triton cache).
START_TIMEOUT_S = 600.0


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
