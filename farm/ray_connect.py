"""Joining the Ray cluster a sweep runs on, or starting a local Ray when none is.

How to init is decided by a pure function (`plan_ray_init`), in this order:
1. `--address`: that cluster, always.
2. RAY_ADDRESS: the cluster the environment names (`ray job submit` sets it for the entrypoint).
3. A Ray head already running on this node (`ray start --head`, as `ray up` does): `ray submit`
   runs `python ~/sweep.py` there with no address at all. Ray records the head's address in
   <ray temp dir>/ray_current_cluster; a stale file (the head was killed) is not a running head.
4. Otherwise a local Ray with the GPUs NVML reports (as CUDA_VISIBLE_DEVICES limits them), or
   one logical GPU per worker where there are none; it listens on 127.0.0.1 only (`_loopback_only`).
Joining never passes num_cpus/num_gpus: Ray refuses them when connecting ("When connecting to an
existing cluster, num_cpus and num_gpus must not be provided").
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from farm.errors import UserError

log = logging.getLogger("farm")

# A head that does not accept a TCP connection in this long is not there: Ray itself would retry
# for minutes (seen: "Failed to connect to GCS ... within 5 seconds", repeated past 2 minutes).
PROBE_TIMEOUT_S = 5.0
# Connecting to a Ray cluster at this address form goes through Ray Client, not the GCS port.
_SCHEMES = ("ray://", "http://", "https://")
# Ray's switch between its cluster mode (Linux's default: the node's address is its network address,
# and the GCS, the raylet and the agents listen on every interface) and its single-machine mode
# (macOS's and Windows' default: the node is 127.0.0.1, and every listener binds it). Ray 2.60 on
# Linux, a local Ray: 7 listeners on 0.0.0.0 or ::, GCS included; with this at 0, all on 127.0.0.1.
SINGLE_MACHINE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


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
            with _driver_keeps_its_signals(ray):
                ray.init(address=plan.address, **quiet)
        except ConnectionError as exc:
            first = _first_line(exc)
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
    try:
        with _loopback_only(ray), _driver_keeps_its_signals(ray):
            ray.init(num_gpus=gpus or workers or 2, include_dashboard=False, **quiet)
    except Exception as exc:
        # e.g. a raylet that dies as it starts: Ray waits 30 s for it, then raises a bare Exception
        # ("The current node timed out during startup"), which printed as a 20-line traceback.
        first = _first_line(exc)
        logs = ray_address_file().parent / "session_latest" / "logs"
        raise UserError(f"a local Ray did not start: {first} (Ray's logs: {logs})") from exc
    return True


def _first_line(exc: BaseException) -> str:
    """What an error from ray.init says first (Ray's run to 20 lines), or its type when it says nothing."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def shutdown(ray) -> None:
    """ray.shutdown with Ctrl-C and SIGTERM held: a signal while Ray stops is acted on once it has
    stopped (re-raised to this process's handler), not half-way. ray.shutdown interrupted between
    its steps leaves Ray's processes to its exit hook or to nobody: the stop that ray.init gets
    (`StopSignals.deferred` in cli/sweep.py), for the same reason."""
    with _signals_held():
        ray.shutdown()


@contextlib.contextmanager
def _signals_held():
    """SIGINT and SIGTERM noted inside, each raised again once afterwards to the handler there was
    before (the main thread alone sets handlers; elsewhere nothing is held)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: noted.append(signum)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        for sig in dict.fromkeys(noted):
            signal.raise_signal(sig)


def _driver_keeps_its_signals(ray):
    """ray.init without Ray's C++ failure-signal handler in this process (the driver; Ray's own
    processes keep theirs). That handler chains to Python's, but Ray's shutdown uninstalls it by
    setting SIGTERM to SIG_DFL behind Python's back: from then until the sweep's handler was set
    again, a SIGTERM killed the command with status 143 and no word (measured with Ray 2.60: a
    1.1 s window while ray.shutdown stops Ray's processes). Read once,
    when ray.init makes the driver's core worker; put back after for Ray's other users."""
    return _ray_constant(ray, "RAY_DISABLE_FAILURE_SIGNAL_HANDLER", True)


@contextlib.contextmanager
def _ray_constant(ray, name: str, value):
    """ray._private.ray_constants.<name> set to `value` inside, put back after (nothing where this
    Ray has no such constant)."""
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    saved = getattr(constants, name, None)
    if saved is not None:
        setattr(constants, name, value)
    try:
        yield
    finally:
        if saved is not None:
            setattr(constants, name, saved)


@contextlib.contextmanager
def _loopback_only(ray):
    """A local Ray started inside listens on 127.0.0.1 alone, not on every interface: no other host
    may reach a sweep's workers (who reaches the GCS may run code on them). Ray's processes take the
    switch from the environment they start with; this process reads it where Ray imported it, so
    both are set for the start, and put back after, for a later join of a real cluster."""
    saved_env = os.environ.get(SINGLE_MACHINE_ENV)
    os.environ[SINGLE_MACHINE_ENV] = "0"
    try:
        with _ray_constant(ray, "ENABLE_RAY_CLUSTER", False):
            yield
    finally:
        if saved_env is None:
            os.environ.pop(SINGLE_MACHINE_ENV, None)
        else:
            os.environ[SINGLE_MACHINE_ENV] = saved_env


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
