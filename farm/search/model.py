"""`model`: a gradient-boosted cost model ranks every candidate; the best-ranked are measured in batches.

- Base model: scikit-learn's HistGradientBoostingRegressor on the observations' ok rows (other
  shapes, other studies), learning log(ms / roofline ms) from farm/search/features.py. It depends on
  the rows alone, so it is fitted once per Observations and shared by every search handed them.
- Refit as results arrive: before each batch, the group's own results correct the base ranking. Each
  result's residual (measured minus predicted) spreads to the candidates near it in config space
  (a Gaussian kernel over the config features in units of their spread within the group), shrunk
  towards the group's mean residual: a config whose neighbours ran slower than predicted drops. With
  no observations at all, the group's own results fit the boosted model itself once OWN_FIT_MIN
  have arrived; before that a roofline heuristic ranks (high tile intensity, full tiles, full waves).
- Seeds: the best configs of the nearest measured shapes go first, interleaved with the model's picks.
- Exploration: every EXPLORE_EVERY-th point is a random candidate left, so that a wrong model still
  samples the space.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np

from farm.metrics import NOMINAL_GPU, DeviceLimits
from farm.plan import Point
from farm.search.features import CONFIG_FEATURES, FEATURES, observation_matrix, point_matrix, target
from farm.search.group import Group, Ledger
from farm.search.observations import Observations, nearest_best_points

SEED_POINTS = 1
SEED_EVERY = 2  # a seed at every second point, the model's pick at the others, until the seeds run out
EXPLORE_EVERY = 7  # one random point in seven: 14% of the points asked
# Fewer rows than this and the base model is not fitted (a handful of rows fit noise).
MIN_TRAIN_ROWS = 20
OWN_FIT_MIN = 12
# The in-group correction: kernel width in standard deviations of each config feature, and the weight
# of the group's mean residual against a neighbour's own (a lone far neighbour moves a prediction little).
KERNEL_WIDTH = 1.0
SHRINK = 0.5
BOOSTING = {
    "max_iter": 150,
    "learning_rate": 0.1,
    "max_leaf_nodes": 8,
    "min_samples_leaf": 10,
    "l2_regularization": 1.0,
    "early_stopping": False,
    "random_state": 0,
}
_COLUMN = {name: i for i, name in enumerate(FEATURES)}


def fit_booster(x: np.ndarray, y: np.ndarray):
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(**BOOSTING).fit(x, y)


def base_model(observations: Observations | None):
    """The boosted model of these observations, fitted once (their cache); None for too few rows."""
    if observations is None:
        return None
    if "model" not in observations.cache:
        x, y = observation_matrix(observations)
        observations.cache["model"] = fit_booster(x, y) if len(y) >= MIN_TRAIN_ROWS else None
    return observations.cache["model"]


def heuristic_score(x: np.ndarray) -> np.ndarray:
    """Lower is better, no data needed: a tile that reuses each loaded element more, pads less and
    fills its last wave runs nearer the roof."""
    waves = x[:, _COLUMN["waves"]]
    wave_fill = waves / np.ceil(waves)
    return -(np.log(x[:, _COLUMN["tile_intensity"]]) + np.log(x[:, _COLUMN["tile_fill"]]) + np.log(wave_fill))


class ModelSearch:
    def __init__(
        self,
        group: Group,
        candidates: Sequence[Point],
        seed: int,
        observations: Observations | None = None,
        limits: DeviceLimits = NOMINAL_GPU,
    ):
        self.group = group
        self.ledger = Ledger(candidates)
        self.rng = random.Random(seed)
        self.x = point_matrix(self.ledger.candidates, limits)
        model = base_model(observations)
        self.has_base = model is not None
        self.base = model.predict(self.x) if model is not None else heuristic_score(self.x)
        config_columns = [_COLUMN[c] for c in CONFIG_FEATURES]
        spread = self.x[:, config_columns].std(axis=0)
        self.config_x = self.x[:, config_columns] / np.where(spread > 0, spread, 1.0)
        self.seeds = nearest_best_points(observations, group.shape, self.ledger.candidates, SEED_POINTS)
        self.predicted = self.base
        self.fitted_on = -1  # results the prediction has seen
        self.n_asked = 0

    def _targets(self) -> tuple[list[int], np.ndarray]:
        ok = [(self.ledger.index[p], ms) for p, ms in self.ledger.results.items() if ms is not None]
        rows = [i for i, _ in ok]
        ys = np.array(
            [target(ms, self.group.m, self.group.n, self.group.k, self.group.dtype) for _, ms in ok]
        )
        return rows, ys

    def refit(self) -> None:
        """The prediction with every result told so far (no-op when nothing new came back)."""
        if len(self.ledger.results) == self.fitted_on:
            return
        self.fitted_on = len(self.ledger.results)
        rows, ys = self._targets()
        base = self.base
        if not self.has_base and len(rows) >= OWN_FIT_MIN:
            base = fit_booster(self.x[rows], ys).predict(self.x)
        elif not self.has_base and rows:
            # the heuristic is no time: put it on the results' scale before correcting it
            base = base - base[rows].mean() + ys.mean()
        if not rows:
            self.predicted = base
            return
        residuals = ys - base[rows]
        mean = residuals.mean()
        d2 = ((self.config_x[:, None, :] - self.config_x[None, rows, :]) ** 2).sum(axis=2)
        weights = np.exp(-d2 / (2 * KERNEL_WIDTH**2))
        self.predicted = base + mean + weights @ (residuals - mean) / (weights.sum(axis=1) + SHRINK)

    def _pick(self, ranked: list[int], taken: set[Point]) -> Point | None:
        left = [p for p in self.ledger.left if p not in taken]
        if not left:
            return None
        self.n_asked += 1
        if self.n_asked % EXPLORE_EVERY == 0:
            return self.rng.choice(left)
        seeds = [p for p in self.seeds if p not in self.ledger.asked and p not in taken]
        if seeds and self.n_asked % SEED_EVERY == 0:
            return seeds[0]
        for i in ranked:
            point = self.ledger.candidates[i]
            if point not in self.ledger.asked and point not in taken:
                return point
        return None

    def ask(self, n: int) -> list[Point]:
        self.refit()
        ranked = list(np.argsort(self.predicted, kind="stable"))
        out: list[Point] = []
        taken: set[Point] = set()
        while len(out) < n:
            point = self._pick(ranked, taken)
            if point is None:
                break
            taken.add(point)
            out.append(point)
        return self.ledger.mark_asked(out)

    def tell(self, point: Point, ms: float | None) -> None:
        self.ledger.record(point, ms)

    def predictions_ms(self) -> dict[Point, float]:
        """The model's time of every candidate (the dashboard's predicted against measured)."""
        self.refit()
        g = self.group
        roof = math.exp(target(1.0, g.m, g.n, g.k, g.dtype))  # log(1 / roof) -> 1 / roof
        return {p: math.exp(y) / roof for p, y in zip(self.ledger.candidates, self.predicted)}
