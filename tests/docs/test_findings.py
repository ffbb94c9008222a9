"""docs/findings.md against the shipped demo database: every query it names runs and prints exactly
the output the page shows under it, and every number of its prose is in one of those outputs (or is a
constant of one of its queries), so the page cannot quote a number the data do not give."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.target import DEMO_DB as DASHBOARD_DEMO_DB
from tools.findings import DEMO_DB, FINDINGS, REPO, Claim, claims, run, unsourced_numbers, updated

DOC = FINDINGS.read_text()
CLAIMS = claims(DOC)


def test_findings_reads_the_database_the_dashboard_shows() -> None:
    assert DEMO_DB == DASHBOARD_DEMO_DB


def test_findings_names_its_queries_once_each() -> None:
    names = [c.name for c in CLAIMS]
    assert len(names) >= 10 and len(set(names)) == len(names), names


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.name for c in CLAIMS])
def test_each_query_prints_what_findings_shows(claim: Claim, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the llm queries ATTACH h200-llm.db by its path from the repository root
    assert run(claim.sql) == claim.expected


def test_every_number_in_the_prose_comes_from_a_query() -> None:
    assert unsourced_numbers(DOC) == []


# ---- the checker itself: a page that quotes a number no query gives fails ----

SAMPLE = """Split-K pays below 0.97 tiles per SM, on 7 of 7 pairs.

```sql
-- query: demo
SELECT 0.97 AS tiles, 7 AS pairs;
```

```text
tiles|pairs
0.97|7
```
"""


@pytest.mark.parametrize(
    ("edit", "unsourced"),
    [
        ((), []),
        (("0.97 tiles", "0.98 tiles"), ["0.98"]),
        (("7 of 7", "7 of 8"), ["8"]),
        (("pairs.", "pairs, 58.6% of them."), ["58.6"]),
        (("pairs.", "pairs (Triton `3.6.0`, driver 580.159.04)."), []),
    ],
    ids=["as-written", "changed-decimal", "changed-count", "new-percentage", "versions-are-not-claims"],
)
def test_the_checker_finds_numbers_no_query_gives(edit: tuple[str, ...], unsourced: list[str]) -> None:
    doc = SAMPLE.replace(*edit) if edit else SAMPLE
    assert unsourced_numbers(doc) == unsourced


def test_the_checker_finds_output_the_data_do_not_give_and_update_rewrites_it() -> None:
    [claim] = claims(SAMPLE)
    assert run(claim.sql) == claim.expected
    stale = SAMPLE.replace("0.97|7", "0.97|8")
    [changed] = claims(stale)
    assert run(changed.sql) != changed.expected
    assert updated(stale) == SAMPLE
    with pytest.raises(ValueError, match="no ```text output block"):
        claims(SAMPLE.split("```text")[0])


def test_the_script_and_the_page_agree(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from tools import findings

    monkeypatch.chdir(REPO)
    monkeypatch.setattr("sys.argv", ["findings.py"])
    assert findings.main() == 0
    assert "0 of" in capsys.readouterr().out
    assert Path(findings.FINDINGS).read_text() == DOC  # a check without --update writes nothing
