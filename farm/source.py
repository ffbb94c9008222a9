"""Where a sweep's points come from. The driver pulls batches from a point source and tells it every
record it stores; what to measure next is the source's business (docs/design.md, "Search").

- `GridSource`: every point of the plan, in dealing order (farm.plan.make_batches): what a sweep
  measured before sources existed, batch for batch.
- `SearchSource`: per (dtype, shape) group, a strategy of farm.search (random, tpe, model, or grid
  in plan order) asks for points of the spec's searched variants until the group's budget is spent.
  Library baselines (cublas) are always measured, outside the budget: they are the yardstick, not
  a candidate. Points this environment and code version already hold are told to the strategies
  before anything is asked and count against the budget, so a search killed and started again
  resumes where it was and never measures a point twice.

A source is driven by one thread (the driver's loop): `take` hands out what can run now, `tell`
reports a stored record, `exhausted` says no batch will come any more.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from db.records import MeasurementRecord, Status
from farm.metrics import NOMINAL_GPU, DeviceLimits
from farm.plan import MAX_BATCH_POINTS, Batch, Point, make_batches
from farm.search import Budget, Group, Observations, Strategy, make_strategy
from kernels import get_variant

# Points of a group asked for at once: a quarter of its budget (at least 2), so that a model refits
# three times within a budget and a group's batch keeps a worker busy while the other groups refit.
ROUNDS_PER_BUDGET = 4


class PointSource(Protocol):
    size: int  # the most points it will hand out: the sweep's point count and progress bar total

    def take(self) -> list[Batch]: ...

    def tell(self, point: Point, record: MeasurementRecord | None) -> None: ...

    @property
    def exhausted(self) -> bool: ...


class GridSource:
    """The whole plan at once, in dealing order."""

    def __init__(self, points: Sequence[Point], seed: int):
        self._batches = make_batches(points, seed)
        self.size = len(points)

    def take(self) -> list[Batch]:
        batches, self._batches = self._batches, []
        return batches

    def tell(self, point: Point, record: MeasurementRecord | None) -> None:
        pass

    @property
    def exhausted(self) -> bool:
        return not self._batches


@dataclass
class _Search:
    """One group's search: its strategy, budget and what is in flight."""

    strategy: Strategy
    budget: int
    asked: int = 0  # candidates handed out or found stored, against the budget
    in_flight: set[Point] = field(default_factory=set)
    done: bool = False  # the budget is spent or the strategy has nothing left to ask


class SearchSource:
    """A budget of each (dtype, shape) group's candidates, chosen by a strategy as results arrive.

    points: the plan (every legal point; the caller has taken out too_large ones). stored: points of
    the plan already held (farm.plan.Point -> kernel ms, None if it did not end ok)."""

    def __init__(
        self,
        points: Sequence[Point],
        *,
        strategy: str,
        budget: Budget,
        seed: int,
        stored: dict[Point, float | None],
        observations: Observations | None = None,
        limits: DeviceLimits = NOMINAL_GPU,
    ):
        candidates: dict[Group, list[Point]] = defaultdict(list)
        baselines: list[Point] = []
        for p in points:
            if get_variant(p.variant).baseline:
                if p not in stored:
                    baselines.append(p)
            else:
                candidates[Group(p.dtype, p.m, p.n, p.k)].append(p)
        self.seed = seed
        self._searches: dict[Group, _Search] = {}
        self._pending: list[Point] = list(baselines)
        self.size = len(baselines)
        for group, group_points in candidates.items():
            points_of_group = budget.points(len(group_points))
            search = _Search(
                make_strategy(
                    strategy,
                    group,
                    group_points,
                    seed=seed,
                    observations=observations,
                    limits=limits,
                    budget=points_of_group,
                ),
                points_of_group,
            )
            for p in group_points:  # resume: what this environment and code already hold
                if p in stored:
                    search.strategy.tell(p, stored[p])
                    search.asked += 1
            self.size += max(0, search.budget - search.asked)
            self._searches[group] = search

    def take(self) -> list[Batch]:
        points, self._pending = self._pending, []
        for search in self._searches.values():
            if search.done or search.in_flight:
                continue
            left = search.budget - search.asked
            round_size = max(2, math.ceil(search.budget / ROUNDS_PER_BUDGET))
            asked = search.strategy.ask(min(left, round_size)) if left > 0 else []
            search.asked += len(asked)
            search.in_flight.update(asked)
            search.done = search.asked >= search.budget or not asked
            points += asked
        return _batches(points, self.seed)

    def tell(self, point: Point, record: MeasurementRecord | None) -> None:
        """A stored record (None: the point will not be measured here, e.g. another sweep holds it)."""
        search = self._searches.get(Group(point.dtype, point.m, point.n, point.k))
        if search is None or point not in search.in_flight:
            return
        search.in_flight.discard(point)
        ok = record is not None and record.status == Status.OK and record.ms is not None
        search.strategy.tell(point, record.ms if ok else None)

    @property
    def exhausted(self) -> bool:
        return not self._pending and all(s.done for s in self._searches.values())

    def budgets(self) -> dict[Group, int]:
        """Per group, how many of its candidates the search measures (a dry run prints these)."""
        return {group: s.budget for group, s in self._searches.items()}


def search_size(points: Iterable[Point], budget: Budget) -> int:
    """How many of `points` a search within `budget` measures: each (dtype, shape)'s budget of its
    candidates, and every library baseline (what a dry run prices before any strategy exists)."""
    candidates: Counter = Counter()
    baselines = 0
    for p in points:
        if get_variant(p.variant).baseline:
            baselines += 1
        else:
            candidates[(p.dtype, p.shape)] += 1
    return baselines + sum(budget.points(n) for n in candidates.values())


def _batches(points: Iterable[Point], seed: int) -> list[Batch]:
    """One batch per (dtype, shape, variant), in the order asked (farm.plan.Batch: the worker builds
    a shape's inputs once per batch)."""
    groups: dict[tuple, list[Point]] = defaultdict(list)
    for p in points:
        groups[(p.dtype, p.m, p.n, p.k, p.variant)].append(p)
    return [
        Batch(dtype, m, n, k, group[start : start + MAX_BATCH_POINTS], seed=seed)
        for (dtype, m, n, k, _), group in groups.items()
        for start in range(0, len(group), MAX_BATCH_POINTS)
    ]
