"""The dashboard in a real browser: `farm dashboard --headless` in its own process group, Debian's
Chromium driven by Playwright (never a downloaded browser). Shared by the browser test and
bench/dashboard_render.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pagekit import REPO
from playwright.sync_api import Page, expect, sync_playwright
from ports import free_port

CHROMIUM = Path("/usr/bin/chromium")
# This network refuses Chromium's background connections: without these flags it stalls on them.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
START_S = 60
WAIT_MS = 30_000


@contextmanager
def serve(db: Path, log: Path) -> Iterator[str]:
    """`farm dashboard --db DB --headless` on a free port; yields its URL once /_stcore/health answers."""
    port = free_port()
    cmd = [sys.executable, "-m", "farm.cli", "dashboard", "--db", str(db), "--port", str(port), "--headless"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with log.open("w") as out:
        # Its own session: the farm process and its Streamlit child are stopped together.
        proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while not _healthy(url):
            if proc.poll() is not None:
                raise RuntimeError(f"farm dashboard exited with {proc.returncode}:\n{log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no answer from {url} after {START_S} s:\n{log.read_text()}")
            time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.read() == b"ok"
    except OSError:
        return False


@contextmanager
def chromium(profile: Path, **context_options) -> Iterator[Page]:
    """A tab of Debian's Chromium with a fresh profile in `profile`."""
    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} not found: run scripts/system-deps.sh (installs Debian's chromium)")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True, **context_options
        )
        try:
            yield context.new_page()
        finally:
            context.close()


def wait_drawn(tab: Page, title: str) -> int:
    """Wait until the page titled `title` has run and drawn: every widget and table loaded (no
    skeletons), a canvas or svg in every chart. Returns the number of charts."""
    tab.get_by_role("heading", name=title, level=1).wait_for(timeout=WAIT_MS)
    tab.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for(timeout=WAIT_MS)
    expect(tab.locator('[data-testid="stSkeleton"]')).to_have_count(0, timeout=WAIT_MS)
    charts = tab.locator('[data-testid="stVegaLiteChart"]')
    for i in range(charts.count()):
        charts.nth(i).locator("canvas, svg").first.wait_for(timeout=WAIT_MS)
    return charts.count()
