"""tools/figures.py draws every figure from a database with the dashboard's charts; the docs show them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dashboard.target import DEMO_DB
from tools import figures

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_every_figure_is_drawn_from_the_demo_database(tmp_path: Path) -> None:
    written = figures.draw(str(DEMO_DB), tmp_path, "NVIDIA H200")
    assert [p.name for p in written] == [f"{name}.png" for name in figures.FIGURES]
    for path in written:
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC), path.name
        # A chart with its marks, not an empty canvas: several kB at scale 2.
        assert len(data) > 20_000, path.name


def test_the_llm_figures_are_drawn_from_its_demo_database(tmp_path: Path) -> None:
    llm = DEMO_DB.with_name("h200-llm.db")
    written = figures.draw(str(llm), tmp_path, "NVIDIA H200", names=["cublas", "splitk"], prefix="llm_")
    assert [p.name for p in written] == ["llm_cublas.png", "llm_splitk.png"]
    for path in written:
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 20_000, path.name


@pytest.mark.parametrize("doc", ["README.md", "docs/findings.md"], ids=["readme", "findings"])
def test_the_docs_show_committed_figures(doc: str) -> None:
    text = (REPO / doc).read_text()
    shown = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text)
    assert any("figures/" in s for s in shown), f"{doc} shows no figure of docs/figures"
    for src in shown:
        assert ((REPO / doc).parent / src).is_file(), src
