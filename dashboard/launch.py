"""`farm dashboard`: check the database, then serve dashboard/app.py with Streamlit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from db.schema import open_engine

APP = Path(__file__).with_name("app.py")


def streamlit_command(db: str, *, port: int = 8501, headless: bool = False) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
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
        "--",
        "--db",
        db,
    ]


def run_dashboard(db: str, *, port: int = 8501, headless: bool = False, host: str = "127.0.0.1") -> int:
    """Serve the dashboard on `db` until Streamlit exits; its exit status.

    The database is checked first, as the dashboard opens it (read-only, a farm results database at
    this code's schema revision): a bad target raises db.errors.DatabaseError, which the CLI prints
    with exit status 2, before any server starts.
    """
    open_engine(db, readonly=True).dispose()
    # A child process, not Streamlit's internal bootstrap: `streamlit run` is its public interface.
    proc = subprocess.Popen(streamlit_command(db, port=port, headless=headless))
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # Ctrl-C reached Streamlit too (same process group): let it shut down, then report it.
        proc.wait()
        raise
