"""The dashboard in a real browser: `farm dashboard --headless` in its own process group, Debian's
Chromium driven by Playwright (never a downloaded browser), and what a page drew.

Used by the browser test, benchmarks/dashboard_render.py and tools/screenshots.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import ConsoleMessage, Page, expect, sync_playwright

from dashboard.navigation import DEFAULT_PAGE, PAGES  # noqa: F401  (PAGES: for the callers)
from tools.ports import free_port, stop_group

REPO = Path(__file__).resolve().parents[1]
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
START_S = 120  # a server starts in 5-15 s on a loaded 2-core machine
WAIT_MS = 60_000
# Data marks of a Vega chart drawn as SVG that have a real size: not the axes, legends or titles.
# Vega gives every mark group the class role-mark; an item whose geometry is NaN (a bar from 0 on a
# log axis) has a zero or non-finite box.
_COUNT_MARKS = """chart => {
    const svg = chart.querySelector('svg.marks');
    if (!svg) return -1;  // canvas (Streamlit switches past 2,000 points per layer): not countable
    let n = 0;
    for (const group of svg.querySelectorAll('g.role-mark')) {
        if (group.closest('.role-axis, .role-legend, .role-title')) continue;
        for (const item of group.children) {
            let box;
            try { box = item.getBBox(); } catch (e) { continue; }
            const finite = [box.x, box.y, box.width, box.height].every(Number.isFinite);
            if (finite && (box.width > 0 || box.height > 0)) n++;
        }
    }
    return n;
}"""
# Where a chart's title is drawn, for each chart: its text, and whether it is missing (no title text in the
# SVG), clipped (outside the box of an element that clips it: Vega's own <svg> hides what it draws above
# its top edge, as Streamlit's frame did to the split-K page's titles) or covered (the element on top at
# the title's centre is not the chart: a caption or widget above it overlaps). Canvas charts (past 2,000
# points) draw text as pixels: null, not checked. A text's box is its line box, a few px above and under
# the glyphs: a title 87% inside its SVG reads whole, half inside does not; 80% must show.
_TITLE = """chart => {
    const SHOWN = 0.8;
    const svg = chart.querySelector('svg.marks');
    if (!svg) return null;
    const texts = [...svg.querySelectorAll('.role-title-text')];
    const said = texts.map(t => t.textContent).join(' ').trim();
    if (!said) return {text: '', problem: 'no title'};
    chart.scrollIntoView({block: 'center'});
    for (const t of texts) {
        const r = t.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) return {text: said, problem: 'title has no size'};
        for (let e = t.parentElement; e; e = e.parentElement) {
            const style = getComputedStyle(e);
            if (style.overflowX === 'visible' && style.overflowY === 'visible') continue;
            const b = e.getBoundingClientRect();
            const shownX = Math.min(r.right, b.right) - Math.max(r.left, b.left);
            const shownY = Math.min(r.bottom, b.bottom) - Math.max(r.top, b.top);
            if (shownX < SHOWN * r.width || shownY < SHOWN * r.height) {
                const who = e.closest('[data-testid]')?.dataset.testid || e.tagName.toLowerCase();
                return {text: said, problem: `title clipped by ${who}`};
            }
        }
        const top = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
        if (!top || !chart.contains(top)) {
            const who = top ? (top.closest('[data-testid]')?.dataset.testid || top.tagName) : 'nothing';
            return {text: said, problem: `title covered by ${who}`};
        }
    }
    return {text: said, problem: ''};
}"""


# A chart's plot area (the root frame's background: the rectangle the data are drawn in, without title,
# axes and legends) shorter than this reads as a title and a hairline: Overview's bar charts once got a
# fixed 26 px per row + 90 px, and the title and axis ate all of it (0 px).
MIN_PLOT_PX = 60
_PLOT_PX = """chart => {
    const svg = chart.querySelector('svg.marks');
    if (!svg) return null;
    const bg = svg.querySelector('g.role-frame.root path.background');
    return bg ? bg.getBoundingClientRect().height : 0;
}"""
# Per discrete axis of a chart ("Y-axis ... for a discrete scale with 13 values: ..." in Vega's aria
# label): its rows and the labels that show (Vega hides an overlapping label with opacity 0).
_ROW_LABELS = """chart => {
    const svg = chart.querySelector('svg.marks');
    if (!svg) return [];
    const out = [];
    for (const axis of svg.querySelectorAll('g.role-axis')) {
        const said = axis.getAttribute('aria-label') || '';
        const m = said.match(/^Y-axis.*discrete scale with (\\d+) values?/);
        if (!m) continue;
        const shown = [...axis.querySelectorAll('.role-axis-label text')].filter(t => {
            const r = t.getBoundingClientRect();
            return t.textContent.trim() && r.height > 0 && getComputedStyle(t).opacity !== '0'
                && t.getAttribute('opacity') !== '0';
        });
        out.push({rows: Number(m[1]), labelled: shown.length});
    }
    return out;
}"""
# Pairs of text items of a chart (labels, axis labels, titles, legends) whose boxes overlap by more than
# 2 px each way (a text's box is its line box: two rows 11 px apart touch without overlapping).
_OVERLAPS = """chart => {
    const svg = chart.querySelector('svg.marks');
    if (!svg) return [];
    const items = [...svg.querySelectorAll('text')].filter(t => {
        if (!t.textContent.trim()) return false;
        for (let e = t; e && e !== svg; e = e.parentElement) {
            if (e.getAttribute('opacity') === '0' || getComputedStyle(e).opacity === '0') return false;
        }
        const r = t.getBoundingClientRect();
        return r.width > 0 && r.height > 0;
    }).map(t => [t.textContent.trim(), t.getBoundingClientRect()]);
    const out = [];
    for (let i = 0; i < items.length; i++) {
        for (let j = i + 1; j < items.length; j++) {
            const [a, ra] = items[i], [b, rb] = items[j];
            const dx = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
            const dy = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
            if (dx > 2 && dy > 2) out.push([a, b]);
        }
    }
    return out;
}"""
# Exceptions (a traceback), st.error, and dialogs (Streamlit's "Page not found" is one).
ERRORS = '[data-testid="stException"], [data-testid="stAlertContentError"], [role="dialog"]'


def url(base: str, page: str) -> str:
    return f"{base}/{'' if page == DEFAULT_PAGE else page}"


@contextmanager
def serve_command(cmd: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run a Streamlit server command (its own session: it and its children stop together) and yield
    its URL once /_stcore/health answers."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_S
        while not _healthy(base):
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd[:4]} exited with {proc.returncode}:\n{log.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no answer from {base} after {START_S} s:\n{log.read_text()}")
            time.sleep(0.3)
        yield base
    finally:
        stop_group(proc, 15)


@contextmanager
def serve(db: Path | str, log: Path) -> Iterator[str]:
    """`farm dashboard --db DB --headless` on a free port; yields its URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "cli", "dashboard", "--db", str(db), "--port", str(port), "--headless"]
    with serve_command(cmd, port, log) as base:
        yield base


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
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


class Console:
    """The warnings and errors a tab logs (console.warn/error, uncaught exceptions), since the last take()."""

    def __init__(self, tab: Page) -> None:
        self.messages: list[str] = []
        tab.on("console", self._on_message)
        tab.on("pageerror", lambda exc: self.messages.append(f"pageerror: {exc}"))

    def _on_message(self, msg: ConsoleMessage) -> None:
        url = msg.location.get("url", "")
        # Opening a page by its URL (/splitk), Streamlit's client first probes /splitk/_stcore/health and
        # host-config to find its base path, and the 404s it gets are logged: its discovery, not an error.
        if msg.text.startswith("Failed to load resource") and re.search(
            r"/[^/]+/_stcore/(health|host-config)$", url
        ):
            return
        if msg.type in ("warning", "error"):
            where = msg.location.get("url", "") if msg.text.startswith("Failed to load resource") else ""
            self.messages.append(f"{msg.type}: {msg.text}" + (f" ({where})" if where else ""))

    def take(self) -> list[str]:
        out, self.messages = self.messages, []
        return out


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


def marks_per_chart(tab: Page) -> list[int]:
    """Per chart on the page, the data marks drawn with a real size (-1: drawn on a canvas, not counted)."""
    charts = tab.locator('[data-testid="stVegaLiteChart"]')
    return [charts.nth(i).evaluate(_COUNT_MARKS) for i in range(charts.count())]


def chart_titles(tab: Page) -> list[dict[str, str] | None]:
    """Per chart on the page: {"text": its title, "problem": "" or why it does not show} (None: a canvas)."""
    charts = tab.locator('[data-testid="stVegaLiteChart"]')
    return [charts.nth(i).evaluate(_TITLE) for i in range(charts.count())]


def title_problems(tab: Page) -> list[str]:
    """A line for each chart whose title is missing, outside its box or covered by a widget."""
    return [
        f"chart {i}: {t['problem']}" + (f" ({t['text']!r})" if t["text"] else "")
        for i, t in enumerate(chart_titles(tab))
        if t is not None and t["problem"]
    ]


def _per_chart(tab: Page, script: str) -> list:
    charts = tab.locator('[data-testid="stVegaLiteChart"]')
    return [charts.nth(i).evaluate(script) for i in range(charts.count())]


def plot_heights(tab: Page) -> list[float | None]:
    """Per chart, its plot area's height in px (None: drawn on a canvas, not measured)."""
    return _per_chart(tab, _PLOT_PX)


def layout_problems(tab: Page) -> list[str]:
    """A line for each chart whose plot area is under MIN_PLOT_PX, whose rows are not all labelled, or
    whose text labels overlap."""
    problems = []
    for i, px in enumerate(plot_heights(tab)):
        if px is not None and px < MIN_PLOT_PX:
            problems.append(f"chart {i}: plot area {px:.0f} px high (under {MIN_PLOT_PX})")
    for i, axes in enumerate(_per_chart(tab, _ROW_LABELS)):
        for axis in axes:
            if axis["labelled"] < axis["rows"]:
                problems.append(f"chart {i}: {axis['labelled']} of {axis['rows']} rows labelled")
    for i, pairs in enumerate(_per_chart(tab, _OVERLAPS)):
        problems += [f"chart {i}: labels overlap: {a!r} and {b!r}" for a, b in pairs]
    return problems


def drawing_problems(tab: Page, console: Console) -> list[str]:
    """What is wrong with the page just drawn: a traceback or error, charts with no marks, a plot area too
    low, rows unlabelled, text over text, titles that do not show, and console warnings or errors."""
    errors = [f"error on the page: {text[:300]}" for text in tab.locator(ERRORS).all_inner_texts()]
    problems = [f"chart {i} draws no marks" for i, n in enumerate(marks_per_chart(tab)) if n == 0]
    return errors + problems + layout_problems(tab) + title_problems(tab) + console.take()


def full_page_screenshot(tab: Page, path: Path) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside its own container, so the document is
    one viewport high and Playwright's full_page cut every page at the viewport (1,600 px). The viewport
    is stretched to the container's content for the shot, then put back."""
    size = tab.viewport_size
    height = tab.evaluate(
        """() => Math.max(...[...document.querySelectorAll('[data-testid="stMain"], section.main, '
            + '[data-testid="stAppViewContainer"], [data-testid="stSidebarContent"]')]
            .map(e => e.scrollHeight), document.documentElement.scrollHeight)"""
    )
    tab.set_viewport_size({"width": size["width"], "height": max(size["height"], int(height))})
    try:
        wait_drawn_again = tab.locator('[data-testid="stApp"][data-test-script-state="notRunning"]')
        wait_drawn_again.wait_for(timeout=WAIT_MS)
        tab.screenshot(path=str(path), full_page=True)
    finally:
        tab.set_viewport_size(size)
