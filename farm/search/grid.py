"""`grid`: the candidates in the order given (the plan's), until none is left."""

from __future__ import annotations

from collections.abc import Sequence

from farm.plan import Point
from farm.search.group import Ledger


class GridSearch:
    def __init__(self, candidates: Sequence[Point]):
        self.ledger = Ledger(candidates)

    def ask(self, n: int) -> list[Point]:
        return self.ledger.mark_asked(self.ledger.left[: max(n, 0)])

    def tell(self, point: Point, ms: float | None) -> None:
        self.ledger.record(point, ms)
