"""A free TCP port of 127.0.0.1 for the servers tests and benchmarks start (PostgreSQL, the dashboard)."""

import socket


def free_port() -> int:
    """A port nothing listens on now (the OS picks it; another process may take it first, rarely)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
