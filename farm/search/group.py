"""What one search is about (`Group`), what a strategy answers to (`Strategy`), and the bookkeeping
every strategy shares (`Ledger`: what was asked and what was told)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from farm.plan import Point


@dataclass(frozen=True)
class Group:
    """One search: one (dtype, shape) on one GPU kind, over the spec's searched variants."""

    dtype: str
    m: int
    n: int
    k: int

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.m, self.n, self.k


class Strategy(Protocol):
    def ask(self, n: int) -> list[Point]:
        """Up to n candidates not asked before, in the order to measure them; [] when nothing is left
        that the strategy wants measured. May be called again before earlier points are told."""
        ...

    def tell(self, point: Point, ms: float | None) -> None:
        """A result: kernel ms of an ok row; None for any other status (failed, wrong, too_large)."""
        ...


class Ledger:
    """The candidates of a group, which of them were asked, and what came back.

    A point told without being asked (a resumed search: the database holds it already) counts as
    asked, so no strategy hands it out again."""

    def __init__(self, candidates: Sequence[Point]):
        self.candidates: list[Point] = list(dict.fromkeys(candidates))
        self.index = {p: i for i, p in enumerate(self.candidates)}
        self.asked: set[Point] = set()
        self.results: dict[Point, float | None] = {}

    def mark_asked(self, points: Sequence[Point]) -> list[Point]:
        self.asked.update(points)
        return list(points)

    def record(self, point: Point, ms: float | None) -> bool:
        """Store a result; False for a point that is not a candidate (ignored)."""
        if point not in self.index:
            return False
        self.asked.add(point)
        self.results[point] = ms
        return True

    @property
    def left(self) -> list[Point]:
        return [p for p in self.candidates if p not in self.asked]
