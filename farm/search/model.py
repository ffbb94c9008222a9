"""`model`: a gradient-boosted cost model ranks every candidate; the group's own results decide how far
to believe it.

- Prior: scikit-learn's HistGradientBoostingRegressor on the observations' ok rows (other shapes,
  other studies), learning log(ms / roofline ms) from farm/search/features.py. It depends on the rows
  alone, so it is fitted once per Observations and shared by every search handed them. The `lfbo`
  learner orders the candidates by a HistGradientBoostingClassifier of "in the top 10% of its shape"
  instead (on the regressor's scale, so that what follows is the same); replay keeps the regressor
  (docs/design.md, "Search"). With no observations, a roofline heuristic ranks (high tile intensity,
  full tiles, full waves) until OWN_FIT_MIN results fit the boosted model on the group's own.
- First round: every searched variant's best-predicted candidate, so that a variant the training
  rows lack or misjudge is measured once before the budget goes anywhere.
- After each round, the prior is held against what the group measured: its rank agreement (Spearman)
  with the measured times on the group's own points is its weight against a model fitted on the
  group's own results alone (ridge over the config features and their squares), so a prior that
  ranks the group's points backwards stops steering. Exploration rises from one point in seven to
  one in three while neither ranks well (the own model judged leave-one-out).
  Each result's residual also spreads to its neighbours in config space (a Gaussian kernel
  shrunk towards the group's mean residual), which moves the ranking near what was measured.
- Seeds: the best configs of the nearest measured shapes, interleaved with the model's picks.
- Last two rounds: pattern search. The neighbours of the best results so far, one axis step at a
  time (the next tile size, group_m, split, warps or stages of the variant; a tile step with a
  stages or warps step; the same config in another variant; block_m and block_n swapped), where
  the near-ties that decide "within 2%" live. The last round alone where the prior was found to
  rank the group's points backwards.

`adaptive=False` is the search before the agreement, the variant round and the pattern search (the
replay's `model_prior`: the comparison that shows what they bought).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np

from farm.metrics import NOMINAL_GPU, DeviceLimits
from farm.plan import Point
from farm.search.features import (
    CONFIG_FEATURES,
    CONFIG_NUMERIC,
    FEATURES,
    observation_matrix,
    point_matrix,
    target,
)
from farm.search.group import Group, Ledger
from farm.search.observations import Observations, nearest_best_points

LEARNERS = ("regressor", "lfbo", "blend")
SEED_POINTS = 1
SAME_SHAPE_FIRST = 1  # the best config of this shape's own earlier rows, measured first
SEED_EVERY = 2  # a seed at every second point, the model's pick at the others, until the seeds run out
EXPLORE_EVERY = 7  # one random point in seven: 14% of the points asked
EXPLORE_EVERY_DOUBTED = 3  # while neither the prior nor the group's own model ranks the group's points
DOUBT = 0.3  # ... above this rank correlation
# Fewer rows than this and the base model is not fitted (a handful of rows fit noise).
MIN_TRAIN_ROWS = 20
OWN_FIT_MIN = 12
# Results before the prior is judged: Spearman over 3 points takes 4 values, and a round of a 10%
# budget is 2 points on the smallest groups.
AGREE_MIN = 3
OWN_MODEL_MIN = 5  # results before the group's own model is fitted (and judged leave-one-out)
RIDGE = 3.0  # the own model's ridge penalty, in units of its standardised features
# Results held before the pattern search starts, and the best results whose neighbours it tries.
REFINE_MIN = 4
REFINE_FROM = 3
# Rounds at the end of the budget that go to the pattern search. Replay at 10% on the H100 study
# (3 seeds, --train the H200 demo), share within 2%, family_out / cross_study: the last round 0.92 /
# 0.77; the last two 0.95 / 0.92; the last two with half of the first of them left to the model 0.87
# / 0.83. Where the prior ranks the group's points backwards (the planted test: Spearman -0.9) the
# group's own model is still learning where to look, and a second round of neighbours of a poor best
# cost the planted search 6 of 10 seeds: there the last round alone.
REFINE_ROUNDS = 2
FOUND_OUT = -0.8  # the prior's rank agreement below which only the last round is the pattern search
TOP_SHARE = 0.1  # lfbo's label: in the top 10% of its shape
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
_AXES = ("block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages")
_STAGES, _WARPS, _SPLIT = _AXES.index("num_stages"), _AXES.index("num_warps"), _AXES.index("split_k")
_TILE = slice(0, 3)  # block_m, block_n, block_k


def one_thread():
    """OpenMP held to one thread around a fit or a prediction: the fits are small (7,000 rows take
    1.1 s on one core) and a pool of spinning threads loses to a busy host; a 120-row fit took
    5-21 s with every thread on 2 shared cores, 0.3 s with one."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="openmp")


def fit_booster(x: np.ndarray, y: np.ndarray):
    from sklearn.ensemble import HistGradientBoostingRegressor

    with one_thread():
        return HistGradientBoostingRegressor(**BOOSTING).fit(x, y)


def base_model(observations: Observations | None):
    """The boosted model of these observations, fitted once (their cache); None for too few rows."""
    if observations is None:
        return None
    if "model" not in observations.cache:
        x, y = observation_matrix(observations)
        observations.cache["model"] = fit_booster(x, y) if len(y) >= MIN_TRAIN_ROWS else None
    return observations.cache["model"]


def top_labels(observations: Observations) -> np.ndarray:
    """1 for a row in the fastest TOP_SHARE of its (gpu, dtype, shape), at least its fastest row."""
    rows = observations.rows
    rows = rows[rows["block_m"].astype(int) > 0]  # observation_matrix skips library baselines too
    rank = rows.groupby(["gpu_name", "dtype", "m", "n", "k"])["ms"].rank(method="min", pct=False)
    size = rows.groupby(["gpu_name", "dtype", "m", "n", "k"])["ms"].transform("size")
    return (rank <= np.maximum(1, np.ceil(TOP_SHARE * size))).to_numpy(dtype=int)


def top_classifier(observations: Observations | None):
    """Helion's LFBO: a classifier of "in the top 10% of its shape", fitted once (the cache); None for
    too few rows or a single class."""
    if observations is None:
        return None
    if "top_classifier" not in observations.cache:
        from sklearn.ensemble import HistGradientBoostingClassifier

        x, _ = observation_matrix(observations)
        labels = top_labels(observations) if len(x) else np.zeros(0, dtype=int)
        fit = len(labels) >= MIN_TRAIN_ROWS and 0 < labels.sum() < len(labels)
        with one_thread():
            observations.cache["top_classifier"] = (
                HistGradientBoostingClassifier(**BOOSTING).fit(x, labels) if fit else None
            )
    return observations.cache["top_classifier"]


def heuristic_score(x: np.ndarray) -> np.ndarray:
    """Lower is better, no data needed: a tile that reuses each loaded element more, pads less and
    fills its last wave runs nearer the roof."""
    waves = x[:, _COLUMN["waves"]]
    wave_fill = waves / np.ceil(waves)
    return -(np.log(x[:, _COLUMN["tile_intensity"]]) + np.log(x[:, _COLUMN["tile_fill"]]) + np.log(wave_fill))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation (scipy's, ties averaged); 0 where either side is constant (scipy's nan)."""
    from scipy.stats import spearmanr  # 0.8 s cold, nothing once sklearn.ensemble (the prior) imported it

    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(spearmanr(a, b).statistic)


class ModelSearch:
    def __init__(
        self,
        group: Group,
        candidates: Sequence[Point],
        seed: int,
        observations: Observations | None = None,
        limits: DeviceLimits = NOMINAL_GPU,
        *,
        budget: int | None = None,
        adaptive: bool = True,
        learner: str = "regressor",
    ):
        if learner not in LEARNERS:
            raise ValueError(f"unknown learner {learner!r}; known: {', '.join(LEARNERS)}")
        self.group = group
        self.ledger = Ledger(candidates)
        self.rng = random.Random(seed)
        self.budget = budget
        self.adaptive = adaptive
        self.x = point_matrix(self.ledger.candidates, limits)
        model = base_model(observations)
        self.has_base = model is not None
        self.heuristic = heuristic_score(self.x)
        with one_thread():
            self.base = model.predict(self.x) if model is not None else self.heuristic
        if learner != "regressor" and model is not None and (classifier := top_classifier(observations)):
            # the classifier's order on the regressor's scale: the in-group correction reads times
            with one_thread():
                top = classifier.predict_proba(self.x)[:, 1]
            if learner == "blend":  # the two orders averaged
                from scipy.stats import rankdata

                top = -(rankdata(-top) + rankdata(self.base))
            order = np.argsort(-top, kind="stable")
            base = np.empty_like(self.base)
            base[order] = np.sort(self.base)
            self.base = base
        config_columns = [_COLUMN[c] for c in CONFIG_FEATURES]
        spread = self.x[:, config_columns].std(axis=0)
        self.config_x = self.x[:, config_columns] / np.where(spread > 0, spread, 1.0)
        # the own model's inputs: the standardised config features and the numeric ones squared
        centred = self.config_x - self.config_x.mean(axis=0)
        self.own_x = np.hstack([centred, centred[:, : len(CONFIG_NUMERIC)] ** 2])
        self.seeds = nearest_best_points(observations, group.shape, self.ledger.candidates, SEED_POINTS)
        # this very shape measured before (older kernels, another GPU): its best config goes before
        # the variant round. Replay under other_code, H100 study, 3 seeds: 0.95 of searches within
        # 2%; with the variant round first 0.70, against 0.92 for the search that trusted its prior
        # (two of its best cost the planted reversed prior 3 of its 8 seeds within 5%).
        known = observations is not None and group.shape in observations.shapes()
        self.first = (
            nearest_best_points(observations, group.shape, self.ledger.candidates, SAME_SHAPE_FIRST)
            if known and adaptive
            else []
        )
        self.coverage = self._variant_coverage() if adaptive else []
        self.neighbours = self._neighbour_table() if adaptive else {}
        self.predicted = self.base
        self.trust = 1.0  # the prior's weight in the prediction (the agreement's, once judged)
        self.agreement = (math.nan, math.nan)  # (prior, own model) rank correlation on the group's points
        self.fitted_on = -1  # results the prediction has seen
        self.n_asked = 0

    # -- what the first and last rounds try

    def _variant_coverage(self) -> list[Point]:
        """Each variant's best-predicted candidate, the best-predicted variant first."""
        best: dict[str, int] = {}
        for i in np.argsort(self.base, kind="stable"):
            best.setdefault(self.ledger.candidates[i].variant, int(i))
        return [self.ledger.candidates[i] for i in best.values()]

    def _neighbour_table(self) -> dict[int, list[int]]:
        """Per candidate, the candidates one axis step away (see the module's docstring)."""
        cands = self.ledger.candidates

        def key(p: Point) -> tuple:
            c = p.config
            return (c.input_precision, c.extras, tuple(getattr(c, a) for a in _AXES))

        at = {(p.variant, key(p)): i for i, p in enumerate(cands)}
        values: dict[str, list[list[int]]] = {}
        for p in cands:
            per = values.setdefault(p.variant, [set() for _ in _AXES])
            for j, a in enumerate(_AXES):
                per[j].add(getattr(p.config, a))
        steps = {v: [sorted(s) for s in per] for v, per in values.items()}
        variants = sorted(values)
        table: dict[int, list[int]] = {}
        for i, p in enumerate(cands):
            precision, extras, axes = key(p)
            near: list[tuple] = []
            ladders = steps[p.variant]
            for j, ladder in enumerate(ladders):
                pos = ladder.index(axes[j])
                for q in (pos - 1, pos + 1):
                    if 0 <= q < len(ladder):
                        near.append((p.variant, (*axes[:j], ladder[q], *axes[j + 1 :])))
            # a tile step with a stages or warps step: the shared memory a larger tile takes from the
            # pipeline (128x256x32 at 4 stages and 128x256x64 at 3, 10% apart on an H100), the warps
            # a smaller tile needs (777x5555x999's best, 128x64 at 4 warps, is 5% ahead of 128x128 at
            # 8; 128x64 at 8 warps and 128x128 at 4 are 34% and 102% behind)
            tile_steps = [a for v, a in near if v == p.variant and a[_TILE] != axes[_TILE]]
            for j in (_STAGES, _WARPS):
                pos = ladders[j].index(axes[j])
                for a in tile_steps:
                    for q in (pos - 1, pos + 1):
                        if 0 <= q < len(ladders[j]):
                            near.append((p.variant, (*a[:j], ladders[j][q], *a[j + 1 :])))
            near.append((p.variant, (axes[1], axes[0], *axes[2:])))
            # the same config in another variant; where that variant has no such split (grouped has
            # none), at each split it has: splitk 128x128 split 4 is 26% behind grouped's 128x128 on
            # 2999x1501x1234
            for v in variants:
                if v != p.variant:
                    splits = [axes[_SPLIT]] if axes[_SPLIT] in steps[v][_SPLIT] else steps[v][_SPLIT]
                    near += [(v, (*axes[:_SPLIT], q, *axes[_SPLIT + 1 :])) for q in splits]
            found = [at.get((v, (precision, extras, a))) for v, a in near]
            table[i] = [f for f in dict.fromkeys(found) if f is not None and f != i]
        return table

    def _refining(self, n: int) -> bool:
        """This ask goes to the pattern search: one of the budget's last REFINE_ROUNDS rounds (its last
        alone while the prior is found out: the group's own model is still learning where to look),
        once enough results are back to know where the best is."""
        if not self.adaptive or self.budget is None:
            return False
        if sum(ms is not None for ms in self.ledger.results.values()) < REFINE_MIN:
            return False
        refine_rounds = 1 if self.agreement[0] < FOUND_OUT else REFINE_ROUNDS
        return len(self.ledger.asked) + refine_rounds * n >= self.budget

    def _refinement(self) -> list[int]:
        """The neighbours of the best results so far, the best's first, each best's by prediction."""
        ok = sorted((ms, self.ledger.index[p]) for p, ms in self.ledger.results.items() if ms is not None)
        out: list[int] = []
        for _, i in ok[:REFINE_FROM]:
            near = sorted(self.neighbours.get(i, []), key=lambda j: self.predicted[j])
            out += [j for j in near if self.ledger.candidates[j] not in self.ledger.asked and j not in out]
        return out

    # -- the prediction

    def _targets(self) -> tuple[list[int], np.ndarray]:
        ok = [(self.ledger.index[p], ms) for p, ms in self.ledger.results.items() if ms is not None]
        rows = [i for i, _ in ok]
        ys = np.array(
            [target(ms, self.group.m, self.group.n, self.group.k, self.group.dtype) for _, ms in ok]
        )
        return rows, ys

    def _corrected(self, base: np.ndarray, rows: list[int], ys: np.ndarray) -> np.ndarray:
        residuals = ys - base[rows]
        mean = residuals.mean()
        d2 = ((self.config_x[:, None, :] - self.config_x[None, rows, :]) ** 2).sum(axis=2)
        weights = np.exp(-d2 / (2 * KERNEL_WIDTH**2))
        return base + mean + weights @ (residuals - mean) / (weights.sum(axis=1) + SHRINK)

    def _own(self, rows: list[int], ys: np.ndarray) -> tuple[np.ndarray, float]:
        """The group's own model (ridge, then its residuals spread by the kernel) over every candidate,
        and its leave-one-out rank correlation with the measured times (0 before OWN_MODEL_MIN
        results: the roofline heuristic on the results' scale stands in)."""
        if len(rows) < OWN_MODEL_MIN:
            h = self.heuristic
            return self._corrected(h - h[rows].mean() + ys.mean(), rows, ys), 0.0
        from sklearn.linear_model import Ridge
        from sklearn.model_selection import LeaveOneOut, cross_val_predict

        # Ridge penalises the coefficients alone (it centres x and y on the fitted rows first: the
        # intercept is free) and leaves x unscaled, so RIDGE stays in units of own_x's standardisation
        # over every candidate (a StandardScaler would rescale by the few fitted rows instead). The
        # leave-one-out refits (cross_val_predict, 27 ms at 24 rows against 19 for a loop of fits: the same
        # predictions) cost about 5 s of the default replay's shape_out `model` searches (41 s); RidgeCV's
        # one-fit leave-one-out predictions need scikit-learn 1.5 (the floor is 1.4).
        ridge = Ridge(alpha=RIDGE)
        x = self.own_x[rows]
        loo = cross_val_predict(ridge, x, ys, cv=LeaveOneOut())
        own = ridge.fit(x, ys).predict(self.own_x)
        return self._corrected(own, rows, ys), spearman(loo, ys)

    def refit(self) -> None:
        """The prediction with every result told so far (no-op when nothing new came back)."""
        if len(self.ledger.results) == self.fitted_on:
            return
        self.fitted_on = len(self.ledger.results)
        rows, ys = self._targets()
        base = self.base
        if not self.has_base and len(rows) >= OWN_FIT_MIN:
            booster = fit_booster(self.x[rows], ys)
            with one_thread():  # as every other prediction: a search refits after each result
                base = booster.predict(self.x)
        elif not self.has_base and rows:
            # the heuristic is no time: put it on the results' scale before correcting it
            base = base - base[rows].mean() + ys.mean()
        if not rows:
            self.predicted = base
            return
        corrected = self._corrected(base, rows, ys)
        if not self.adaptive or len(rows) < AGREE_MIN:
            self.predicted = corrected
            return
        prior_agrees = spearman(self.base[rows], ys)
        own, own_agrees = self._own(rows, ys)
        # the prior's weight is its rank agreement with what the group measured (honest: it never saw
        # these points): a prior that ranks them backwards or at random stops steering, and the group's
        # own model takes the rest
        # (0.25 or 0.5 added to the agreement first, against the near-ties of the prior's own top
        # picks, did no better in replay, with one pattern-search round: H100 study family_out 0.90
        # and 0.87 within 2% against 0.92, cross_study 0.79 and 0.81 against 0.77)
        self.trust = min(max(prior_agrees, 0.0), 1.0)
        self.agreement = (prior_agrees, own_agrees)
        self.predicted = self.trust * corrected + (1 - self.trust) * own

    # -- asking

    def _explore_every(self) -> int:
        if self.adaptive and self.fitted_on > 0 and max(self.agreement) < DOUBT:
            return EXPLORE_EVERY_DOUBTED
        return EXPLORE_EVERY

    def _pick(self, ranked: list[int], taken: set[Point]) -> Point | None:
        left = [p for p in self.ledger.left if p not in taken]
        if not left:
            return None
        for point in (*self.first, *self.coverage):
            if point not in self.ledger.asked and point not in taken:
                return point
        self.n_asked += 1
        if self.n_asked % self._explore_every() == 0:
            return self.rng.choice(left)
        # the seeds are the training rows' best: a doubted prior's seeds are doubted with it
        seeds = [p for p in self.seeds if p not in self.ledger.asked and p not in taken and self.trust >= 0.5]
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
        if self._refining(n):
            for i in self._refinement()[:n]:
                out.append(self.ledger.candidates[i])
                taken.add(out[-1])
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
