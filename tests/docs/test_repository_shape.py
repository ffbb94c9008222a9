"""The repository reads as a product: a README a user reads through, current results only, no notebook."""

from __future__ import annotations

import re
from pathlib import Path

from tools.provenance import write_results

REPO = Path(__file__).resolve().parents[2]
README_MAX_CHARS = 15_000  # a user's page, not a notebook: what it is, how to use it, where the why lives
# docs/results holds current results only, each written by a maintained benchmark; a result is its data
# file and provenance sidecar, counted once (14 results on 2026-12-05; 17 with the H100's unseen shapes
# against the libraries, kernels.matmul's must-show beside the H200's suites; 19 with the same shapes
# from the shipped databases' export and QuietHost's cost to a sweep).
RESULTS_MAX = 19
PROVENANCE = re.compile(
    r"# command: .+; gpu: .+; driver: .+; torch: .+; triton: .+; date: \d{4}-\d\d-\d\d\b.*"
)


def test_readme_is_at_most_15000_characters() -> None:
    size = len((REPO / "README.md").read_text())
    assert size <= README_MAX_CHARS, f"README.md is {size:,} characters, over {README_MAX_CHARS:,}"


def test_results_folder_holds_at_most_19_results_each_with_its_provenance() -> None:
    files = sorted(p for p in (REPO / "docs" / "results").iterdir() if p.is_file())
    results = [p.name for p in files if p.suffix != ".meta"]
    assert 0 < len(results) <= RESULTS_MAX, results
    for data in (p for p in files if p.suffix == ".csv"):
        meta = data.with_name(data.name + ".meta")
        assert meta.is_file(), f"{data.name} has no provenance sidecar {meta.name}"
        assert PROVENANCE.fullmatch(meta.read_text().strip()), f"{meta.name}: {meta.read_text()!r}"
    assert not any(re.search(r"visit\d", p.name) for p in files)


def test_no_notebook_and_no_old_results_folder() -> None:
    assert not (REPO / "docs" / "perf-notes.md").exists()
    assert not (REPO / "docs" / "bench").exists()
    assert not (REPO / "bench").exists()


def test_a_benchmark_writes_its_results_with_their_provenance(tmp_path) -> None:
    out = tmp_path / "study.csv"
    write_results(out, ("variant", "host_us"), [{"host_us": 27.5, "variant": "tiled"}])
    assert out.read_text().splitlines() == ["variant,host_us", "tiled,27.5"]
    assert PROVENANCE.fullmatch(Path(f"{out}.meta").read_text().strip())
