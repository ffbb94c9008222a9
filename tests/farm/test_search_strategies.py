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
    """A legal subset of about 40 points (every fourth), so that a search drains it quickly."""
    return candidates_of(SMALL, ("splitk",))[::4]


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
