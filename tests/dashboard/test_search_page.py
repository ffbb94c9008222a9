"""The Search page and its query (db.search_progress) on crafted databases: an exhaustive sweep of two
ragged shapes, a model search resumed once (two sweeps of one command) and a random search whose planted
fast point must not pass for the exhaustive best."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from pagekit import PAGES, app, charts, layer, render, show, texts
from samples import H200, record
from sqlalchemy.orm import Session

from db.records import MeasurementRecord
from db.schema import open_engine
from db.search_progress import WITHIN, conclusion, parse_search, search_progress, search_shapes
from db.writes import environment_id, finish_sweep, start_sweep, upsert_measurements

SKINNY = (96, 1200, 3000)  # decode-sized M, ragged N and K
RAGGED = (777, 1024, 333)
# 20 configs of the grouped kernel a shape: (block_m, block_n, block_k, num_warps)
CONFIGS = [(bm, bn, bk, w) for bm in (32, 64, 128) for bn in (64, 128) for bk in (32, 64) for w in (4, 8)][
    :20
]
EXHAUSTIVE_BEST = {SKINNY: 0.100, RAGGED: 0.200}
STEP = 0.1  # config i of the exhaustive sweep takes best x (1 + STEP i): config 0 is the best
CUBLAS_MS = {SKINNY: 0.090, RAGGED: 0.180}
EXHAUSTIVE_POINTS = len(CONFIGS) + 1  # and one config that failed to compile
# The model search's points in measurement order: (config index, ms; None: failed). Its first sweep
# stores SKINNY's first three and RAGGED's first; the resumed one the rest.
MODEL_TRAIL = {
    SKINNY: [(7, 0.150), (3, 0.130), (12, None), (0, 0.1008), (1, 0.120)],
    RAGGED: [(9, 0.300), (5, 0.250)],
}
MODEL_CMD = "/work/.venv/bin/farm sweep --spec study.yaml --search model --budget 10% --db r.db"
RANDOM_CMD = "farm sweep --spec study.yaml --search=random --budget 3 --db r.db"
EXHAUSTIVE_CMD = "farm sweep --spec study.yaml --db r.db"


def _grouped(shape, i: int, ms: float | None) -> MeasurementRecord:
    bm, bn, bk, w = CONFIGS[i]
    status = "ok" if ms is not None else "compile_error"
    return record("grouped", shape, env=H200, ms=ms, block=(bm, bn, bk), num_warps=w, status=status)


def exhaustive_rows(shapes=(SKINNY, RAGGED)) -> list[MeasurementRecord]:
    out = []
    for shape in shapes:
        out += [_grouped(shape, i, EXHAUSTIVE_BEST[shape] * (1 + STEP * i)) for i in range(len(CONFIGS))]
        out.append(record("grouped", shape, env=H200, ms=None, block=(256, 256, 64), status="compile_error"))
        out.append(record("cublas", shape, env=H200, ms=CUBLAS_MS[shape]))
    return out


def build(path: Path, sweeps: list[tuple[str, list[list[MeasurementRecord]]]]) -> Path:
    """A database of sweeps (command, writes): each write is its own upsert, so ids follow their order."""
    engine = open_engine(str(path))
    try:
        with Session(engine) as session:
            env = environment_id(session, H200)
            for command, writes in sweeps:
                n = sum(len(w) for w in writes)
                sweep = start_sweep(session, name="study", spec={}, command=command, n_points=n)
                for records in writes:
                    upsert_measurements(session, environment_id=env, sweep_id=sweep, records=records)
                finish_sweep(session, sweep, status="finished", n_ok=n, n_failed=0)
            session.commit()
    finally:
        engine.dispose()
    return path


def trail_writes(trails: dict, cut: dict | None = None) -> tuple[list, list]:
    """The trails as one write per point, split at `cut` (shape -> points in the first sweep)."""
    first, second = [], []
    for shape, trail in trails.items():
        n = (cut or {}).get(shape, len(trail))
        first += [[_grouped(shape, i, ms)] for i, ms in trail[:n]]
        second += [[_grouped(shape, i, ms)] for i, ms in trail[n:]]
    return first, second


@pytest.fixture(scope="module")
def study_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    first, second = trail_writes(MODEL_TRAIL, cut={SKINNY: 3, RAGGED: 1})
    own_cublas = [[record("cublas", SKINNY, env=H200, ms=0.095)]]
    # The random search planted a point at half the exhaustive best: a search, never the yardstick.
    planted = [[_grouped(SKINNY, 2, EXHAUSTIVE_BEST[SKINNY] / 2)]]
    return build(
        tmp_path_factory.mktemp("search") / "study.db",
        [
            (EXHAUSTIVE_CMD, [exhaustive_rows()]),
            (MODEL_CMD, [*first, *own_cublas]),
            (MODEL_CMD, second),  # the same command again: the search resumed
            (RANDOM_CMD, planted),
        ],
    )


def query(db: Path, fn, **kw):
    engine = open_engine(str(db), readonly=True)
    try:
        with engine.connect() as conn:
            return fn(conn, **kw)
    finally:
        engine.dispose()


# ---- the query ----


@pytest.mark.parametrize(
    ("command", "parsed"),
    [
        (MODEL_CMD, ("model", "10%")),
        (RANDOM_CMD, ("random", "3")),
        ("farm sweep --preset llm --search tpe", ("tpe", "10%")),  # farm sweep's default budget
        ("farm sweep --preset llm --search grid --budget 10%", None),
        (EXHAUSTIVE_CMD, None),
        ("", None),
    ],
    ids=["model-with-path", "random-equals-count", "tpe-default-budget", "grid", "exhaustive", "no-command"],
)
def test_strategy_and_budget_come_from_the_command(command: str, parsed) -> None:
    assert parse_search(command) == parsed


def test_best_so_far_is_monotone_and_ends_at_the_search_best(study_db: Path) -> None:
    progress = query(study_db, search_progress, search=2)
    assert set(progress.strategy) == {"model"} and set(progress.budget) == {"10%"}
    assert set(progress.sweep_id) == {2, 3}  # the resumed sweep continues the same curve
    for shape, trail in MODEL_TRAIL.items():
        rows = progress[(progress.m == shape[0]) & (progress.n == shape[1]) & (progress.k == shape[2])]
        assert rows.point.tolist() == list(range(1, len(trail) + 1))
        assert rows.id.is_monotonic_increasing
        assert rows.status.tolist() == ["ok" if ms else "compile_error" for _, ms in trail]
        best = rows.best_ms.tolist()
        assert all(b >= a for a, b in zip(best[1:], best)), best
        assert best[-1] == pytest.approx(min(ms for _, ms in trail if ms))
    skinny = progress[progress.m == SKINNY[0]]
    # The failed third point carries the best of the two before it.
    assert skinny.best_ms.tolist() == pytest.approx([0.150, 0.130, 0.130, 0.1008, 0.1008])


def test_miss_is_against_the_exhaustive_sweep_only(study_db: Path) -> None:
    shapes = search_shapes(query(study_db, search_progress, search=2)).set_index("shape")
    skinny, ragged = shapes.loc["96x1200x3000"], shapes.loc["777x1024x333"]
    # Not the random search's planted 0.05 ms: searches are never the exhaustive best.
    assert skinny.exhaustive_ms == pytest.approx(EXHAUSTIVE_BEST[SKINNY])
    assert skinny.exhaustive_points == EXHAUSTIVE_POINTS
    assert skinny.miss == pytest.approx(0.1008 / 0.100 - 1)
    assert ragged.miss == pytest.approx(0.250 / 0.200 - 1)
    assert skinny.points_to_within == 4 and pd.isna(ragged.points_to_within)
    assert skinny.share_of_exhaustive == pytest.approx(5 / EXHAUSTIVE_POINTS)
    # cuBLAS: the search's own row, else the exhaustive sweep's.
    assert skinny.cublas_ms == pytest.approx(0.095) and ragged.cublas_ms == pytest.approx(CUBLAS_MS[RAGGED])
    assert shapes.index.tolist() == ["777x1024x333", "96x1200x3000"]  # the worst miss first


def test_the_newest_search_is_the_default_and_each_has_its_own_curve(study_db: Path) -> None:
    random = query(study_db, search_progress, search=4)
    assert random.point.tolist() == [1] and random.best_ms.tolist() == [EXHAUSTIVE_BEST[SKINNY] / 2]
    said = query(study_db, conclusion)
    assert said.startswith("The random search #4 (budget 3)"), said
    assert "on 1 of 1 shapes" in said and "matched or beat the exhaustive best" in said


# ---- the sentence flips with the data ----


def one_search_db(path: Path, best_ms: float) -> Path:
    first, _ = trail_writes({SKINNY: [(7, 0.150), (1, best_ms)]})
    return build(path, [(EXHAUSTIVE_CMD, [exhaustive_rows((SKINNY,))]), (MODEL_CMD, first)])


@pytest.mark.parametrize(
    ("best_ms", "within", "worst"),
    [(0.110, 0, "worst miss 10.0% at 96x1200x3000"), (0.101, 1, "worst miss 1.0% at 96x1200x3000")],
    ids=["misses-by-10pct", "within-1pct"],
)
def test_the_sentence_flips_with_the_miss(tmp_path: Path, best_ms: float, within: int, worst: str) -> None:
    said = query(one_search_db(tmp_path / "one.db", best_ms), conclusion)
    assert f"found within {WITHIN:.0%} of the exhaustive best on {within} of 1 shapes" in said, said
    assert worst in said and f"with {200 / EXHAUSTIVE_POINTS:.1f}% of the points" in said, said


def test_no_exhaustive_sweep_is_said(tmp_path: Path) -> None:
    first, _ = trail_writes({SKINNY: [(7, 0.150)]})
    said = query(build(tmp_path / "alone.db", [(MODEL_CMD, first)]), conclusion)
    assert "no exhaustive sweep here measured them" in said, said


# ---- the page ----


def test_the_page_is_in_the_navigation() -> None:
    assert PAGES["search"] == "Search"


def test_without_a_search_the_page_says_how_to_make_one(tmp_path: Path) -> None:
    db = build(tmp_path / "grid.db", [(EXHAUSTIVE_CMD, [exhaustive_rows()])])
    at = render(db, "search")
    assert not at.exception, [e.value for e in at.exception]
    assert "holds no searched sweep" in at.markdown[0].value
    [info] = texts(at, "info")
    assert "--search model --budget 10%" in info and str(db) in info
    assert not charts(at)


def test_the_page_draws_the_search_against_the_exhaustive_best(study_db: Path) -> None:
    with app(study_db) as at:
        show(at, "search")
        assert not at.exception, [e.value for e in at.exception]
        assert at.title[0].value == "Search"
        # The newest search first: the random one.
        newest = query(study_db, conclusion, gpu_name=H200.gpu_name, dtype="bfloat16", search=4)
        assert at.markdown[0].value == f"**{newest}**"
        at.selectbox(key="search").set_value(2).run()
        assert not at.exception, [e.value for e in at.exception]
        lead = at.markdown[0].value
        assert "The model search #2 (budget 10%)" in lead and "on 1 of 2 shapes" in lead, lead
        miss_chart, progress_chart = charts(at)
        misses = layer(miss_chart, "miss per shape").data.set_index("shape")
        assert misses.miss_pct.to_dict() == pytest.approx({"777x1024x333": 25.0, "96x1200x3000": 0.8})
        # The worst shape is shown first: RAGGED's two points, against its exhaustive best and cuBLAS, in us
        # (every time on it is under a millisecond).
        line = layer(progress_chart, "best so far").data
        assert line.best_ms.tolist() == pytest.approx([300.0, 250.0])
        exhaustive = layer(progress_chart, "exhaustive best", "rule").data
        assert exhaustive.best_ms.tolist() == pytest.approx([EXHAUSTIVE_BEST[RAGGED] * 1e3])
        cublas = layer(progress_chart, "cuBLAS", "rule").data
        assert cublas.best_ms.tolist() == pytest.approx([CUBLAS_MS[RAGGED] * 1e3])
        at.selectbox(key="search_shape_2").set_value("96x1200x3000").run()
        line = layer(charts(at)[1], "best so far").data
        assert line.best_ms.tolist() == pytest.approx([150.0, 130.0, 130.0, 100.8, 100.8])
        [table] = at.dataframe
        assert table.value["shape"].tolist() == ["777x1024x333", "96x1200x3000"]
