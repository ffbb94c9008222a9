"""The real thing: `farm dashboard --headless` serving the small database, the demo database and a smoke
sweep's (interpreter) database, Debian's Chromium driven by Playwright through every page: each chart
draws marks in a plot area at least 60 px high, labels every row of a bar chart, writes no text over
another, the console stays free of warnings and errors, no traceback shows, and every chart's title
shows whole (not missing, not clipped by its frame, not under a widget); a full-page screenshot of each
page of the small database lands in artifacts/screenshots/. Planted pages show the checks catch an
empty chart, Vega's warning about a log axis with zero in it, clipped or missing titles, and a chart
forced to a fixed 100 px whose title and axis leave no plot."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from dashboard.target import DEMO_DB
from tools.browser import (
    ERRORS,
    PAGES,
    REPO,
    Console,
    chromium,
    drawing_problems,
    full_page_screenshot,
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
    "grouping": (2, 2),
    "cublas": (2, 2),
    "explorer": (0, 1),
    "accuracy": (2, 1),  # the small database has a wrong row: the error chart is drawn
    "sweeps": (0, 2),
    "compare": (1, 2),  # the points the gate flagged, and each shape's best
    "search": (0, 0),  # no searched sweep in the small database: the page says how to run one
}
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
# Titles that do not show: none at all; one pushed out of the SVG by a y axis title longer than the
# plot (the split-K page's bug: Vega's layout outgrows Streamlit's frame and the title is clipped); one
# under a widget drawn over it. The last chart's title shows: the check passes it.
PLANTED_TITLES = """
import altair as alt
import pandas as pd
import streamlit as st

st.title("Planted titles")
df = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [1.0, 4.0, 9.0]})
dots = alt.Chart(df).mark_point()
st.altair_chart(dots.encode(x="x:Q", y="y:Q").properties(height=200))
long = "a y axis title much longer than the plot is high, " * 3
pushed = dots.encode(x="x:Q", y=alt.Y("y:Q", title=long, axis=alt.Axis(titleLimit=280)))
st.altair_chart(pushed.properties(title="pushed out", height=200))
st.markdown(
    '<div style="position: relative; height: 0"><div style="position: absolute; top: 0; z-index: 10; '
    'height: 80px; width: 100%; background: #eee">a widget over the next title</div></div>',
    unsafe_allow_html=True,
)
st.altair_chart(dots.encode(x="x:Q", y="y:Q").properties(title="covered", height=200))
st.altair_chart(dots.encode(x="x:Q", y="y:Q").properties(title="shown", height=200))
"""

# Overview's old bar charts: a fixed height (here 100 px) that the title, subtitle and x axis eat, so the
# plot is a hairline; beside it a bar chart of 30 rows in 200 px, whose labels Vega thins out, and two
# texts written on one spot. A chart sized by its rows passes.
PLANTED_LAYOUT = """
import altair as alt
import pandas as pd
import streamlit as st

st.title("Planted layout")
bars = pd.DataFrame({"status": ["ok", "wrong"], "n": [10, 2]})
bar = alt.Chart(bars).mark_bar().encode(x="n:Q", y="status:N")
titled = alt.Title("fixed 100 px", subtitle=["a subtitle", "and another line"])
st.altair_chart(bar.properties(title=titled, height=100))
rows = pd.DataFrame({"config": [f"config number {i}" for i in range(30)], "n": range(30)})
crowded = alt.Chart(rows).mark_bar().encode(x="n:Q", y="config:N")
st.altair_chart(crowded.properties(title="30 rows in 200 px", height=200))
same = pd.DataFrame({"x": [1.0, 1.0], "y": [1.0, 1.0], "t": ["one label", "another label"]})
st.altair_chart(
    alt.Chart(same).mark_text().encode(x="x:Q", y="y:Q", text="t:N").properties(title="over", height=200)
)
fit = {"type": "fit-x", "contains": "padding"}
st.altair_chart(bar.properties(title="by rows", height=120, autosize=fit))
"""


# One Streamlit server for the planted pages: its script runs the planted script its address names
# (?page=NAME, a file beside it), so the three pages cost one server start, not three.
PLANTED_PAGES = {"empty": PLANTED, "titles": PLANTED_TITLES, "layout": PLANTED_LAYOUT}
PLANTED_RUNNER = """
import pathlib

import streamlit as st

exec(pathlib.Path(__file__).with_name(st.query_params["page"] + ".py").read_text())
"""


def _run_planted(tab, planted_server: str, name: str, title: str) -> list[str]:
    """The drawing problems of a planted Streamlit script's page."""
    page, console = tab
    console.take()
    page.goto(f"{planted_server}/?page={name}", wait_until="domcontentloaded")
    wait_drawn(page, title)
    problems = drawing_problems(page, console)
    page.goto("about:blank")  # leave the page: no reconnect warnings for the next test
    console.take()
    return problems


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


@pytest.fixture(scope="module")
def planted_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for the three planted pages (a start each before)."""
    folder = tmp_path_factory.mktemp("planted")
    for name, text in PLANTED_PAGES.items():
        (folder / f"{name}.py").write_text(text)
    (folder / "runner.py").write_text(PLANTED_RUNNER)
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(folder / "runner.py"), "--server.port", str(port)]
    cmd += ["--server.headless", "true", "--server.address", "127.0.0.1"]
    cmd += ["--browser.gatherUsageStats", "false"]
    with serve_command(cmd, port, folder / "planted.log") as base:
        yield base


def test_planted_empty_chart_and_log_zero_are_caught(tab, planted_server: str) -> None:
    problems = _run_planted(tab, planted_server, "empty", "Planted")
    assert "chart 0 draws no marks" in problems
    assert any("zero" in p.lower() for p in problems), problems


def test_planted_missing_clipped_and_covered_titles_are_caught(tab, planted_server: str) -> None:
    problems = [p for p in _run_planted(tab, planted_server, "titles", "Planted titles") if "title" in p]
    assert problems == [
        "chart 0: no title",
        "chart 1: title clipped by stVegaLiteChart ('pushed out')",
        "chart 2: title covered by stMarkdownContainer ('covered')",
    ]


@pytest.mark.parametrize("page_name", PAGES, ids=list(PAGES))
def test_page_draws_every_chart_without_console_warnings(server: str, tab, page_name: str) -> None:
    page, console = tab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    console.take()
    page.goto(url(server, page_name), wait_until="domcontentloaded")
    n_charts, n_tables = ELEMENTS[page_name]
    assert wait_drawn(page, PAGES[page_name]) == n_charts
    expect(page.locator('[data-testid="stDataFrame"]')).to_have_count(n_tables)
    full_page_screenshot(page, SCREENSHOTS / f"{page_name}.png")
    assert page.locator(ERRORS).count() == 0, page.locator(ERRORS).all_inner_texts()
    assert drawing_problems(page, console) == []


def test_planted_fixed_height_crowded_rows_and_overlapping_labels_are_caught(
    tab, planted_server: str
) -> None:
    problems = _run_planted(tab, planted_server, "layout", "Planted layout")
    assert any(p.startswith("chart 0: plot area") for p in problems), problems
    assert any(p.startswith("chart 1:") and "of 30 rows labelled" in p for p in problems), problems
    assert "chart 2: labels overlap: 'one label' and 'another label'" in problems, problems
    assert not [p for p in problems if p.startswith("chart 3")], problems


@pytest.fixture(scope="module")
def other_servers(dbs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The demo database and a smoke sweep's (interpreter rows only), each served once for the module."""
    folder = tmp_path_factory.mktemp("other-servers")
    with (
        serve(DEMO_DB, folder / "demo.log") as demo,
        serve(dbs["interpreter"], folder / "interpreter.log") as sweep,
    ):
        yield {"demo": demo, "sweep": sweep}


@pytest.mark.parametrize("which", ["demo", "sweep"], ids=["demo-database", "smoke-sweep-database"])
def test_every_page_of_the_demo_and_a_sweep_database_draws_cleanly(other_servers, tab, which: str) -> None:
    page, console = tab
    problems = {}
    for page_name, title in PAGES.items():
        console.take()
        page.goto(url(other_servers[which], page_name), wait_until="domcontentloaded")
        wait_drawn(page, title)
        problems[page_name] = drawing_problems(page, console)
    assert problems == {name: [] for name in PAGES}


def test_a_shape_named_in_the_address_opens_with_every_config_row_labelled(other_servers, tab) -> None:
    """16384^3 on the demo has 13 configs: the chart once dropped every second row's label."""
    page, console = tab
    console.take()
    page.goto(f"{other_servers['demo']}/shape?shape=16384x16384x16384", wait_until="domcontentloaded")
    wait_drawn(page, "Shape")
    expect(page.get_by_text("16384x16384x16384: the fastest")).to_have_count(1)
    assert drawing_problems(page, console) == []
