"""The strategies by name: `make_strategy` builds one for a group (the interface farm/source.py uses)."""

from __future__ import annotations

from collections.abc import Sequence

from farm.metrics import NOMINAL_GPU, DeviceLimits
from farm.plan import Point
from farm.search.group import Group, Strategy
from farm.search.observations import Observations

STRATEGIES = ("grid", "random", "tpe", "model")
# Replay's comparisons, not for a sweep: `model` before it judged its prior (no agreement, variant
# round or pattern search), and `model` ordering its prior by a top-decile classifier (LFBO) or by
# the classifier's and the regressor's orders averaged.
REPLAY_STRATEGIES = (*STRATEGIES, "model_prior", "model_lfbo", "model_blend")


def make_strategy(
    name: str,
    group: Group,
    candidates: Sequence[Point],
    *,
    seed: int,
    observations: Observations | None = None,
    limits: DeviceLimits = NOMINAL_GPU,
    budget: int | None = None,
) -> Strategy:
    """A strategy over a group's candidates (every legal point of the searched variants, library
    baselines excluded: the caller measures those itself). grid: the candidates in the given order.
    observations: rows for `model` and for the nearest-shape seeds of `model` and `tpe`. A replay holds
    this group's shape out of them (farm/search/replay.py `check_no_leak`); in a sweep, rows of the
    same shape (another GPU's, an older code version's) are what the database knows, and seed first.
    budget: the points the caller will ask for in all (`model` spends its last round on the
    neighbours of its best; None: it never knows a round is the last). Optuna and scikit-learn load
    only when asked for."""
    if name == "grid":
        from farm.search.grid import GridSearch

        return GridSearch(candidates)
    if name == "random":
        from farm.search.random_order import RandomSearch

        return RandomSearch(candidates, seed)
    if name == "tpe":
        from farm.search.tpe import TpeSearch

        return TpeSearch(group, candidates, seed, observations)
    if name in ("model", "model_prior", "model_lfbo", "model_blend"):
        from farm.search.model import ModelSearch

        return ModelSearch(
            group,
            candidates,
            seed,
            observations,
            limits,
            budget=budget,
            adaptive=name != "model_prior",
            learner={"model_lfbo": "lfbo", "model_blend": "blend"}.get(name, "regressor"),
        )
    raise ValueError(f"unknown search strategy {name!r}; known: {', '.join(REPLAY_STRATEGIES)}")
