"""docs/findings.md against the shipped demo database: every query it names runs, prints exactly the
output the page shows under it, and every number of its prose is in one of those outputs (or is a
constant of one of its queries), so the page cannot quote a number the data do not give."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import NamedTuple

import pytest

from dashboard.target import DEMO_DB

REPO = Path(__file__).resolve().parents[2]
FINDINGS = REPO / "docs" / "findings.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
QUERY_NAME = re.compile(r"^-- query: ([\w-]+)$", re.M)
# A decimal in prose: 1.05, 58.6, 1.66e-03; not a piece of a version (3.6.0) or of a longer number.
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?:e[-+]\d+)?(?![\w]|\.\d)")
COUNT_OF = re.compile(r"\b(\d+) of (?:the )?(\d+)\b")


class Claim(NamedTuple):
    name: str
    sql: str
    expected: str  # as `sqlite3 -header` prints it: a header line, then rows, columns joined by |


def claims(doc: str) -> list[Claim]:
    """Each ```sql block with the ```text block right after it; a sql block without one is an error."""
    blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(doc)]
    out = []
    for i, (lang, body) in enumerate(blocks):
        if lang != "sql":
            continue
        name = QUERY_NAME.search(body)
        assert name, f"a sql block without a `-- query: NAME` line: {body[:60]!r}"
        after = blocks[i + 1] if i + 1 < len(blocks) else ("", "")
        assert after[0] == "text", f"query {name.group(1)} has no ```text output block after it"
        out.append(Claim(name.group(1), body, after[1].rstrip("\n")))
    return out


def prose(doc: str) -> str:
    """The text outside fenced blocks and inline code (commands, versions and names live there)."""
    return re.sub(r"`[^`\n]*`", " ", FENCE.sub(" ", doc))


def run(sql: str, db: Path = DEMO_DB) -> str:
    """The query's output as `sqlite3 -header` prints it, read-only, from the repository root (the
    queries ATTACH dashboard/demo/h200-grouping-run1.db by that relative path)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        cursor = None
        for statement in (s for s in sql.split(";") if s.strip() and not _only_comments(s)):
            cursor = conn.execute(statement)
        assert cursor is not None and cursor.description, "the last statement returns no rows"
        lines = ["|".join(d[0] for d in cursor.description)]
        lines += ["|".join("" if v is None else str(v) for v in row) for row in cursor.fetchall()]
        return "\n".join(lines)
    finally:
        conn.close()


def _only_comments(statement: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in statement.splitlines())


def unsourced_numbers(doc: str) -> list[str]:
    """Numbers of the prose that no query output or query constant holds: decimals (1.05, 58.6%) and
    both counts of every `N of M`."""
    found = claims(doc)
    cells = {cell for c in found for line in c.expected.splitlines() for cell in re.split(r"[|, ]", line)}
    constants = {n for c in found for n in re.findall(r"\d+(?:\.\d+)?", c.sql)}
    sources = cells | constants
    text = prose(doc)
    numbers = DECIMAL.findall(text) + [n for pair in COUNT_OF.findall(text) for n in pair]
    return [n for n in numbers if n not in sources]


DOC = FINDINGS.read_text()
CLAIMS = claims(DOC)


def test_findings_names_its_queries_once_each() -> None:
    names = [c.name for c in CLAIMS]
    assert len(names) >= 10 and len(set(names)) == len(names), names


@pytest.mark.parametrize("claim", CLAIMS, ids=[c.name for c in CLAIMS])
def test_each_query_prints_what_findings_shows(claim: Claim, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
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


def test_the_checker_finds_output_that_the_data_do_not_give(tmp_path: Path) -> None:
    [claim] = claims(SAMPLE)
    assert run(claim.sql) == claim.expected
    [changed] = claims(SAMPLE.replace("0.97|7", "0.97|8"))
    assert run(changed.sql) != changed.expected
    with pytest.raises(AssertionError, match="no ```text output block"):
        claims(SAMPLE.split("```text")[0])
