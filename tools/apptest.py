"""The dashboard in-process under Streamlit's AppTest: the app on a database, a page switch.

Used by the page tests (tests/dashboard/pagekit.py reads the charts back) and benchmarks/dashboard_render.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
# AppTest's per-run limit: generous, the benchmark (not this) holds the 2 s budget.
TIMEOUT_S = 60


@contextmanager
def app(db: Path | str) -> Iterator[AppTest]:
    """The app on `db` after its first run (the default page). Inside the block sys.argv is what
    `streamlit run dashboard/app.py -- --db DB` gives the script: every rerun reads it."""
    saved = sys.argv
    sys.argv = [str(APP), "--db", str(db)]
    try:
        yield AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run()
    finally:
        sys.argv = saved


def show(at: AppTest, page: str) -> AppTest:
    return at.switch_page(f"app_pages/{page}.py").run()


def render(db: Path | str, page: str) -> AppTest:
    with app(db) as at:
        return show(at, page)
