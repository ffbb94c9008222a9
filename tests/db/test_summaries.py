"""The per-shape summaries (db.summaries) behind best_configs, splitk_speedup and vs_cublas: after any
sequence of writes the views read exactly what revision 0002's views computed from every row."""

from __future__ import annotations

import random

import pandas as pd
import pytest
from dbkit import A100, H200, count, rec, store
from samples import H200_NODE2
from sqlalchemy import Connection, Engine, MetaData, inspect, text
from sqlalchemy.orm import Session

from db import queries, schema
from db.engine import make_engine
from db.merge import merge
from db.views import VIEWS_0002
from db.writes import environment_id

# The rows that identify each view's row (its other columns follow from them).
KEYS = {
    "best_configs": ["gpu_name", "dtype", "m", "n", "k", "variant"],
    "splitk_speedup": ["gpu_name", "dtype", "m", "n", "k", "block_m", "block_n"],
    "vs_cublas": ["gpu_name", "dtype", "m", "n", "k"],
}
SHAPES = [(495, 5333, 71), (128, 96, 4097), (333, 129, 4097)]
BLOCKS = [(64, 64, 32), (128, 64, 32), (64, 128, 64)]
# ms drawn from a few values, so ties (broken by the lower id) happen.
TIMES = (0.5, 0.75, 1.0, 1.25, 2.0)


def read(conn: Connection, sql: str, name: str) -> pd.DataFrame:
    result = conn.execute(text(sql))
    df = queries.normalize(pd.DataFrame([tuple(r) for r in result], columns=list(result.keys())))
    return df.sort_values(KEYS[name]).reset_index(drop=True)


def assert_views_match_0002(conn: Connection) -> dict[str, int]:
    """Each summary-backed view equals revision 0002's SQL over every row; returns the row counts."""
    sizes = {}
    for name in KEYS:
        got = read(conn, f"SELECT * FROM {name}", name)
        want = read(conn, f"SELECT * FROM ({VIEWS_0002[name]}) x", name)
        pd.testing.assert_frame_equal(got, want, check_dtype=False, obj=name)
        sizes[name] = len(want)
    return sizes


def random_point(rng: random.Random):
    """A record of a random point: a few shapes, dtypes, variants and configs, any status, few times."""
    variant = rng.choice(["tiled", "grouped", "splitk", "splitk_det", "cublas"])
    status = rng.choices(["ok", "wrong", "compile_error"], [70, 15, 15])[0]
    return rec(
        variant,
        rng.choice(SHAPES),
        dtype=rng.choice(["bfloat16", "float32"]),
        block=rng.choice(BLOCKS),
        group_m=rng.choice((1, 8)) if variant == "grouped" else 1,
        split_k=rng.choice((1, 2, 4)) if variant.startswith("splitk") else 1,
        num_warps=rng.choice((4, 8)),
        status=status,
        ms=None if status == "compile_error" else rng.choice(TIMES),
    )


@pytest.mark.parametrize("seed", [0, 1, 2], ids=["seed0", "seed1", "seed2"])
def test_views_equal_0002_after_random_writes(engine: Engine, seed: int) -> None:
    """Rounds of random batches on three environments (two of one GPU): points re-measured faster,
    slower, turned wrong or failed; the views match the window passes over every row each time."""
    rng = random.Random(seed)
    for _ in range(8):
        env = rng.choice([H200, H200_NODE2, A100])
        store(engine, [random_point(rng) for _ in range(40)], env=env)
        with engine.connect() as conn:
            sizes = assert_views_match_0002(conn)
    assert all(sizes.values()), sizes  # the last round compared real rows, not empty frames


def best(engine: Engine) -> pd.DataFrame:
    with engine.connect() as conn:
        return queries.best_configs(conn, gpu_name=H200.gpu_name, dtype="bfloat16", shape=SHAPES[0])


def test_best_row_remeasured_slower_or_wrong_gives_way(engine: Engine) -> None:
    fast = rec("splitk", SHAPES[0], split_k=4, ms=0.5)
    slow = rec("splitk", SHAPES[0], split_k=2, ms=0.9)
    unsplit = rec("splitk", SHAPES[0], split_k=1, ms=1.8)
    library = rec("cublas", SHAPES[0], ms=1.0)
    store(engine, [fast, slow, unsplit, library])
    assert best(engine).set_index("variant").ms.to_dict() == {"cublas": 1.0, "splitk": 0.5}

    store(engine, [rec("splitk", SHAPES[0], split_k=4, ms=1.2)])  # re-measured slower
    assert best(engine).set_index("variant").ms.to_dict() == {"cublas": 1.0, "splitk": 0.9}
    with engine.connect() as conn:
        (split,) = queries.splitk_speedup(conn).itertuples()
        (vs,) = queries.vs_cublas(conn).itertuples()
    assert (split.best_split_k, split.split_ms, split.unsplit_ms) == (2, 0.9, 1.8)
    assert (vs.triton_ms, vs.cublas_ms) == (0.9, 1.0)

    store(engine, [rec("splitk", SHAPES[0], split_k=2, status="wrong", ms=0.4)])  # now wrong
    assert best(engine).set_index("variant").ms.to_dict() == {"cublas": 1.0, "splitk": 1.2}
    store(engine, [rec("cublas", SHAPES[0], status="crashed", ms=None)])  # the library row fails
    assert best(engine).variant.tolist() == ["splitk"]
    with engine.connect() as conn:
        assert queries.vs_cublas(conn).empty
        assert_views_match_0002(conn)


def store_without_summaries(engine: Engine, records, env=H200) -> None:
    """Insert rows as code of revision 0002 did (no summaries to keep)."""
    meta = MetaData()
    meta.reflect(engine, only=["measurements"])
    table = meta.tables["measurements"]
    with Session(engine) as session:
        env_id = environment_id(session, env)
        rows = [
            {
                **{c.name: getattr(r, c.name) for c in table.c if hasattr(r, c.name)},
                "environment_id": env_id,
                "updated_at": r.created_at,
            }
            for r in records
        ]
        session.execute(table.insert(), rows)
        session.commit()


def view_frames(engine: Engine) -> dict[str, pd.DataFrame]:
    with engine.connect() as conn:
        return {name: read(conn, f"SELECT * FROM {name}", name) for name in KEYS}


def test_revision_0003_backfills_on_upgrade_and_drops_on_downgrade(target: str) -> None:
    engine = make_engine(target)
    schema.upgrade(engine, "0002")
    rng = random.Random(7)
    points = {r.key: r for r in (random_point(rng) for _ in range(150))}  # distinct keys, as the table
    for i, env in enumerate([H200, H200_NODE2, A100]):
        store_without_summaries(engine, list(points.values())[i::3], env=env)
    before = view_frames(engine)
    assert all(len(f) for f in before.values())

    schema.upgrade(engine, "head")
    assert schema.current(engine) == "0003"
    assert count(engine, "shape_best") > 0 and count(engine, "split_best") > 0
    for name, frame in view_frames(engine).items():
        pd.testing.assert_frame_equal(frame, before[name], obj=name)
    with engine.connect() as conn:
        assert_views_match_0002(conn)

    schema.downgrade(engine, "0002")
    assert {"shape_best", "split_best"}.isdisjoint(inspect(engine).get_table_names())
    for name, frame in view_frames(engine).items():
        pd.testing.assert_frame_equal(frame, before[name], obj=name)
    schema.upgrade(engine, "head")
    store(engine, [rec("cublas", SHAPES[1], dtype="float32", ms=0.01)])  # the writer keeps them again
    with engine.connect() as conn:
        assert_views_match_0002(conn)
    engine.dispose()


def test_done_keys_scoped_to_a_sweep(engine: Engine) -> None:
    rng = random.Random(3)
    records = list({r.key: r for r in (random_point(rng) for _ in range(200))}.values())
    env_id = store(engine, records)
    store(engine, [rec("tiled", SHAPES[0], ms=0.3)], env=A100)  # another environment: never listed
    with engine.connect() as conn:
        every = queries.done_keys(conn, [env_id])
        assert every == {r.key for r in records}
        variants, dtypes, shapes = {"splitk", "cublas"}, {"float32"}, set(SHAPES[1:])
        scoped = queries.done_keys(conn, [env_id], variants=variants, dtypes=dtypes, shapes=shapes)
        want = {k for k in every if k[1] in variants and k[2] in dtypes and k[3:6] in shapes}
        assert scoped == want and 0 < len(want) < len(every)
        ok = queries.done_keys(conn, [env_id], statuses=["ok"], variants=variants, shapes=shapes)
        assert ok == {
            r.key for r in records if r.status == "ok" and r.variant in variants and (r.m, r.n, r.k) in shapes
        }
        versions = {"c0ffee", "later"}
        assert queries.done_keys(conn, [env_id], code_versions=versions, variants=variants) == {
            k for k in every if k[1] in variants
        }
        assert queries.done_keys(conn, [env_id], code_versions=["later"]) == set()
        assert queries.done_keys(conn, [env_id], shapes=[]) == set()
        assert queries.done_keys(conn, [env_id], shapes=[(1, 2, 3)]) == set()


def test_merge_keeps_the_summaries(engine: Engine, target: str, tmp_path) -> None:
    """farm db merge writes measurements around db.writes' upsert: it refreshes what it touched."""
    rng = random.Random(11)
    store(engine, [random_point(rng) for _ in range(60)])
    source = make_engine(str(tmp_path / "other.db"))
    schema.ensure_current(source)
    for env in (H200, A100):  # the H200's points overlap, some faster, some turned wrong
        store(source, [random_point(rng) for _ in range(60)], env=env)
    source.dispose()
    merge([str(tmp_path / "other.db")], into=target)
    with engine.connect() as conn:
        sizes = assert_views_match_0002(conn)
    assert all(sizes.values()), sizes
