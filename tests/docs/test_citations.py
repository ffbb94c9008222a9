"""The README, the docs and the product's code cite only what a reader of the repository can open.

They once cited the engineering notebook by visit and session ("visit 36", "visits 28-34",
"session 4"), and documents that never were or no longer are in the repository (DESIGN.md, STYLE.md,
docs/perf-notes.md). A reader of a checkout can follow none of those. This test fails on any such
citation in README.md, docs/*.md or the code of cli/, db/, farm/, kernels/, dashboard/, tools/ and
benchmarks/, and on a relative Markdown link in those documents that does not resolve to a file.
The checker runs on any tree, so the cases below also plant each kind in a scratch tree and see it
reported (and see what is not a citation left alone).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CODE_DIRS = ("cli", "db", "farm", "kernels", "dashboard", "tools", "benchmarks")
CODE_SUFFIXES = {".py", ".yaml", ".yml", ".sh", ".toml", ".ini", ".mako"}

# "visit 36", "Visits 28-34", "visits 141 and 143", "session 4": a notebook's entries, not a source.
NOTEBOOK = re.compile(r"\b(?:visits?|sessions?)\s+\d+", re.IGNORECASE)
# Documents that are not in the repository: the notebook and the two the code once cited.
MISSING = re.compile(r"\b(?:DESIGN\.md|STYLE\.md|perf-notes(?:\.md)?)\b")
# [text](target) and ![alt](target); the target up to a space (a title may follow) or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.IGNORECASE)  # http:, mailto:, #anchor


def documents(root: Path) -> list[Path]:
    readme = [root / "README.md"] if (root / "README.md").is_file() else []
    return readme + sorted((root / "docs").glob("*.md"))


def code_files(root: Path) -> list[Path]:
    return [
        path
        for d in CODE_DIRS
        if (root / d).is_dir()
        for path in sorted((root / d).rglob("*"))
        if path.is_file() and path.suffix in CODE_SUFFIXES and "__pycache__" not in path.parts
    ]


def broken_links(path: Path, line: str) -> list[str]:
    found = []
    for target in LINK.findall(line):
        if EXTERNAL.match(target):
            continue
        relative = target.split("#", 1)[0]
        if relative and not (path.parent / relative).exists():
            found.append(target)
    return found


def citations(root: Path) -> list[str]:
    """Every offending line as 'path:line: what', paths relative to root."""
    found = []
    for path in documents(root) + code_files(root):
        is_doc = path.suffix == ".md"
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            where = f"{path.relative_to(root)}:{number}"
            found += [f"{where}: cites {m.group(0)!r}" for m in NOTEBOOK.finditer(line)]
            found += [f"{where}: cites {m.group(0)!r}, not in the repository" for m in MISSING.finditer(line)]
            if is_doc:
                found += [f"{where}: link to {t!r} does not resolve" for t in broken_links(path, line)]
    return found


def test_readme_docs_and_code_cite_nothing_a_reader_cannot_open():
    found = citations(REPO)
    assert not found, f"{len(found)} citations a reader cannot follow:\n" + "\n".join(found)


@pytest.fixture
def tree(tmp_path):
    """A clean scratch tree: one of each kind of scanned file, with citations that do resolve."""
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "fidelity.csv").write_text("study\n")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "README.md").write_text(
        "See [the design](docs/design.md#measurement), [results](docs/results/fidelity.csv),\n"
        "[Triton](https://triton-lang.org) and [below](#layout). A first visit opens the demo.\n"
    )
    (tmp_path / "docs" / "design.md").write_text("Back to the [README](../README.md).\n")
    (tmp_path / "kernels" / "grouped.py").write_text("# 8.1 us on the H200 (docs/results/fidelity.csv)\n")
    (tmp_path / "tools" / "figures.py").write_text('"""Draws docs/figures/; session = Session(engine)."""\n')
    return tmp_path


def test_a_clean_tree_has_no_citations(tree):
    assert citations(tree) == []


@pytest.mark.parametrize(
    "path, text, expected",
    [
        ("kernels/grouped.py", "# 8.1 us (H200, visit 108)\n", "kernels/grouped.py:1: cites 'visit 108'"),
        ("tools/figures.py", '"""Measured in Visits 28-34."""\n', "tools/figures.py:1: cites 'Visits 28'"),
        ("benchmarks/fidelity.py", "# session 4's runs\n", "benchmarks/fidelity.py:1: cites 'session 4'"),
        ("farm/timing.py", "# why: DESIGN.md, 'Timing'\n", "farm/timing.py:1: cites 'DESIGN.md', not in the"),
        ("db/views.py", "# as STYLE.md says\n", "db/views.py:1: cites 'STYLE.md', not in the"),
        ("README.md", "Numbers: docs/perf-notes.md.\n", "README.md:1: cites 'perf-notes.md', not in the"),
        ("docs/cluster.md", "Scaling: [the CSV](bench/scaling.csv).\n", "docs/cluster.md:1: link to 'bench/"),
        ("docs/cluster.md", "![fig](figures/none.png)\n", "docs/cluster.md:1: link to 'figures/none.png'"),
        ("README.md", "See visit\n36 and [x](docs/gone.md#a).\n", "README.md:2: link to 'docs/gone.md#a'"),
        ("cli/sweep.py", "# start-up (visits 141 and 143)\n", "cli/sweep.py:1: cites 'visits 141'"),
    ],
    ids=[
        "visit-in-kernel-comment",
        "visits-range-in-tool-docstring",
        "session-in-benchmark",
        "DESIGN.md-in-farm",
        "STYLE.md-in-db",
        "perf-notes-in-readme",
        "dangling-markdown-link",
        "dangling-image-link",
        "dangling-link-with-anchor",
        "visits-in-cli",
    ],
)
def test_a_planted_citation_is_reported(tree, path, text, expected):
    target = tree / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)  # in place of the clean file there, so the line numbers are the text's
    found = citations(tree)
    assert any(f.startswith(expected) for f in found), found


def test_a_citation_outside_the_scanned_places_is_left_alone(tree):
    """Tests and the results files keep their history; only what the reader is pointed to is checked."""
    (tree / "tests").mkdir()
    (tree / "tests" / "test_x.py").write_text("# visit 12 found this\n")
    (tree / "docs" / "results" / "db_views.md").write_text("Measured in session 3.\n")
    assert citations(tree) == []
