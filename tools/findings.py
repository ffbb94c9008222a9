"""docs/findings.md's queries: parse them, run them on the demo database, check or refresh their output.

Each claim of the page is a ```sql block (first line `-- query: NAME`) followed by a ```text block: the
query's output as `sqlite3 -header` prints it. tests/docs/test_findings.py checks every output and that
each number of the prose is in an output or is a constant of a query.

    python tools/findings.py            # list the claims whose output differs from the data
    python tools/findings.py --update   # rewrite the output blocks from the data (after a new demo
                                        # database or a changed view); then reread the prose: the
                                        # test names every prose number no output gives any more
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
FINDINGS = REPO / "docs" / "findings.md"
DEMO_DB = REPO / "dashboard" / "demo" / "h200.db"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
QUERY_NAME = re.compile(r"^-- query: ([\w-]+)$", re.M)
# A decimal in prose: 1.05, 58.6, 1.66e-03; not a piece of a version (3.6.0) or of a longer number.
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?:e[-+]\d+)?(?![\w]|\.\d)")
COUNT_OF = re.compile(r"\b(\d+) of (?:the )?(\d+)\b")


class Claim(NamedTuple):
    name: str
    sql: str
    expected: str  # as `sqlite3 -header` prints it: a header line, then rows, columns joined by |
    output_span: tuple[int, int]  # where the text block's body lies in the page


def claims(doc: str) -> list[Claim]:
    """Each ```sql block with the ```text block right after it; a sql block without one is an error."""
    blocks = list(FENCE.finditer(doc))
    out = []
    for i, block in enumerate(blocks):
        if block.group(1) != "sql":
            continue
        name = QUERY_NAME.search(block.group(2))
        if not name:
            raise ValueError(f"a sql block without a `-- query: NAME` line: {block.group(2)[:60]!r}")
        after = blocks[i + 1] if i + 1 < len(blocks) else None
        if after is None or after.group(1) != "text":
            raise ValueError(f"query {name.group(1)} has no ```text output block after it")
        out.append(Claim(name.group(1), block.group(2), after.group(2).rstrip("\n"), after.span(2)))
    return out


def prose(doc: str) -> str:
    """The text outside fenced blocks and inline code (commands, versions and names live there)."""
    return re.sub(r"`[^`\n]*`", " ", FENCE.sub(" ", doc))


def run(sql: str, db: Path = DEMO_DB) -> str:
    """The query's output as `sqlite3 -header` prints it, read-only. Relative paths (the llm queries ATTACH
    dashboard/demo/h200-llm.db) are from the working directory: run from the repository root."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        cursor = None
        for statement in (s for s in sql.split(";") if s.strip() and not _only_comments(s)):
            cursor = conn.execute(statement)
        if cursor is None or not cursor.description:
            raise ValueError("the last statement of a query returns no rows")
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
    text = prose(doc)
    numbers = DECIMAL.findall(text) + [n for pair in COUNT_OF.findall(text) for n in pair]
    return [n for n in numbers if n not in cells | constants]


def updated(doc: str, db: Path = DEMO_DB) -> str:
    """The page with every output block rewritten from `db`."""
    for claim in reversed(claims(doc)):  # from the end: earlier spans stay valid
        start, end = claim.output_span
        doc = doc[:start] + run(claim.sql, db) + "\n" + doc[end:]
    return doc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--update", action="store_true", help="rewrite the output blocks from the data")
    p.add_argument("--db", type=Path, default=DEMO_DB)
    args = p.parse_args()
    doc = FINDINGS.read_text()
    stale = [c.name for c in claims(doc) if run(c.sql, args.db) != c.expected]
    if args.update and stale:
        doc = updated(doc, args.db)
        FINDINGS.write_text(doc)
    print(f"{len(stale)} of {len(claims(doc))} outputs differ from the data: {', '.join(stale) or 'none'}")
    unsourced = unsourced_numbers(doc)
    print(f"prose numbers no query gives: {', '.join(unsourced) or 'none'}")
    return 1 if (stale and not args.update) or unsourced else 0


if __name__ == "__main__":
    sys.exit(main())
