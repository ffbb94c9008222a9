"""A search's budget per group: a share of its candidates ("10%") or a count of points ("200")."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    value: float
    percent: bool

    def points(self, n_candidates: int) -> int:
        """Points to measure of a group of n_candidates: at least 1, at most n_candidates."""
        if n_candidates <= 0:
            return 0
        if self.percent:
            # The epsilon keeps 10% of 50 at 5, not 6 (0.1 * 50 is 5.000000000000001 in floats).
            return min(n_candidates, max(1, math.ceil(self.value / 100 * n_candidates - 1e-9)))
        return max(1, min(int(self.value), n_candidates))

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else str(int(self.value))


def parse_budget(text: str) -> Budget:
    """ "10%" (a share of each group's candidates, in (0, 100]) or "200" (points, >= 1); ValueError else."""
    raw = str(text).strip()
    try:
        if raw.endswith("%"):
            value = float(raw[:-1])
            if math.isfinite(value) and 0 < value <= 100:
                return Budget(value, percent=True)
        elif raw.isdigit() and int(raw) >= 1:
            return Budget(int(raw), percent=False)
    except ValueError:
        pass
    raise ValueError(
        f"bad budget {text!r}: give a share of each group's candidates such as 10% (0-100%) "
        "or a count of points such as 200"
    )
