"""Benchmark (not a test): each dashboard page's render on the 100,000-row database.

    python benchmarks/dashboard_render.py [--db /tmp/farm-dashboard-100k.db] [--reps 5] [--browser]
        [--pages grouping compare]

Builds the database the tests use (tools/sample_db.py's big_db: two GPUs, three dtypes, every variant,
a second host, a failed sweep, interpreter rows) once and reuses it. Then, per page, through
Streamlit's AppTest (the script run: queries, pandas, Altair spec and Arrow serialisation):
- cold: query caches cleared first (a first visit, or the first one after the 30 s TTL);
- warm: a rerun with the caches full (what every widget change costs).
--browser adds the time from a click on the page's sidebar link to every chart drawn and widget shown
in Debian's Chromium, against `farm dashboard --headless` (websocket, Arrow, Vega rendering and all).
Budget: 2 s a page. --pages times only the pages named (their file names: grouping, compare ...), in
the sidebar's order; in the browser each still follows the default page's first visit.
Prints a table per page; docs/results/dashboard.md keeps it, with the machine. Time: building the
100k-row database about 7 s (once), then --reps renders of each of the 10 pages, cold and warm (under
0.5 s each on a 2-core VM), and with --browser a fresh server and a click per repetition.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # run from a checkout without installing

import streamlit as st  # noqa: E402

from dashboard.navigation import DEFAULT_PAGE, PAGES  # noqa: E402
from tools import apptest, browser, sample_db  # noqa: E402

BUDGET_S = 2.0
ROWS = 100_000


def ensure_db(path: Path) -> None:
    if path.exists():
        with sqlite3.connect(path) as conn:
            have = conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
        if have == ROWS:
            return
        sys.exit(f"{path} holds {have} rows, not {ROWS}: delete it or pass another --db")
    t = time.perf_counter()
    sample_db.big_db(path, ROWS)
    print(f"built {path} ({ROWS:,} rows) in {time.perf_counter() - t:.1f} s")


def time_apptest(db: Path, reps: int, pages: list[str]) -> dict[str, tuple[list[float], list[float]]]:
    """page -> (cold times, warm times) of the script run, in seconds."""
    # Clearing the caches outside a server logs a line each time (Streamlit resets its loggers' levels).
    logging.getLogger("streamlit.runtime.caching.cache_data_api").addFilter(
        lambda record: "No runtime found" not in record.getMessage()
    )
    out: dict[str, tuple[list[float], list[float]]] = {}
    with apptest.app(db) as at:
        for page in pages:
            cold, warm = [], []
            for _ in range(reps):
                st.cache_data.clear()
                t = time.perf_counter()
                apptest.show(at, page)
                cold.append(time.perf_counter() - t)
                t = time.perf_counter()
                at.run()
                warm.append(time.perf_counter() - t)
                assert not at.exception, (page, [e.value for e in at.exception])
            out[page] = (cold, warm)
    return out


def time_browser(db: Path, reps: int, pages: list[str]) -> dict[str, list[float]]:
    """page -> seconds from a click on its sidebar link to everything drawn in Chromium. A fresh server
    per rep, so each page runs its own queries cold (those it shares with earlier pages are cached)."""
    out: dict[str, list[float]] = {page: [] for page in pages}
    with tempfile.TemporaryDirectory() as tmp, browser.chromium(Path(tmp) / "profile") as tab:
        for rep in range(reps):
            with browser.serve(db, Path(tmp) / f"server-{rep}.log") as base:
                tab.goto(browser.url(base, DEFAULT_PAGE))
                browser.wait_drawn(tab, PAGES[DEFAULT_PAGE])
                for page in pages:
                    title = PAGES[page]
                    t = time.perf_counter()
                    tab.locator('[data-testid="stSidebarNavLink"]', has_text=title).click()
                    browser.wait_drawn(tab, title)
                    out[page].append(time.perf_counter() - t)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=Path(tempfile.gettempdir()) / "farm-dashboard-100k.db")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--browser", action="store_true", help="also time each page in Chromium")
    ap.add_argument("--pages", nargs="+", choices=list(PAGES), default=list(PAGES), help="only these pages")
    args = ap.parse_args(argv)
    ensure_db(args.db)
    print(
        f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"Streamlit {st.__version__}"
    )

    pages = [p for p in PAGES if p in args.pages]
    apptest = time_apptest(args.db, args.reps, pages)
    browser = time_browser(args.db, max(1, args.reps // 2), pages) if args.browser else {}
    head = f"{'page':10} {'cold best':>10} {'cold median':>12} {'warm median':>12}"
    print(head + (f" {'browser median':>15}" if browser else ""))
    over = []
    for page, (cold, warm) in apptest.items():
        line = f"{page:10} {min(cold):10.3f} {statistics.median(cold):12.3f} {statistics.median(warm):12.3f}"
        worst = statistics.median(cold)
        if browser:
            line += f" {statistics.median(browser[page]):15.3f}"
            worst = max(worst, statistics.median(browser[page]))
        if worst >= BUDGET_S:
            over.append(page)
            line += f"  <-- over {BUDGET_S:g} s"
        print(line)
    print(
        f"seconds, {args.reps} reps; budget {BUDGET_S:g} s a page: "
        + (f"over: {', '.join(over)}" if over else "all within")
    )
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
