"""Servers that tests and benchmarks start (PostgreSQL, the dashboard, Ray heads, sweeps): a free
TCP port of 127.0.0.1 for them, and stopping one with everything it started."""

import os
import signal
import socket
import subprocess


def free_port() -> int:
    """A port nothing listens on now (the OS picks it; another process may take it first, rarely)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """Stop a process started with start_new_session=True and every process of its group: SIGTERM,
    then SIGKILL after grace_s. A throwaway Ray head's graceful stop took 33 s (its raylet, GCS,
    dashboard and workers are in the group)."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
