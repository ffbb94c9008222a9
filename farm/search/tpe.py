"""`tpe`: Optuna's tree-structured Parzen estimator through ask/tell.

The space is conditional: the variant first, then each axis of that variant's candidates as an index
into its sorted values (an ordered integer, so TPE's Parzen windows see 64 beside 128). The config
space's own legality is the constraint: a sampled combination that is no candidate (a prune rule of
kernels/space.py dropped it) is told PRUNED without measuring (TPE counts it among the bad trials and
samples again, up to MAX_TRIES per point, then takes a random candidate left); a failed measurement
is told FAIL. A constant liar (the sampler's own) keeps batches in flight while workers compile ahead.
The first trials are the best configs of the nearest measured shapes (observations), where there are any.
"""

from __future__ import annotations

import dataclasses
import random
import warnings
from collections.abc import Sequence

import optuna
from optuna.trial import TrialState

from farm.plan import Point
from farm.search.group import Group, Ledger
from farm.search.observations import Observations, nearest_best_points
from kernels import MatmulConfig

# Each a TPE parameter: every field of a config, the variant-specific extras as one.
AXES = tuple(f.name for f in dataclasses.fields(MatmulConfig))
# Sampled combinations tried per point asked before a random candidate left stands in. Every try is
# a trial TPE samples from (its cost grows with the trials), and late in a search most tries land on
# points already asked: 16 keeps draining a 300-point space to seconds.
MAX_TRIES = 16
# Known good configs tried first (the nearest measured shapes' best), and random trials before TPE's
# model starts: at 10% of a 50-config grid a search has 5 points, so Optuna's default of 10 random
# startup trials would leave TPE nothing to do.
SEED_POINTS = 2
STARTUP_TRIALS = 3

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _values(point: Point) -> tuple:
    return tuple(getattr(point.config, axis) for axis in AXES)


class TpeSearch:
    def __init__(
        self, group: Group, candidates: Sequence[Point], seed: int, observations: Observations | None = None
    ):
        self.ledger = Ledger(candidates)
        self.rng = random.Random(seed)
        self.by_params: dict[tuple, Point] = {(p.variant, _values(p)): p for p in self.ledger.candidates}
        self.variants = sorted({p.variant for p in self.ledger.candidates})
        # per variant and axis: the sorted values its candidates use (axes of one value are not sampled)
        self.axis_values: dict[str, dict[str, list]] = {}
        for variant in self.variants:
            mine = [_values(p) for p in self.ledger.candidates if p.variant == variant]
            self.axis_values[variant] = {
                axis: sorted({v[i] for v in mine}, key=repr)
                if axis in ("input_precision", "extras")
                else sorted({v[i] for v in mine})
                for i, axis in enumerate(AXES)
            }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(
                constant_liar=True, seed=seed, n_startup_trials=STARTUP_TRIALS
            )
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self.trials: dict[Point, optuna.trial.Trial] = {}  # asked, not told yet
        for point in nearest_best_points(observations, group.shape, self.ledger.candidates, SEED_POINTS):
            self.study.enqueue_trial(self._params(point))

    def _params(self, point: Point) -> dict:
        values = dict(zip(AXES, _values(point)))
        params = {"variant": point.variant}
        for axis, choices in self.axis_values[point.variant].items():
            if len(choices) > 1:
                params[f"{point.variant}:{axis}"] = choices.index(values[axis])
        return params

    def _sample(self, trial: optuna.trial.Trial) -> Point | None:
        variant = trial.suggest_categorical("variant", self.variants)
        values = []
        for axis, choices in self.axis_values[variant].items():
            if len(choices) > 1:
                values.append(choices[trial.suggest_int(f"{variant}:{axis}", 0, len(choices) - 1)])
            else:
                values.append(choices[0])
        return self.by_params.get((variant, tuple(values)))

    def _next(self) -> Point | None:
        for _ in range(MAX_TRIES):
            trial = self.study.ask()
            point = self._sample(trial)
            if point is None:  # pruned by the config space: not a candidate
                self.study.tell(trial, state=TrialState.PRUNED)
            elif point in self.ledger.results:  # measured: its result again, at no cost
                self._tell_trial(trial, self.ledger.results[point])
            elif point in self.ledger.asked:  # in flight: nothing to learn yet
                self.study.tell(trial, state=TrialState.FAIL)
            else:
                self.trials[point] = trial
                return point
        left = self.ledger.left
        if not left:
            return None
        point = self.rng.choice(left)
        self.study.enqueue_trial(self._params(point))
        self.trials[point] = self.study.ask()
        self._sample(self.trials[point])
        return point

    def _tell_trial(self, trial: optuna.trial.Trial, ms: float | None) -> None:
        if ms is None:
            self.study.tell(trial, state=TrialState.FAIL)
        else:
            self.study.tell(trial, ms)

    def ask(self, n: int) -> list[Point]:
        out: list[Point] = []
        while len(out) < n and len(self.ledger.asked) < len(self.ledger.candidates):
            point = self._next()
            if point is None:
                break
            self.ledger.mark_asked([point])
            out.append(point)
        return out

    def tell(self, point: Point, ms: float | None) -> None:
        if not self.ledger.record(point, ms):
            return
        trial = self.trials.pop(point, None)
        if trial is None:  # stored before this search started (a resumed sweep)
            self.study.enqueue_trial(self._params(point))
            trial = self.study.ask()
            self._sample(trial)
        self._tell_trial(trial, ms)
