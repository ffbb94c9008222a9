"""`farm dashboard`: check the database, then serve dashboard/app.py with Streamlit.

The server binds 127.0.0.1 unless the caller opens it (`host`): the pages show every measurement
and the database target, and have no login. The target reaches the server through its environment
(FARM_DB), never its command line: a PostgreSQL URL may carry a password, and any user of the
machine can read a process's arguments (/proc/PID/cmdline, `ps`).

The server is this process's child and ends with it: SIGTERM (`kill PID`) or SIGINT sent to this
process alone stops the server too, so no orphan keeps the port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from dashboard.target import is_demo
from db.engine import display_target
from db.schema import open_engine

APP = Path(__file__).with_name("app.py")
DB_ENV = "FARM_DB"  # read by dashboard.target.parse_db
LOCAL = "127.0.0.1"
# A server asked to stop (SIGTERM) gets this long before SIGKILL: Streamlit closes its sessions and
# the port in well under a second here, and the port must be free within 5 s of the stop.
STOP_GRACE_S = 3.0


def streamlit_command(*, port: int = 8501, headless: bool = False, host: str = LOCAL) -> list[str]:
    """The Streamlit server's command line: no database in it (see streamlit_env)."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true" if headless else "false",
        # Nothing leaves the machine: no usage statistics to Streamlit's servers.
        "--browser.gatherUsageStats",
        "false",
        # A read-only viewer: no "Deploy" button or developer menu.
        "--client.toolbarMode",
        "viewer",
    ]


def streamlit_env(target: str) -> dict[str, str]:
    """This process's environment with the database target in FARM_DB."""
    return {**os.environ, DB_ENV: target}


def run_dashboard(target: str, *, port: int = 8501, headless: bool = False, host: str = LOCAL) -> int:
    """Serve the dashboard on `target` until Streamlit exits; its exit status.

    The database is checked first, as the dashboard opens it (read-only, a farm results database at
    this code's schema revision): a bad target raises db.errors.DatabaseError, which the CLI prints
    with exit status 2, before any server starts. `host` 127.0.0.1 serves this machine only;
    0.0.0.0 (or an address) opens it to the network.
    """
    open_engine(target, readonly=True).dispose()
    what = " (the demo database: real H200 sweeps, read-only)" if is_demo(target) else ""
    print(f"Dashboard on {display_target(target)}{what}: http://{host}:{port}", flush=True)
    # A child process, not Streamlit's internal bootstrap: `streamlit run` is its public interface.
    proc = subprocess.Popen(
        streamlit_command(port=port, headless=headless, host=host), env=streamlit_env(target)
    )
    # SIGTERM ends this process without unwinding (its default action) and would leave the server
    # running: turn it into an exception, as Ctrl-C is, while the server runs.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if main else None
    try:
        return proc.wait()
    except Terminated:
        stop_server(proc)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        # Ctrl-C at a terminal reached Streamlit too (same process group); a SIGINT sent to this
        # process alone did not: stop it either way, then report the interrupt.
        stop_server(proc)
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


class Terminated(Exception):
    """SIGTERM reached `farm dashboard`."""


def _terminated(signum, frame):
    raise Terminated


def stop_server(proc: subprocess.Popen) -> None:
    """Stop the server: SIGTERM, then SIGKILL after STOP_GRACE_S; returns once it has exited."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
