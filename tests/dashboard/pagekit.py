"""Driving the dashboard in-process with Streamlit's AppTest, and reading back what each chart received.

Shared by the tests and bench/dashboard_render.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from streamlit.testing.v1 import AppTest

from dashboard.common import DEFAULT_PAGE, NAV

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "dashboard" / "app.py"
# Page (file in app_pages/, url path) -> its title, in the sidebar's order.
PAGES = {name: title for pages in NAV.values() for name, title, _ in pages}
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


def url(base: str, page: str) -> str:
    return f"{base}/{'' if page == DEFAULT_PAGE else page}"


def show(at: AppTest, page: str) -> AppTest:
    return at.switch_page(f"app_pages/{page}.py").run()


def render(db: Path | str, page: str) -> AppTest:
    with app(db) as at:
        return show(at, page)


@dataclass
class Layer:
    description: str
    mark: str
    encoding: dict[str, Any]
    data: pd.DataFrame


def _frame(raw: bytes) -> pd.DataFrame:
    return pa.ipc.open_stream(raw).read_all().to_pandas()


def charts(at: AppTest) -> list[dict[str, Any]]:
    """Each chart on the page: its spec (`spec`) and its unit layers (`layers`), in page order."""
    out = []
    for element in at.get("vega_lite_chart"):
        spec = json.loads(element.proto.spec)
        datasets = {d.name: _frame(d.data.data) for d in element.proto.datasets}
        out.append({"spec": spec, "layers": list(_layers(spec, datasets, None))})
    return out


def _layers(spec: dict, datasets: dict[str, pd.DataFrame], inherited: str | None) -> Iterator[Layer]:
    """Unit specs of a (possibly nested) layer chart with the dataset each one draws."""
    name = spec.get("data", {}).get("name", inherited)
    if "layer" in spec:
        for sub in spec["layer"]:
            yield from _layers({"description": spec.get("description", ""), **sub}, datasets, name)
        return
    mark = spec["mark"]["type"] if isinstance(spec["mark"], dict) else spec["mark"]
    yield Layer(spec.get("description", ""), mark, spec.get("encoding", {}), datasets[name])


def layer(chart: dict[str, Any], description: str, mark: str | None = None) -> Layer:
    """The one layer of `chart` with this description (and mark)."""
    found = [ly for ly in chart["layers"] if ly.description == description and mark in (None, ly.mark)]
    assert len(found) == 1, f"{description!r}/{mark}: {[(ly.description, ly.mark) for ly in chart['layers']]}"
    return found[0]


def texts(at: AppTest, kind: str) -> list[str]:
    """The bodies of the page's alerts of one kind (info, warning, error, success)."""
    return [e.value for e in getattr(at, kind)]
