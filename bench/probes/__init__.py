"""One-off GPU probes kept so that a visit's numbers can be measured again (docs/perf-notes.md)."""

from __future__ import annotations

import csv
from pathlib import Path


class Rows:
    """A probe's rows, the whole CSV written again after each one: a run killed at its time limit
    keeps what it had measured (a visit lost a table that was written only at the end, visit 72)."""

    def __init__(self, path: str, header: tuple[str, ...]) -> None:
        self.path, self.header, self.rows = Path(path), header, []

    def add(self, *row) -> None:
        self.rows.append(row)
        with self.path.open("w", newline="") as f:
            csv.writer(f).writerows([self.header, *self.rows])
