"""The search strategies (farm/search): what they ask, in what order, and when they stop."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from optuna.trial import TrialState

from db.observations import OBSERVATION_COLUMNS
from farm.plan import Point
from farm.search import STRATEGIES, Group, Observations, make_strategy, parse_budget
from kernels import get_variant
from kernels.space import Problem

GROUP = Group("bfloat16", 512, 512, 8192)
SMALL = Group("bfloat16", 256, 384, 256)  # few candidates: draining a space stays quick


def candidates_of(group: Group, variants=("grouped", "splitk")) -> list[Point]:
    """Every legal point of the group over the variants, as farm.plan.expand prunes them."""
    problem = Problem(group.m, group.n, group.k, group.dtype)
    return [
        Point(v, group.dtype, group.m, group.n, group.k, cfg)
        for v in variants
        for cfg in get_variant(v).space.configs(problem)
    ]


def small_candidates() -> list[Point]:
    """A legal subset of 20 points (every eighth of 158: both warp counts, both tile heights, splits
    1, 2 and 4), so that a search drains it quickly (TPE 3.4 -> 1.7 s, the model 3.6 -> 0.6 s against
    every fourth)."""
    return candidates_of(SMALL, ("splitk",))[::8]


def fake_ms(point: Point) -> float:
    """A smooth time with one best config: 128x128 tiles, split 8, 4 warps, 3 stages."""
    c = point.config
    return (
        (
            1.0
            + abs(math.log2(c.block_m / 128))
            + abs(math.log2(c.block_n / 128))
            + 0.5 * abs(math.log2(c.split_k / 8))
            + 0.2 * (c.num_warps != 4)
            + 0.1 * abs(c.num_stages - 3)
            + 0.05 * (point.variant != "splitk")
        )
        * point.m
        * point.n
        * point.k
        / 512**3
    )


def drain(strategy, batch: int, in_flight: int = 1) -> list[Point]:
    """Ask `in_flight` batches before telling any, until the strategy has nothing left."""
    asked: list[Point] = []
    while True:
        rounds = [strategy.ask(batch) for _ in range(in_flight)]
        points = [p for r in rounds for p in r]
        if not points:
            return asked
        asked += points
        for p in points:
            strategy.tell(p, fake_ms(p))


@pytest.mark.parametrize("name", STRATEGIES)
@pytest.mark.parametrize("batch,in_flight", [(1, 1), (5, 2)], ids=["one_at_a_time", "two_batches_in_flight"])
def test_every_strategy_asks_each_candidate_once_and_then_stops(name, batch, in_flight):
    candidates = small_candidates()
    strategy = make_strategy(name, SMALL, candidates, seed=3)
    asked = drain(strategy, batch, in_flight)
    assert len(asked) == len(set(asked)) == len(candidates)
    assert set(asked) == set(candidates)
    assert strategy.ask(4) == []


def test_grid_keeps_the_given_order_and_random_shuffles_by_seed():
    candidates = small_candidates()
    assert drain(make_strategy("grid", SMALL, candidates, seed=0), 7) == candidates
    first = drain(make_strategy("random", SMALL, candidates, seed=1), 7)
    again = drain(make_strategy("random", SMALL, candidates, seed=1), 7)
    other = drain(make_strategy("random", SMALL, candidates, seed=2), 7)
    assert first == again != other


@pytest.mark.parametrize("name", STRATEGIES)
def test_points_told_before_the_search_started_are_never_asked(name):
    candidates = small_candidates()
    stored = candidates[::3]
    strategy = make_strategy(name, SMALL, candidates, seed=0)
    for p in stored:  # a resumed search: the database holds these already
        strategy.tell(p, fake_ms(p))
    asked = drain(strategy, 4)
    assert set(asked).isdisjoint(stored)
    assert set(asked) | set(stored) == set(candidates)


@pytest.mark.parametrize("name", STRATEGIES)
def test_failures_are_told_and_the_search_goes_on(name):
    candidates = small_candidates()
    strategy = make_strategy(name, SMALL, candidates, seed=0)
    asked = []
    while points := strategy.ask(3):
        asked += points
        for p in points:
            strategy.tell(p, None if p.config.num_warps == 8 else fake_ms(p))
    assert sorted(asked, key=str) == sorted(candidates, key=str)


def test_tpe_asks_only_legal_candidates_and_tells_the_illegal_ones_pruned():
    # The grouped space's product holds 8-warp 64x64 tiles, 5 stages past a 2-step K loop, ...:
    # prune rules drop them, so TPE samples illegal combinations and must be told so.
    group = Group("bfloat16", 256, 384, 128)
    candidates = candidates_of(group, ("grouped", "splitk"))
    strategy = make_strategy("tpe", group, candidates, seed=0)
    asked = []
    for _ in range(6):
        batch = strategy.ask(4)
        asked += batch
        for p in batch:
            strategy.tell(p, fake_ms(p))
    assert asked and set(asked) <= set(candidates) and len(asked) == len(set(asked))
    states = {t.state for t in strategy.study.trials}
    assert TrialState.PRUNED in states  # illegal combinations, told without measuring
    assert sum(t.state == TrialState.COMPLETE for t in strategy.study.trials) >= len(asked)


def observations_from(groups: list[Group]) -> Observations:
    rows = []
    for g in groups:
        for p in candidates_of(g):
            c = p.config
            rows.append(
                dict(
                    gpu_name="NVIDIA H200",
                    sm_count=132,
                    l2_bytes=60 * 2**20,
                    dtype=g.dtype,
                    m=g.m,
                    n=g.n,
                    k=g.k,
                    variant=p.variant,
                    block_m=c.block_m,
                    block_n=c.block_n,
                    block_k=c.block_k,
                    group_m=c.group_m,
                    split_k=c.split_k,
                    num_warps=c.num_warps,
                    num_stages=c.num_stages,
                    input_precision=c.input_precision,
                    ms=fake_ms(p),
                )
            )
    return Observations(pd.DataFrame(rows, columns=list(OBSERVATION_COLUMNS)))


def test_model_learns_from_other_shapes_and_asks_the_best_first():
    candidates = candidates_of(GROUP)
    best = min(candidates, key=fake_ms)
    observations = observations_from([Group("bfloat16", 256, 384, 8192), Group("bfloat16", 768, 1024, 8192)])
    strategy = make_strategy("model", GROUP, candidates, seed=0, observations=observations)
    first = strategy.ask(3)
    assert best in first
    # the nearest shapes' best config (the same config) is among the seeds
    assert any(p.config == best.config and p.variant == best.variant for p in strategy.seeds)


def test_model_without_observations_starts_from_the_roofline_heuristic():
    candidates = candidates_of(GROUP)
    strategy = make_strategy("model", GROUP, candidates, seed=0, observations=Observations.empty())
    first = strategy.ask(1)[0]
    # a 64x64 tile reuses each loaded element least: the heuristic never starts there
    assert (first.config.block_m, first.config.block_n) != (64, 64)
    # its next rounds stay distinct (draining the whole space: test_every_strategy_asks_each_candidate_
    # once_and_then_stops, on a small group; draining this one's refits took 14 s of the suite)
    asked = [first, *strategy.ask(5), *strategy.ask(5)]
    assert len(asked) == len(set(asked)) == 11


@pytest.mark.parametrize(
    "text,n,points",
    [
        ("10%", 50, 5),
        ("10%", 12, 2),
        ("10%", 3, 1),
        ("100%", 7, 7),
        ("2.5%", 200, 5),
        ("200", 50, 50),
        ("3", 50, 3),
    ],
)
def test_budget_points(text, n, points):
    assert parse_budget(text).points(n) == points


@pytest.mark.parametrize("text", ["", "0%", "150%", "-3", "0", "ten", "10 %%", "1.5", "nan%"])
def test_bad_budgets_say_what_to_give(text):
    with pytest.raises(ValueError, match="bad budget") as info:
        parse_budget(text)
    assert "\n" not in str(info.value)


def rows_of(group: Group, points: list[Point], times, code_version: str = "") -> list[dict]:
    """Observation rows of `points` of one shape, each with times(point)."""
    out = []
    for p in points:
        c = p.config
        out.append(
            dict(
                gpu_name="NVIDIA H200", sm_count=132, l2_bytes=60 * 2**20, dtype=group.dtype,
                m=group.m, n=group.n, k=group.k, variant=p.variant, block_m=c.block_m, block_n=c.block_n,
                block_k=c.block_k, group_m=c.group_m, split_k=c.split_k, num_warps=c.num_warps,
                num_stages=c.num_stages, input_precision=c.input_precision, ms=times(p),
                code_version=code_version,
            )
        )  # fmt: skip
    return out


def reversed_times(points: list[Point]):
    """fake_ms with the order reversed within the shape: the fastest config gets the slowest time."""
    order = sorted(points, key=fake_ms)
    return dict(zip(order, sorted(map(fake_ms, order), reverse=True))).__getitem__


PLANTED = Group("bfloat16", 256, 384, 256)  # 304 grouped and splitk points: a 10% budget is 31 in rounds of 8


@pytest.mark.parametrize(
    "name,within_5pct",
    [("model", True), ("model_prior", False)],
    ids=["judged_prior_recovers", "trusted_prior_misses"],
)
def test_an_anti_correlated_prior_is_outweighed_by_the_groups_own_results(name, within_5pct):
    # the training rows are this very shape, times reversed (an old code version ranked backwards):
    # model_prior (the search before it judged its prior) follows them into the slowest configs. One
    # config is within 5%; over seeds 0-9 model finds it on 8 (seeds 3 and 4 end 100% and 155% behind),
    # model_prior on none (its best ends 20% behind), random on 2.
    from farm.search.replay import ReplayGroup, search_best

    candidates = candidates_of(PLANTED)
    observations = Observations(pd.DataFrame(rows_of(PLANTED, candidates, reversed_times(candidates))))
    replayed = ReplayGroup("NVIDIA H200", PLANTED, {p: fake_ms(p) for p in candidates})
    budget = parse_budget("10%").points(len(candidates))
    misses = []
    for seed in range(3):
        strategy = make_strategy(
            name, PLANTED, candidates, seed=seed, observations=observations, budget=budget
        )
        misses.append(search_best(strategy, replayed, budget)[0] / replayed.best_ms - 1)
        if name == "model":
            assert strategy.agreement[0] < -0.5 and strategy.trust < 0.2  # the prior, found out
    assert all(m <= 0.05 for m in misses) == within_5pct, misses


def test_model_measures_every_variant_in_its_first_round():
    # the prior (here the roofline heuristic) may prefer one variant throughout; the first round still
    # holds each variant's best-predicted point
    variants = ("grouped", "splitk", "persistent_tma")
    candidates = candidates_of(SMALL, variants)
    strategy = make_strategy("model", SMALL, candidates, seed=0, observations=Observations.empty(), budget=30)
    assert {p.variant for p in strategy.ask(3)} == set(variants)
    before = make_strategy("model_prior", SMALL, candidates, seed=0, observations=Observations.empty())
    assert len({p.variant for p in before.ask(3)}) < 3  # what the variant round changed


def axis_steps(a: Point, b: Point) -> int:
    """How many of the tile, group, split, warps and stages values differ between two configs."""
    fields = ("block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages")
    return sum(getattr(a.config, f) != getattr(b.config, f) for f in fields)


def test_model_neighbours_are_one_axis_step_away():
    candidates = candidates_of(SMALL, ("grouped", "splitk"))
    strategy = make_strategy("model", SMALL, candidates, seed=0, observations=Observations.empty())
    index = {p: i for i, p in enumerate(strategy.ledger.candidates)}
    centre = next(
        p
        for p in candidates
        if p.variant == "grouped"
        and (p.config.block_m, p.config.block_n, p.config.num_stages) == (64, 128, 3)
    )
    near = [strategy.ledger.candidates[j] for j in strategy.neighbours[index[centre]]]
    shapes = {(p.variant, p.config.block_m, p.config.block_n, p.config.num_stages) for p in near}
    assert ("grouped", 128, 64, 3) in shapes  # the tile turned
    assert ("grouped", 64, 128, 4) in shapes  # one more stage
    assert any(p.variant == "splitk" and axis_steps(p, centre) == 0 for p in near)  # the other variant
    # one axis, or one axis with the stages the other way, or the tile turned (two block values)
    assert all(axis_steps(p, centre) <= 2 for p in near) and centre not in near


def test_model_spends_its_last_round_on_the_neighbours_of_its_best():
    candidates = candidates_of(SMALL, ("grouped", "splitk"))
    budget = 16  # rounds of 4
    strategy = make_strategy(
        "model", SMALL, candidates, seed=0, observations=Observations.empty(), budget=budget
    )
    for _ in range(3):
        for p in strategy.ask(4):
            strategy.tell(p, fake_ms(p))
    best = min(strategy.ledger.results, key=strategy.ledger.results.get)
    near = {strategy.ledger.candidates[j] for j in strategy.neighbours[strategy.ledger.index[best]]}
    last = strategy.ask(4)
    assert last and last[0] in near
    assert all(p not in strategy.ledger.results for p in last)


def test_model_measures_the_shapes_own_earlier_best_first():
    # rows of this very shape (an older code version's) know its best config: it goes before the
    # variant round; a replay that hides the shape (shape_out and the rest) never gets here
    candidates = candidates_of(PLANTED)
    stale = candidates[::4]  # the old code measured a quarter of the configs
    observations = Observations(pd.DataFrame(rows_of(PLANTED, stale, fake_ms, code_version="old")))
    strategy = make_strategy("model", PLANTED, candidates, seed=0, observations=observations, budget=31)
    first = strategy.ask(3)
    assert first[0] == min(stale, key=fake_ms)
    assert {p.variant for p in first} == {"grouped", "splitk"}  # then the variant round
