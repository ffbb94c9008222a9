"""`random`: the candidates in a shuffled order (the seed's), until none is left: the baseline every
other strategy is scored against (farm/search/replay.py computes its expectation exactly)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from farm.plan import Point
from farm.search.group import Ledger


class RandomSearch:
    def __init__(self, candidates: Sequence[Point], seed: int):
        self.ledger = Ledger(candidates)
        self.order = list(self.ledger.candidates)
        random.Random(seed).shuffle(self.order)

    def ask(self, n: int) -> list[Point]:
        asked = self.ledger.asked
        return self.ledger.mark_asked([p for p in self.order if p not in asked][: max(n, 0)])

    def tell(self, point: Point, ms: float | None) -> None:
        self.ledger.record(point, ms)
