"""Reading back what each chart of a page run under AppTest received (tools/apptest.py runs the pages)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from streamlit.testing.v1 import AppTest

from dashboard.navigation import PAGES  # noqa: F401
from tools.apptest import app, render, show  # noqa: F401  (the tests import them from here)

REPO = Path(__file__).resolve().parents[2]


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
