"""Screenshots of every dashboard page on a results database, as Chromium draws them.

    python tools/screenshots.py DB OUTDIR [--width 1400]

DB: a SQLite path or a database URL (passed to the server through FARM_DB, so a password stays off
every command line). Serves `farm dashboard --headless` on a free port of 127.0.0.1, opens each page in
Debian's Chromium (scripts/system-deps.sh installs it), waits until every chart is drawn, and writes
OUTDIR/PAGE.png (the whole page, however tall: not cut at the 1,600 px viewport). Prints one line per
page: charts, data marks per chart (-1: drawn on a canvas, not counted), and any console warning or
error or chart title that does not show. Exit status 1 when a page drew an empty chart, hid a chart
title or logged one. A few seconds a page.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # run from a checkout without installing

from dashboard.launch import DB_ENV  # noqa: E402
from dashboard.navigation import PAGES  # noqa: E402
from db.engine import display_target  # noqa: E402
from tools import browser  # noqa: E402
from tools.ports import free_port  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", help="SQLite path or database URL")
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--width", type=int, default=1400)
    args = ap.parse_args(argv)
    args.outdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cmd = [sys.executable, "-m", "cli", "dashboard", "--port", str(port), "--headless"]
    bad = []
    print(f"{display_target(args.db)} -> {args.outdir}/")
    print(f"{'page':10} {'charts':>6}  marks per chart / problems")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        env = {DB_ENV: args.db}
        with (
            browser.serve_command(cmd, port, log, env=env) as base,
            browser.chromium(Path(tmp) / "profile", viewport={"width": args.width, "height": 1600}) as tab,
        ):
            console = browser.Console(tab)
            for page, title in PAGES.items():
                console.take()
                tab.goto(browser.url(base, page), wait_until="domcontentloaded")
                n = browser.wait_drawn(tab, title)
                marks = browser.marks_per_chart(tab)
                problems = browser.drawing_problems(tab, console)
                browser.full_page_screenshot(tab, args.outdir / f"{page}.png")
                print(f"{page:10} {n:6}  {marks} {'; '.join(problems)}")
                bad += [page] if problems else []
    print(f"{len(PAGES)} pages, {len(bad)} with problems" + (f": {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(REPO))
    sys.exit(main())
