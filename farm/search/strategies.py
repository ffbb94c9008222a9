"""The strategies by name: `make_strategy` builds one for a group (the interface farm/source.py uses)."""

from __future__ import annotations

from collections.abc import Sequence

from farm.metrics import NOMINAL_GPU, DeviceLimits
from farm.plan import Point
from farm.search.group import Group, Strategy
from farm.search.observations import Observations

STRATEGIES = ("grid", "random", "tpe", "model")


def make_strategy(
    name: str,
    group: Group,
    candidates: Sequence[Point],
    *,
    seed: int,
    observations: Observations | None = None,
    limits: DeviceLimits = NOMINAL_GPU,
) -> Strategy:
    """A strategy over a group's candidates (every legal point of the searched variants, library
    baselines excluded: the caller measures those itself). grid: the candidates in the given order.
    observations: rows for `model` and for the nearest-shape seeds of `model` and `tpe`. A replay holds
    this group's shape out of them (farm/search/replay.py `check_no_leak`); in a sweep, rows of the
    same shape (another GPU's, an older code version's) are what the database knows, and seed first.
    Optuna and scikit-learn load only when asked for."""
    if name == "grid":
        from farm.search.grid import GridSearch

        return GridSearch(candidates)
    if name == "random":
        from farm.search.random_order import RandomSearch

        return RandomSearch(candidates, seed)
    if name == "tpe":
        from farm.search.tpe import TpeSearch

        return TpeSearch(group, candidates, seed, observations)
    if name == "model":
        from farm.search.model import ModelSearch

        return ModelSearch(group, candidates, seed, observations, limits)
    raise ValueError(f"unknown search strategy {name!r}; known: {', '.join(STRATEGIES)}")
