"""How a sweep finds its Ray: --address, RAY_ADDRESS, a head running on this node, else a local one;
and an address that cannot be reached is one error line and exit status 2."""

import json
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from farmkit import REPO, farm_command, subprocess_env

from farm import ray_connect
from farm.errors import UserError
from farm.ray_connect import RayInit, _host_port, local_head, plan_ray_init, reachable, visible_gpus


@pytest.mark.parametrize(
    ("address", "env", "head", "expected"),
    [
        pytest.param(None, None, None, RayInit(None, "a new local Ray"), id="nothing-running-start-local"),
        pytest.param(
            None,
            None,
            "10.0.0.5:6379",
            RayInit("10.0.0.5:6379", "the Ray head running on this node"),
            id="ray-submit-joins-the-local-head",
        ),
        pytest.param(
            None,
            "10.0.0.7:6379",
            "10.0.0.5:6379",
            RayInit("10.0.0.7:6379", "RAY_ADDRESS"),
            id="ray-address-over-local-head",
        ),
        pytest.param(
            "auto", "10.0.0.7:6379", "10.0.0.5:6379", RayInit("auto", "--address"), id="flag-overrides-all"
        ),
        pytest.param(None, "", None, RayInit(None, "a new local Ray"), id="empty-ray-address-ignored"),
    ],
)
def test_plan_ray_init(address, env, head, expected: RayInit) -> None:
    plan = plan_ray_init(address, env, head)
    assert plan == expected and plan.joins == (expected.address is not None)


@pytest.fixture
def listening():
    """host:port of a socket that accepts connections, as a running head's GCS does."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: nothing listens there


def test_local_head_is_the_recorded_address_when_something_listens(tmp_path: Path, listening: str) -> None:
    record = tmp_path / "ray_current_cluster"
    assert local_head(record) is None  # no `ray start` on this node
    record.write_text(listening + "\n")
    assert local_head(record) == listening


def test_a_stale_address_file_is_no_head(tmp_path: Path, closed_port: int) -> None:
    record = tmp_path / "ray_current_cluster"
    record.write_text(f"127.0.0.1:{closed_port}")  # the head was killed; its file stayed
    assert local_head(record) is None


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        pytest.param("10.0.0.5:6379", ("10.0.0.5", 6379), id="gcs"),
        pytest.param("ray://head.example:10001", ("head.example", 10001), id="ray-client"),
        pytest.param("http://127.0.0.1:8265/", ("127.0.0.1", 8265), id="dashboard-url"),
        pytest.param("[::1]:6379", ("::1", 6379), id="ipv6"),
        pytest.param("auto", None, id="auto"),
        pytest.param("head:port", None, id="no-port-number"),
    ],
)
def test_host_port(address: str, expected) -> None:
    assert _host_port(address) == expected


def test_reachable(listening: str, closed_port: int) -> None:
    assert reachable(listening) and reachable("auto")  # auto: Ray resolves it and reports failure
    assert not reachable(f"127.0.0.1:{closed_port}", timeout=2)


@pytest.mark.parametrize("how", ["--address", "RAY_ADDRESS"])
def test_unreachable_address_is_one_line_and_exit_2(tmp_path: Path, tiny_spec: Path, closed_port: int, how):
    address = f"127.0.0.1:{closed_port}"
    db = tmp_path / "results.db"
    env = subprocess_env()
    env.pop("RAY_ADDRESS", None)
    args = ["sweep", "--spec", str(tiny_spec), "--db", str(db), "--no-progress"]
    if how == "--address":
        args += ["--address", address]
    else:
        env["RAY_ADDRESS"] = address
    run = subprocess.run(farm_command(*args), cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert run.stderr == f"error: cannot reach the Ray cluster at {address} (from {how})\n"
    assert not db.exists()  # nothing written


@pytest.mark.parametrize(
    ("count", "cuda_visible_devices", "expected"),
    [
        pytest.param(8, None, 8, id="unset-every-gpu"),
        pytest.param(8, "0,3,5", 3, id="listed"),
        pytest.param(2, "0,1,2,3", 2, id="more-listed-than-present"),
        pytest.param(8, "", 0, id="empty-hides-all"),
        pytest.param(8, "-1", 0, id="minus-one-hides-all"),
        pytest.param(8, "1,-1,2", 1, id="ends-at-the-first-invalid"),
        pytest.param(4, "GPU-8f2b1c3e,GPU-0a9d", 2, id="uuids"),
        pytest.param(0, "0", 0, id="no-gpu-on-the-node"),
    ],
)
def test_visible_gpus(count: int, cuda_visible_devices: str | None, expected: int) -> None:
    assert visible_gpus(count, cuda_visible_devices) == expected


def _run_local_ray(probe: str) -> subprocess.CompletedProcess:
    """`probe` in a fresh Python that starts a local Ray in a Ray temp dir of its own, so no head of
    this node's is joined; short, for Ray's socket paths (107 bytes at most), which a pytest tmp_path
    outgrows."""
    with tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as ray_tmp:
        env = subprocess_env() | {"RAY_TMPDIR": ray_tmp}
        env.pop("RAY_ADDRESS", None)
        env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        return subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300
        )


# One local Ray for the two probes below (a start and a stop: 7 s): the SIGTERM handler is the sweep's
# own from the start, the loopback check runs while Ray is up, then the SIGTERMs during and after its
# shutdown.
LOCAL_RAY_PROBE = """
import json, os, signal, time
import ray, ray._private.utils, ray._private.worker
from farm import ray_connect
heard = []
signal.signal(signal.SIGTERM, lambda signum, frame: heard.append(signum))
ray._private.utils.set_sigterm_handler = lambda handler: None  # as the sweep's StopSignals keeps its own
started = ray_connect.connect(ray, None, 2)

# the loopback check: what binds the GCS's port
host, port = ray.get_runtime_context().gcs_address.rsplit(":", 1)
binds = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    if not os.path.exists(table):
        continue
    for line in open(table).read().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        if state == "0A" and int(local.rsplit(":", 1)[1], 16) == int(port):
            binds.add(local.rsplit(":", 1)[0])
switch = os.environ.get(ray_connect.SINGLE_MACHINE_ENV)
print(json.dumps({"started": started, "host": host, "binds": sorted(binds), "switch": switch}))

# a SIGTERM during ray.shutdown, and one after
node = ray._private.worker._global_node
stop_processes = node.kill_all_processes
during = []
def signalled_stop(*args, **kwargs):
    # ray.shutdown's last step: the driver's core worker is shut down (Ray's C++ logger had set SIGTERM
    # to SIG_DFL there) and Ray's processes are being stopped
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.5)  # a signal is handled at the next bytecode; the sleep lets a default action land first
    stop_processes(*args, **kwargs)
    during.append(len(heard))
node.kill_all_processes = signalled_stop
ray_connect.shutdown(ray)
print(during, heard)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.5)
print(heard)
"""
# 127.0.0.1 as /proc/net/tcp writes it, and as tcp6 writes its IPv4-mapped form
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}


@pytest.fixture(scope="module")
def local_ray_probe() -> subprocess.CompletedProcess:
    return _run_local_ray(LOCAL_RAY_PROBE)


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's socket tables")
def test_a_local_ray_listens_on_loopback_only(local_ray_probe) -> None:
    """The local Ray a sweep starts binds 127.0.0.1, not every interface (Ray's default on Linux: its
    GCS on `::`): the GCS address is loopback and its port is bound to 127.0.0.1 alone; the switch
    is put back once Ray is up."""
    out = local_ray_probe
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("{")))
    assert seen["started"] and seen["host"] == "127.0.0.1" and seen["switch"] is None
    assert seen["binds"] and set(seen["binds"]) <= LOOPBACK, seen


def test_a_sigterm_during_or_after_ray_shutdown_reaches_the_handler_once_ray_is_down(local_ray_probe) -> None:
    """Ray's shutdown had set SIGTERM to SIG_DFL (its C++ logger uninstalling its failure handlers)
    while Python's table still named the handler: a SIGTERM while Ray stopped its processes (1.1 s
    here), or after, killed the sweep with -15 and no word. Now the driver runs without those C++
    handlers, and `ray_connect.shutdown` holds the signal until Ray is down: the handler hears it
    then, once, and a later one as well."""
    out = local_ray_probe
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.strip().splitlines()[-2:] == ["[0] [15]", "[15, 15]"]


class _RayThatDoesNotStart:
    """ray.init as Ray 2.60 fails when its raylet dies as it starts (30 s later, a bare Exception)."""

    def is_initialized(self):
        return False

    def init(self, **kwargs):
        raise Exception(
            "The current node timed out during startup. This could happen because some of the raylet "
            "failed to startup or the GCS has become overloaded."
        )


def test_a_local_ray_that_does_not_start_is_one_line_naming_its_logs(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # no head recorded there: a local Ray is started
    with pytest.raises(UserError) as raised:
        ray_connect.connect(_RayThatDoesNotStart(), None, 2)
    assert str(raised.value) == (
        "a local Ray did not start: The current node timed out during startup. This could happen because "
        "some of the raylet failed to startup or the GCS has become overloaded. "
        f"(Ray's logs: {tmp_path}/ray/session_latest/logs)"
    )
