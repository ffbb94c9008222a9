"""The real thing: `farm dashboard --headless` serving the small database, Debian's Chromium driven by
Playwright through every page; a screenshot of each lands in artifacts/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browserkit import chromium, serve, wait_drawn
from pagekit import PAGES, REPO, url
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.slow

SCREENSHOTS = REPO / "artifacts" / "screenshots"
# (charts, tables) each page of the small database shows; test_dashboard_pages.py checks their data.
ELEMENTS = {
    "overview": (2, 0),
    "splitk": (2, 1),
    "grouping": (2, 0),
    "cublas": (2, 1),
    "explorer": (0, 1),
    "accuracy": (2, 1),
    "sweeps": (0, 2),
    "compare": (1, 1),
}
# Exceptions, st.error, and dialogs (Streamlit's "Page not found" is one).
ERRORS = '[data-testid="stException"], [data-testid="stAlertContentError"], [role="dialog"]'


@pytest.fixture(scope="module")
def server(dbs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve(dbs["small"], tmp_path_factory.mktemp("dashboard-server") / "server.log") as base:
        yield base


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    with chromium(
        tmp_path_factory.mktemp("chromium-profile"), viewport={"width": 1400, "height": 2200}
    ) as page:
        yield page


@pytest.mark.parametrize("page", PAGES, ids=list(PAGES))
def test_page_loads_in_chromium(server: str, tab: Page, page: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab.goto(url(server, page), wait_until="domcontentloaded")
    n_charts, n_tables = ELEMENTS[page]
    assert wait_drawn(tab, PAGES[page]) == n_charts
    expect(tab.locator('[data-testid="stDataFrame"]')).to_have_count(n_tables)
    tab.screenshot(path=str(SCREENSHOTS / f"{page}.png"), full_page=True)
    assert tab.locator(ERRORS).count() == 0, tab.locator(ERRORS).all_inner_texts()
