"""Ray's cluster launcher for real: `ray up`, `ray submit farm/sweep.py`, `ray down` against a
one-machine cluster reached over SSH, as DESIGN "Where it runs" describes.

An sshd of the test's own listens on 127.0.0.1 (a free port, its own host key and
AuthorizedKeysFile in a temp dir: root's ~/.ssh is not touched). Its sessions get a HOME of their
own (sshd's SetEnv), whose .bashrc puts this Python first on PATH, as a cluster's setup_commands
do, and PYTHONPATH points at this checkout (the "installed package"). `ray submit` copies
farm/sweep.py alone to that HOME and runs `python ~/sweep.py` in a login shell, with no
--address: the script must find the cluster running where it runs.

`ray stop` (which `ray down` runs on the head) stops every Ray of the user on the machine; a
`ray` wrapper on the session's PATH narrows it to this cluster's processes, so other Ray
instances on a shared machine survive the test. The clean-up stops sshd and whatever is left of
this cluster by process id, on failure too.
"""

import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from farmkit import REPO, TWO_BATCH_POINTS, TWO_BATCH_SPEC, write_spec

from tools.ports import free_port

pytestmark = pytest.mark.slow

SSHD = Path("/usr/sbin/sshd")
RAY = Path(sys.executable).with_name("ray")
STEP_TIMEOUT_S = 240

# ssh's ProxyCommand: Ray's cluster config has no SSH port, so ssh reaches sshd's free port through this.
RELAY = """\
import socket, sys, threading
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])))
def upstream():
    while data := sys.stdin.buffer.read1(65536):
        conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)
threading.Thread(target=upstream, daemon=True).start()
while data := conn.recv(65536):
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
"""

# Stops the processes of this cluster only: those whose command line names its Ray temp dir.
RAY_WRAPPER = """\
#!/bin/sh
if [ "$1" = stop ]; then exec {python} {stop_script}; fi
exec {ray} "$@"
"""
STOP_SCRIPT = """\
import os, signal, sys, time
mark, me = {mark!r}, os.getpid()
def ours():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{{pid}}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if mark in cmdline and int(pid) not in (me, os.getppid()) and "pytest" not in cmdline:
            yield int(pid)
for sig in (signal.SIGTERM, signal.SIGKILL):
    for pid in ours():
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    deadline = time.monotonic() + 2  # until they are gone, 2 s at most: a fixed 2 s was 4 s a call
    while time.monotonic() < deadline and any(True for _ in ours()):
        time.sleep(0.1)
"""


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(RAY), *args], cwd=cwd, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
    assert done.returncode == 0, (
        f"ray {' '.join(args)} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return done


@pytest.fixture
def ssh_node(monkeypatch):
    """An sshd on 127.0.0.1 for root with a throwaway key; yields (cluster file, temp root)."""
    if os.geteuid() != 0 or not SSHD.exists() or not shutil.which("rsync"):
        pytest.skip(
            "needs root, /usr/sbin/sshd and rsync (scripts/system-deps.sh installs openssh-server, rsync)"
        )
    root = Path(
        tempfile.mkdtemp(prefix="farm-l-", dir="/tmp")
    )  # short: Ray's socket paths stay under 108 bytes
    # The ray client's files in root too, removed with it: the local provider's cluster-<name>.state
    # and .lock, and the config cache ray-config-<sha256>, one of each a run (53 runs' worth had
    # gathered under /tmp on this VM).
    monkeypatch.setenv("TMPDIR", str(root))
    home, bin_dir = root / "home", root / "home" / "bin"
    bin_dir.mkdir(parents=True)
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / key)], check=True)
    (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
    (root / "relay.py").write_text(RELAY)
    (root / "stop_cluster.py").write_text(STOP_SCRIPT.format(mark=f"{root}/ray/"))
    (bin_dir / "ray").write_text(
        RAY_WRAPPER.format(python=sys.executable, stop_script=root / "stop_cluster.py", ray=RAY)
    )
    (bin_dir / "ray").chmod(0o755)
    # This Python first on PATH, as the example cluster.yaml's setup_commands arrange.
    (home / ".bashrc").write_text(f"export PATH={bin_dir}:{Path(sys.executable).parent}:$PATH\n")
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(32))  # token auth stays on, as on a cluster
    port = free_port()
    (root / "sshd_config").write_text(
        textwrap.dedent(f"""\
        Port {port}
        ListenAddress 127.0.0.1
        HostKey {root}/host_key
        PidFile {root}/sshd.pid
        AuthorizedKeysFile {root}/authorized_keys
        PermitRootLogin prohibit-password
        PasswordAuthentication no
        KbdInteractiveAuthentication no
        UsePAM no
        StrictModes no
        SetEnv HOME={home} PYTHONPATH={REPO} RAY_AUTH_MODE=token RAY_TMPDIR={root}
        """)
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
    sshd = subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(root / "sshd_config")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    name = f"farm-launcher-{secrets.token_hex(4)}"
    cluster = root / "cluster.yaml"
    cluster.write_text(
        textwrap.dedent(f"""\
        cluster_name: {name}
        provider: {{type: local, head_ip: 127.0.0.1, worker_ips: []}}
        auth:
          ssh_user: root
          ssh_private_key: {root}/client_key
          ssh_proxy_command: {sys.executable} {root}/relay.py 127.0.0.1 {port}
        min_workers: 0
        max_workers: 0
        setup_commands: []
        head_setup_commands: []
        worker_setup_commands: []
        head_start_ray_commands:
          - ray start --head --port={free_port()} --num-cpus=2 --num-gpus=2 --include-dashboard=false
            --disable-usage-stats
        worker_start_ray_commands: []
        """)
    )
    try:
        yield cluster, root
    finally:
        subprocess.run([str(RAY), "down", "--yes", str(cluster)], capture_output=True, timeout=STEP_TIMEOUT_S)
        subprocess.run([sys.executable, str(root / "stop_cluster.py")], timeout=60)  # whatever ray down left
        sshd.terminate()
        sshd.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def test_ray_up_submit_down_runs_a_sweep(ssh_node):
    cluster, root = ssh_node
    db = root / "results.db"
    # Two batches of 2 points, one for each of the head's 2 GPUs: the launcher's steps are the test.
    # The smoke preset's 127 interpreted points ran past 4 minutes on a loaded 2-core machine, the
    # tiny spec's 27 took 17 s more than these 4 (submit 28 s, now 11 s).
    spec = write_spec(root, TWO_BATCH_SPEC)
    start = time.monotonic()
    _run("up", "--yes", "--no-config-cache", str(cluster))
    up_s = time.monotonic() - start
    submitted = _run(
        "submit",
        str(cluster),
        str(REPO / "farm" / "sweep.py"),
        "--",
        "--spec",
        str(spec),
        "--db",
        str(db),
        "--no-progress",
    )
    submit_s = time.monotonic() - start - up_s
    assert "ok" in submitted.stdout, submitted.stdout[-2000:]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, COUNT(*) FROM measurements GROUP BY status").fetchall()
        (workers,) = conn.execute(
            "SELECT COUNT(DISTINCT worker) FROM measurements WHERE worker != ''"
        ).fetchone()
        sweep_status, n_points = conn.execute("SELECT status, n_points FROM sweeps").fetchone()
    counts = dict(rows)
    assert sweep_status == "finished" and n_points == TWO_BATCH_POINTS
    assert sum(counts.values()) == n_points and counts.get("ok", 0) > 0.8 * n_points, counts
    assert workers == 2  # one worker per logical GPU of the head, found without --address
    _run("down", "--yes", str(cluster))
    down_s = time.monotonic() - start - up_s - submit_s
    print(f"ray up {up_s:.0f} s, submit {submit_s:.0f} s, down {down_s:.0f} s")
