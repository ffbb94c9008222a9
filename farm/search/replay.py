"""Simulation mode: replay stored exhaustive sweeps point by point and score a strategy against them.

Each (gpu, dtype, shape) group of a stored sweep is a search whose measurements are already known:
the strategy asks, the replay answers with the stored time (a row that did not end ok answers as a
failure), in rounds of a quarter of the budget as farm/source.py deals them. Per budget it reports
the share of groups (over groups and seeds) within 1%, 2% and 5% of the group's exhaustive best over
its searched candidates (library baselines are no candidates), the worst miss, and Kernel Tuner's
methodology score (strategy - random) / (optimum - random), with random's expectation computed
exactly (`expected_random_best`): 0 is random search, 1 finds the optimum every time.

The model learns only from rows the protocol allows, and `check_no_leak` refuses (LeakError) any
training set holding the replayed shape:
- shape_out: every shape of the replayed and --train databases but the replayed one;
- family_out: also without the shapes that share two of m, n, k with it (same position);
- cross_study: the --train databases alone (still without the replayed shape);
- other_code: each code version's groups, trained on the replayed databases' rows of every other
  code version of the same GPU and dtype, the replayed shape included (what a sweep of new kernels
  knows: the old kernels' times of the same points); the leak is a row of the replayed code version.

By default a search sees the stored times themselves; with `RepeatNoise` it sees each as one more
measurement (the instrument's run-to-run noise) and is judged by the stored time of the point it names,
with or without a confirm round of its fastest (`search_best`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sqlalchemy import select

from db.export import reading
from db.observations import OBSERVATION_COLUMNS, SWEEP_COLUMNS
from db.queries import frame, view
from db.queries.runs import compare_runs, default_comparison
from farm.plan import Point
from farm.search.budget import Budget
from farm.search.group import Group
from farm.search.observations import Observations, _is_baseline, row_config
from farm.search.strategies import make_strategy

PROTOCOLS = ("shape_out", "family_out", "cross_study", "other_code")
WITHIN = (0.01, 0.02, 0.05)
RESULT_COLUMNS = (
    "strategy",
    "protocol",
    "budget",
    "share_within_1pct",
    "share_within_2pct",
    "share_within_5pct",
    "worst_miss",
    "score",
)


class LeakError(RuntimeError):
    """A training set holds a row of the shape being replayed: the replay would grade a memory."""


@dataclass
class ReplayGroup:
    """One stored exhaustive search: its candidates and what each measured (None: not ok)."""

    gpu_name: str
    group: Group
    times: dict[Point, float | None]
    code_version: str = ""  # set where the groups are per code version (other_code)
    candidates: list[Point] = field(init=False)
    best_ms: float = field(init=False)
    # What a search that found no ok point ends with: the group's slowest ok time.
    nothing_ms: float = field(init=False)

    def __post_init__(self) -> None:
        self.candidates = list(self.times)
        ok = [ms for ms in self.times.values() if ms is not None]
        self.best_ms, self.nothing_ms = min(ok), max(ok)

    def sorted_outcomes(self) -> np.ndarray:
        """Every candidate's value to a search, ascending (failures as `nothing_ms`)."""
        return np.sort([self.nothing_ms if ms is None else ms for ms in self.times.values()])


def groups_from_rows(rows: pd.DataFrame, *, by_code_version: bool = False) -> list[ReplayGroup]:
    """The groups of a stored sweep's rows (db.observations.SWEEP_COLUMNS, and code_version where
    by_code_version: one group per code version of a shape, else a point's first row of any);
    groups with no ok candidate are left out (nothing to find)."""
    found: dict[tuple, dict[Point, float | None]] = {}
    for row in rows.to_dict("records"):
        if _is_baseline(row["variant"]) or int(row["block_m"]) == 0:
            continue
        m, n, k = int(row["m"]), int(row["n"]), int(row["k"])
        point = Point(row["variant"], row["dtype"], m, n, k, row_config(row))
        ms = float(row["ms"]) if row["status"] == "ok" and pd.notna(row["ms"]) else None
        code = str(row["code_version"]) if by_code_version else ""
        times = found.setdefault((code, row["gpu_name"], row["dtype"], m, n, k), {})
        times.setdefault(point, ms)  # a config that differs only in extras: the first row's
    return [
        ReplayGroup(gpu, Group(dtype, m, n, k), times, code_version=code)
        for (code, gpu, dtype, m, n, k), times in found.items()
        if any(ms is not None for ms in times.values())
    ]


def load_groups(
    urls: Sequence[str], *, by_code_version: bool = False
) -> tuple[list[ReplayGroup], Observations]:
    """The groups of the databases named and their ok rows (the replayed databases' observations,
    with their code_version column)."""
    v = view("results")
    frames = []
    for url in urls:
        with reading(url) as conn:
            frames.append(
                frame(conn, select(*(v.c[c] for c in (*SWEEP_COLUMNS, "code_version"))).order_by(v.c.id))
            )
    rows = pd.concat(frames, ignore_index=True)
    ok = rows[(rows["status"] == "ok") & rows["ms"].notna()]
    observations = Observations(ok[[*OBSERVATION_COLUMNS, "code_version"]].reset_index(drop=True))
    return groups_from_rows(rows, by_code_version=by_code_version), observations


def same_family(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    """Two shapes that share two of m, n, k (in place): 4096x4096x4096 and 4096x4096x14336."""
    return sum(x == y for x, y in zip(a, b)) >= 2


def excluded_shapes(shape: tuple[int, int, int], protocol: str, known: set[tuple[int, int, int]]) -> set:
    if protocol == "other_code":  # the shape's old-code rows are the prior under test
        return set()
    if protocol == "family_out":
        return {s for s in known if same_family(s, shape)} | {shape}
    return {shape}


def training_pool(
    gpu_name: str,
    dtype: str,
    protocol: str,
    replayed_rows: Observations,
    train: Observations,
    code_version: str = "",
) -> Observations:
    """Every row a search of this GPU and dtype may learn from before shapes are hidden: the --train
    databases' rows of the dtype, and under shape_out and family_out the replayed databases' of the
    GPU and dtype too; under other_code the replayed databases' rows of the GPU and dtype measured
    by any code version but `code_version` (the replayed one), alone."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    if protocol == "other_code":
        rows = replayed_rows.for_gpu(gpu_name, dtype).rows
        other = rows[rows["code_version"].astype(str) != code_version].reset_index(drop=True)
        return Observations(other)
    parts = [train.for_gpu(None, dtype).rows]
    if protocol != "cross_study":
        parts.append(replayed_rows.for_gpu(gpu_name, dtype).rows)
    parts = [p for p in parts if not p.empty]
    return Observations(pd.concat(parts, ignore_index=True)) if parts else Observations.empty()


def training_observations(replayed: ReplayGroup, protocol: str, pool: Observations) -> Observations:
    """What the protocol lets a search of `replayed` learn from: the pool without the shapes it hides
    (the pool itself where it holds none of them, so that its fitted model is shared)."""
    return pool.without_shapes(excluded_shapes(replayed.group.shape, protocol, pool.shapes()))


def check_no_leak(replayed: ReplayGroup, protocol: str, observations: Observations) -> None:
    """Raise LeakError if the training rows hold the replayed shape (or, under family_out, its family;
    under other_code, a row of the replayed code version, or rows that do not say their version)."""
    shape = replayed.group.shape
    if protocol == "other_code":
        rows = observations.rows
        if not rows.empty and "code_version" not in rows:
            raise LeakError("other_code: the training rows do not say which code version measured them")
        if not rows.empty and (rows["code_version"].astype(str) == replayed.code_version).any():
            raise LeakError(
                f"other_code: the training rows hold code version {replayed.code_version} while its "
                f"{shape[0]}x{shape[1]}x{shape[2]} ({replayed.group.dtype}, {replayed.gpu_name}) is replayed"
            )
        return
    for other in observations.shapes():
        if other == shape or (protocol == "family_out" and same_family(other, shape)):
            raise LeakError(
                f"{protocol}: the training rows hold {other[0]}x{other[1]}x{other[2]} while "
                f"{shape[0]}x{shape[1]}x{shape[2]} ({replayed.group.dtype}, {replayed.gpu_name}) is replayed"
            )


def expected_random_best(sorted_values: np.ndarray, draws: int) -> float:
    """The exact expected minimum of `draws` values drawn without replacement from `sorted_values`
    (ascending): the i-th smallest (1-based) is the minimum when it is drawn and the other draws - 1
    come from the N - i above it, so P = C(N - i, draws - 1) / C(N, draws)."""
    n = len(sorted_values)
    draws = min(max(draws, 1), n)
    total = math.comb(n, draws)
    return float(
        sum(
            v * math.comb(n - i, draws - 1)
            for i, v in enumerate(sorted_values.tolist(), start=1)
            if n - i >= draws - 1
        )
        / total
    )


def rounds(budget_points: int) -> int:
    """Points asked at once: a quarter of the budget, at least 2 (farm/source.py deals the same)."""
    return max(2, math.ceil(budget_points / 4))


@dataclass(frozen=True)
class RepeatNoise:
    """The instrument's noise on one measurement, for a replay that does not take the stored times for
    the truth a search sees: each measured time is the stored one times exp(r / sqrt 2) with a random
    sign, r drawn from `log_ratios`, log(b / a) of points two runs both timed (a difference of two
    measurements holds two draws of the noise: sqrt 2). Draws are independent, where a power-capped
    stretch moves neighbouring points together: the harder case for naming a best."""

    log_ratios: np.ndarray

    @classmethod
    def from_database(cls, url: str) -> RepeatNoise:
        """The noise of the two runs of `url` that `farm compare` takes by default (the newest pair that
        shares points); ValueError where no two runs share a point."""
        with reading(url) as conn:
            pair = default_comparison(conn)
            if pair is None:
                raise ValueError(f"{url}: no two runs share a point, so it holds no repeat noise")
            ratios = compare_runs(conn, *pair).points.ratio_b_over_a.to_numpy(dtype=float)
        if not len(ratios):
            raise ValueError(f"{url}: runs {pair[0]} and {pair[1]} share no ok point: no repeat noise")
        return cls(np.log(ratios))

    def measured(self, ms: float, rng: np.random.Generator) -> float:
        r = self.log_ratios[rng.integers(len(self.log_ratios))] / math.sqrt(2)
        return ms * math.exp(r if rng.random() < 0.5 else -r)


def search_best(
    strategy,
    replayed: ReplayGroup,
    budget_points: int,
    *,
    noise: RepeatNoise | None = None,
    rng: np.random.Generator | None = None,
    confirm: int = 0,
) -> tuple[float, int]:
    """Run one search against the stored times: (the stored time of the point it names best, points
    measured). The search sees each stored time, or with `noise` a measurement of it, and names the
    point it saw fastest; with `confirm` its `confirm` fastest are measured once more after the budget
    (a confirm round, its points on top of the budget and counted) and it names the least mean of
    each one's two. A point asked twice, or one that is no candidate, is a bug in the strategy
    (AssertionError)."""
    rng = rng if rng is not None else np.random.default_rng(0)

    def measure(ms: float) -> float:
        return ms if noise is None else noise.measured(ms, rng)

    asked: set[Point] = set()
    seen: dict[Point, list[float]] = {}  # ok points: what the search measured
    while len(asked) < budget_points:
        points = strategy.ask(min(rounds(budget_points), budget_points - len(asked)))
        if not points:
            break
        for point in points:
            assert point not in asked, f"asked twice: {point.label()}"
            assert point in replayed.times, f"not a candidate: {point.label()}"
            asked.add(point)
        for point in points:
            ms = replayed.times[point]
            if ms is not None:
                seen[point] = [measure(ms)]
            strategy.tell(point, seen[point][0] if ms is not None else None)
    if not seen:
        return replayed.nothing_ms, len(asked)
    finalists = sorted(seen, key=lambda p: seen[p][0])[: max(1, confirm)]
    if confirm:
        for point in finalists:
            seen[point].append(measure(replayed.times[point]))
    named = min(finalists, key=lambda p: float(np.mean(seen[p])))
    return replayed.times[named], len(asked) + (len(finalists) if confirm else 0)


# The default way of measuring a replayed search: the stored times themselves, no confirm round.
STORED_TIMES = ((None, 0),)


def strategy_label(name: str, noise: RepeatNoise | None, confirm: int) -> str:
    return name + ("+noise" if noise is not None else "") + (f"+confirm{confirm}" if confirm else "")


@dataclass
class GroupOutcome:
    strategy: str
    protocol: str
    budget: str
    gpu_name: str
    group: Group
    budget_points: int
    misses: list[float]  # per seed: best found / exhaustive best - 1
    strategy_ms: float  # mean over seeds of the best found
    random_ms: float  # exact expectation
    best_ms: float
    candidates: int = 0  # the group's searched candidates

    @property
    def score(self) -> float | None:
        """(strategy - random) / (optimum - random); None where random already finds the optimum."""
        gap = self.random_ms - self.best_ms
        if gap <= 1e-12 * self.best_ms:
            return None
        return (self.random_ms - self.strategy_ms) / gap


def replay_group(
    name: str,
    replayed: ReplayGroup,
    budget: Budget,
    protocol: str,
    observations: Observations,
    seeds: Sequence[int],
    noise: RepeatNoise | None = None,
    confirm: int = 0,
) -> GroupOutcome:
    """One group's searches, a seed each (`search_best`'s noise and confirm round, the seed also
    drawing the noise); the outcome's strategy is named with them: model+noise+confirm3."""
    check_no_leak(replayed, protocol, observations)
    points = budget.points(len(replayed.candidates))
    found = []
    for seed in seeds:
        strategy = make_strategy(
            name, replayed.group, replayed.candidates, seed=seed, observations=observations, budget=points
        )
        rng = np.random.default_rng([seed, *replayed.group.shape])
        found.append(search_best(strategy, replayed, points, noise=noise, rng=rng, confirm=confirm)[0])
    return GroupOutcome(
        strategy=strategy_label(name, noise, confirm),
        protocol=protocol,
        budget=str(budget),
        gpu_name=replayed.gpu_name,
        group=replayed.group,
        budget_points=points,
        misses=[ms / replayed.best_ms - 1 for ms in found],
        strategy_ms=float(np.mean(found)),
        random_ms=expected_random_best(replayed.sorted_outcomes(), points),
        best_ms=replayed.best_ms,
        candidates=len(replayed.candidates),
    )


def summarize(outcomes: Sequence[GroupOutcome]) -> dict:
    """One results row (RESULT_COLUMNS) from the groups of one strategy, protocol and budget."""
    misses = np.array([miss for o in outcomes for miss in o.misses])
    scores = [s for s in (o.score for o in outcomes) if s is not None]
    first = outcomes[0]
    row = {"strategy": first.strategy, "protocol": first.protocol, "budget": first.budget}
    for within, column in zip(WITHIN, RESULT_COLUMNS[3:6]):
        row[column] = round(float(np.mean(misses <= within + 1e-12)), 4)
    row["worst_miss"] = round(float(misses.max()), 4)
    row["score"] = round(float(np.mean(scores)), 4) if scores else float("nan")
    return row


def replay(
    groups: Sequence[ReplayGroup],
    replayed_rows: Observations,
    *,
    strategies: Sequence[str],
    budgets: Sequence[Budget],
    protocol: str,
    seeds: Sequence[int],
    train: Observations | None = None,
    progress: Callable[[], None] | None = None,
    measuring: Mapping[str, Sequence[tuple[RepeatNoise | None, int]]] | None = None,
) -> tuple[list[dict], list[GroupOutcome]]:
    """Results rows (one per strategy, budget and way of measuring) and every group's outcome behind
    them. Each group's training set is built once and shared by every strategy, budget, way and seed
    (and so is its model). measuring: per strategy, its ways of measuring, (noise, confirm) pairs
    (`search_best`'s); a strategy it does not name sees the stored times as they are, no confirm round."""
    train = train if train is not None else Observations.empty()
    pools: dict[tuple[str, str, str], Observations] = {}
    training = []
    for g in groups:
        key = (g.gpu_name, g.group.dtype, g.code_version)
        if key not in pools:
            pools[key] = training_pool(*key[:2], protocol, replayed_rows, train, code_version=key[2])
        training.append(training_observations(g, protocol, pools[key]))
    rows, outcomes = [], []
    for name in strategies:
        for budget in budgets:
            for noise, confirm in (measuring or {}).get(name, STORED_TIMES):
                these = []
                for replayed, observations in zip(groups, training):
                    these.append(
                        replay_group(name, replayed, budget, protocol, observations, seeds, noise, confirm)
                    )
                    if progress is not None:
                        progress()
                rows.append(summarize(these))
                outcomes += these
    return rows, outcomes
