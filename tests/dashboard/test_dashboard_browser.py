"""The real thing: `farm dashboard --headless` serving the small database, Debian's Chromium driven by
Playwright through every page: each chart draws marks and the console stays free of warnings and
errors; a screenshot of each page lands in artifacts/screenshots/. A planted page shows the check
catches an empty chart and Vega's warning about a log axis with zero in it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tools.browser import (
    PAGES,
    REPO,
    Console,
    chromium,
    drawing_problems,
    serve,
    serve_command,
    url,
    wait_drawn,
)
from tools.ports import free_port

pytestmark = pytest.mark.slow

SCREENSHOTS = REPO / "artifacts" / "screenshots"
# (charts, tables) each page of the small database shows; test_dashboard_pages.py checks their data.
ELEMENTS = {
    "overview": (2, 0),
    "shape": (2, 2),
    "splitk": (2, 1),
    "grouping": (2, 0),
    "cublas": (2, 2),
    "explorer": (0, 1),
    "accuracy": (2, 1),
    "sweeps": (0, 2),
    "compare": (1, 1),
}
# Exceptions, st.error, and dialogs (Streamlit's "Page not found" is one).
ERRORS = '[data-testid="stException"], [data-testid="stAlertContentError"], [role="dialog"]'
PLANTED = """
import altair as alt
import pandas as pd
import streamlit as st

st.title("Planted")
empty = pd.DataFrame({"x": pd.Series([], dtype=float), "y": pd.Series([], dtype=float)})
st.altair_chart(alt.Chart(empty).mark_point().encode(x="x:Q", y="y:Q"))
# The accuracy page's old bug: bars start at zero, and zero is on no log axis.
bars = pd.DataFrame({"variant": ["a", "b"], "err": [1e-3, 2e-2]})
log_y = alt.Y("err:Q", scale=alt.Scale(type="log"))
st.altair_chart(alt.Chart(bars).mark_bar().encode(x="variant:N", y=log_y))
"""


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Page, Console]]:
    with chromium(
        tmp_path_factory.mktemp("chromium-profile"), viewport={"width": 1400, "height": 2200}
    ) as page:
        yield page, Console(page)


@pytest.fixture(scope="module")
def server(dbs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(dbs["small"], tmp_path_factory.mktemp("dashboard-server") / "server.log") as base:
        yield base


def test_planted_empty_chart_and_log_zero_are_caught(tab, tmp_path: Path) -> None:
    page, console = tab
    script = tmp_path / "planted.py"
    script.write_text(PLANTED)
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port)]
    cmd += [
        "--server.headless",
        "true",
        "--server.address",
        "127.0.0.1",
        "--browser.gatherUsageStats",
        "false",
    ]
    with serve_command(cmd, port, tmp_path / "planted.log") as base:
        console.take()
        page.goto(base, wait_until="domcontentloaded")
        assert wait_drawn(page, "Planted") == 2
        problems = drawing_problems(page, console)
        page.goto("about:blank")  # leave before the server stops: no reconnect warnings for the next test
        console.take()
    assert "chart 0 draws no marks" in problems
    assert any("zero" in p.lower() for p in problems), problems


@pytest.mark.parametrize("page_name", PAGES, ids=list(PAGES))
def test_page_draws_every_chart_without_console_warnings(server: str, tab, page_name: str) -> None:
    page, console = tab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    console.take()
    page.goto(url(server, page_name), wait_until="domcontentloaded")
    n_charts, n_tables = ELEMENTS[page_name]
    assert wait_drawn(page, PAGES[page_name]) == n_charts
    expect(page.locator('[data-testid="stDataFrame"]')).to_have_count(n_tables)
    page.screenshot(path=str(SCREENSHOTS / f"{page_name}.png"), full_page=True)
    assert page.locator(ERRORS).count() == 0, page.locator(ERRORS).all_inner_texts()
    assert drawing_problems(page, console) == []
