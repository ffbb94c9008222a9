"""The summaries (db.summaries) behind best_configs, splitk_speedup, vs_cublas and grouping_effect, and
behind the queries summary, filter_options, environments, accuracy: after any sequence of writes they
read exactly what revision 0002's views and the queries' earlier SQL computed from every row."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from dbkit import A100, H200, count, rec, store
from samples import H200_NODE2
from sqlalchemy import Connection, Engine, MetaData, inspect, text
from sqlalchemy.orm import Session

from db import queries, schema, summaries, writes
from db.engine import make_engine
from db.merge import merge
from db.models import GPU_BEST_COPIED
from db.views import SPLITK_OVER_ROWS, VIEWS_0002
from db.writes import environment_id, start_sweep

# The rows that identify each view's row (its other columns follow from them).
KEYS = {
    "best_configs": ["gpu_name", "dtype", "m", "n", "k", "variant"],
    "splitk_speedup": ["gpu_name", "dtype", "m", "n", "k", "block_m", "block_n"],
    "vs_cublas": ["gpu_name", "dtype", "m", "n", "k"],
    "grouping_effect": [
        "gpu_name", "dtype", "m", "n", "k", "variant", "block_m", "block_n", "block_k", "split_k",
        "num_warps", "num_stages", "group_m",
    ],
}  # fmt: skip
SHAPES = [(495, 5333, 71), (128, 96, 4097), (333, 129, 4097)]
BLOCKS = [(64, 64, 32), (128, 64, 32), (64, 128, 64)]
# ms drawn from a few values, so ties (broken by the lower id) happen.
TIMES = (0.5, 0.75, 1.0, 1.25, 2.0)


def read(conn: Connection, sql: str, name: str) -> pd.DataFrame:
    result = conn.execute(text(sql))
    df = queries.normalize(pd.DataFrame([tuple(r) for r in result], columns=list(result.keys())))
    return df.sort_values(KEYS[name]).reset_index(drop=True)


def without_eager_ms(got: pd.DataFrame, want: pd.DataFrame) -> pd.DataFrame:
    """`got` without the eager_ms column of revision 0007 where `want` (older SQL) has none, after
    checking it against its row's stream and host times."""
    if "eager_ms" not in got or "eager_ms" in want:
        return got
    rest = got.drop(columns="eager_ms")
    pd.testing.assert_series_equal(got.eager_ms, queries.eager_of(rest), check_names=False)
    return rest


def assert_views_match_0002(conn: Connection, revision: str = "head") -> dict[str, int]:
    """Each summary-backed view equals revision 0002's SQL over every row (splitk_speedup: from 0005
    without stream-K as the unsplit side, SPLITK_OVER_ROWS), and each summary-backed query equals its
    SQL of revision 0003 over every row; returns the views' row counts."""
    sizes = {}
    for name in KEYS:
        got = read(conn, f"SELECT * FROM {name}", name)
        from_0005 = name == "splitk_speedup" and revision not in ("0003", "0004")
        reference = SPLITK_OVER_ROWS if from_0005 else VIEWS_0002[name]
        want = read(conn, f"SELECT * FROM ({reference}) x", name)
        pd.testing.assert_frame_equal(without_eager_ms(got, want), want, check_dtype=False, obj=name)
        sizes[name] = len(want)
    if revision == "head":  # the queries read the head's sweeps (revision 0006: heartbeats)
        assert_queries_match_scans(conn)
    return sizes


def scan(conn: Connection, sql: str, **params) -> pd.DataFrame:
    result = conn.execute(text(sql), params)
    return queries.normalize(pd.DataFrame([tuple(r) for r in result], columns=list(result.keys())))


# What accuracy() computed over every checked row before revision 0004.
ACCURACY_0003 = (
    "SELECT variant, dtype, COUNT(*) AS n_checked, SUM(CASE WHEN status = 'wrong' THEN 1 ELSE 0 END) "
    "AS n_wrong, MAX(rel_err) AS rel_err_max, AVG(rel_err) AS rel_err_mean, MAX(nondeterminism) AS "
    "nondeterminism_max, MAX(nondeterminism * nondeterminism / k) AS sq, SUM(CASE WHEN nondeterminism > 0 "
    "THEN 1 ELSE 0 END) AS n_nondeterministic FROM results WHERE status IN ('ok', 'wrong') {where} "
    "GROUP BY variant, dtype ORDER BY variant, dtype"
)
# What summary, filter_options and environments counted before revision 0004, over the newest run of each
# point (revision 0006: the views' rows).
COUNTS_0003 = (
    "SELECT e.id, e.gpu_name, e.backend, m.status, m.dtype, m.variant, COUNT(*) AS n, MIN(m.m) AS m_min, "
    "MAX(m.m) AS m_max, MIN(m.n) AS n_min, MAX(m.n) AS n_max, MIN(m.k) AS k_min, MAX(m.k) AS k_max "
    "FROM measurements m JOIN environments e ON e.id = m.environment_id {where}"
    "GROUP BY e.id, e.gpu_name, e.backend, m.status, m.dtype, m.variant"
)


def by_count(df: pd.DataFrame, col: str) -> dict[str, int]:
    return queries.most_first(Counter({k: int(n) for k, n in df.groupby(col).n.sum().items()}))


def assert_queries_match_scans(conn: Connection) -> None:
    counts = scan(conn, COUNTS_0003.format(where="WHERE m.latest = 1 "))
    got = queries.summary(conn)
    assert got["measurements"] == counts.n.sum()
    assert (got["by_status"], got["by_backend"], got["by_gpu"]) == (
        by_count(counts, "status"),
        by_count(counts, "backend"),
        by_count(counts, "gpu_name"),
    )
    options = queries.filter_options(conn)
    for key, col in (
        ("gpu_names", "gpu_name"),
        ("statuses", "status"),
        ("dtypes", "dtype"),
        ("variants", "variant"),
    ):
        assert options[key] == sorted(set(counts[col])), key
    for d in "mnk":
        want = (counts[f"{d}_min"].min(), counts[f"{d}_max"].max()) if len(counts) else (None, None)
        assert options[d] == want, d
    per_sweep = scan(conn, "SELECT sweep_id, COUNT(*) AS n FROM measurements GROUP BY sweep_id")
    sweeps = queries.sweeps(conn).set_index("id").n_measurements.to_dict()
    assert sweeps == {**dict.fromkeys(sweeps, 0), **per_sweep.dropna().set_index("sweep_id").n.to_dict()}
    envs = queries.environments(conn).set_index("id").n_measurements.to_dict()
    assert envs == {**dict.fromkeys(envs, 0), **counts.groupby("id").n.sum().to_dict()}

    gpus = sorted(set(counts.gpu_name))
    for gpu in [None, *gpus]:
        where = "" if gpu is None else "AND gpu_name = :g"
        want = scan(conn, ACCURACY_0003.format(where=where), g=gpu)
        want["nondeterminism_rel_max"] = np.sqrt(pd.to_numeric(want.pop("sq")).astype("float64"))
        got = queries.accuracy(conn, gpu_name=gpu)
        pd.testing.assert_frame_equal(got, want, check_dtype=False, obj=f"accuracy {gpu}")
        for status in (None, "ok"):
            only = "" if status is None else "AND status = :s"
            count = f"SELECT COUNT(*) FROM results WHERE dtype = 'float32' {only} {where}"
            want = conn.execute(text(count), {"g": gpu, "s": status}).scalar()
            assert queries.count_results(conn, gpu_name=gpu, dtype="float32", status=status) == want
        for dtype in ("bfloat16", "float32"):
            newest = f"SELECT * FROM results WHERE dtype = :d {where} ORDER BY id DESC LIMIT 7"
            want = scan(conn, newest, g=gpu, d=dtype)
            got = queries.results(conn, gpu_name=gpu, dtype=dtype, limit=7)
            pd.testing.assert_frame_equal(got, want, obj=f"results {gpu} {dtype}")
    one = [(s, s) for s in SHAPES[0]]
    got = queries.results(conn, m_range=one[0], n_range=one[1], k_range=one[2], limit=5)
    want = scan(conn, "SELECT * FROM results WHERE m = :m AND n = :n AND k = :k ORDER BY id DESC LIMIT 5",
                m=SHAPES[0][0], n=SHAPES[0][1], k=SHAPES[0][2])  # fmt: skip
    pd.testing.assert_frame_equal(got, want, obj="results of one shape")


def random_point(rng: random.Random):
    """A record of a random point: a few shapes, dtypes, variants and configs, any status, few times."""
    # streamk_hybrid: split_k = 1, but no unsplit baseline of splitk_speedup (SPLITK_OVER_ROWS)
    variant = rng.choice(["tiled", "grouped", "splitk", "splitk_det", "streamk_hybrid", "cublas"])
    status = rng.choices(["ok", "wrong", "compile_error"], [70, 15, 15])[0]
    checked = status != "compile_error"
    return rec(
        variant,
        rng.choice(SHAPES),
        dtype=rng.choice(["bfloat16", "float32"]),
        block=rng.choice(BLOCKS),
        group_m=rng.choice((1, 8)) if variant == "grouped" else 1,
        split_k=rng.choice((1, 2, 4)) if variant.startswith("splitk") else 1,
        num_warps=rng.choice((4, 8)),
        status=status,
        ms=rng.choice(TIMES) if checked else None,
        rel_err=rng.choice((None, 1e-4, 3e-3, 0.25)) if checked else None,
        nondeterminism=rng.choice((None, 0.0, 0.0, 1e-3, 0.5)) if checked else None,
    )


@pytest.mark.parametrize("seed", [0, 1, 2], ids=["seed0", "seed1", "seed2"])
def test_views_equal_0002_after_random_writes(engine: Engine, seed: int) -> None:
    """Rounds of random batches on three environments (two of one GPU): points re-measured faster,
    slower, turned wrong or failed; the views match the window passes over every row each time."""
    rng = random.Random(seed)
    sweeps = [None]
    for i in range(8):
        env = rng.choice([H200, H200_NODE2, A100])
        if rng.random() < 0.6:  # a new sweep; else an older one or none writes (points move between them)
            with Session(engine) as session:
                sweeps.append(start_sweep(session, name=f"s{i}", spec={}, command="", n_points=0))
                session.commit()
        sweep_id = sweeps[-1] if rng.random() < 0.7 else rng.choice(sweeps)
        store(engine, [random_point(rng) for _ in range(40)], env=env, sweep_id=sweep_id)
        with engine.connect() as conn:
            sizes = assert_views_match_0002(conn)
    assert all(sizes.values()), sizes  # the last round compared real rows, not empty frames


def best(engine: Engine) -> pd.DataFrame:
    with engine.connect() as conn:
        return queries.best_configs(conn, gpu_name=H200.gpu_name, dtype="bfloat16", shape=SHAPES[0])


def test_splitk_speedup_pairs_split_rows_with_unsplit_rows_not_stream_k(engine: Engine) -> None:
    """streamk_hybrid stores split_k = 1 but splits K itself: a stream-K row faster than every tiled
    row of the block shape is not the baseline (the demo's splitk preset: it had been, on all 12 shapes
    below one tile per SM), and the view's columns come from the tiled row."""
    tiled = rec("grouped", SHAPES[0], ms=2.0)
    streamk = rec("streamk_hybrid", SHAPES[0], ms=0.75)
    split = rec("splitk", SHAPES[0], split_k=4, ms=0.5)
    store(engine, [tiled, streamk, split])
    with engine.connect() as conn:
        (row,) = queries.splitk_speedup(conn).itertuples()
    assert (row.unsplit_variant, row.unsplit_ms, row.best_split_k, row.speedup) == ("grouped", 2.0, 4, 4.0)


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


def test_best_configs_copies_follow_ties_gpus_and_rewritten_winners(engine: Engine) -> None:
    """gpu_best's copy of each winning row (revision 0005) against the window pass over every row: ties in
    ms within an environment and across the two H200 hosts go to the lower id, the A100 is ranked
    apart, and a winner re-measured at the same ms with other columns changed is copied again."""
    with Session(engine) as session:
        sweep = start_sweep(session, name="later", spec={}, command="", n_points=1)
        session.commit()
    tie = [rec("tiled", SHAPES[0], block=b, ms=0.5, tflops=float(i)) for i, b in enumerate(BLOCKS)]
    store(engine, tie[:2])  # the first is the winner: same ms, lower id
    store(engine, tie[2:], env=H200_NODE2)  # ties with it from the other H200 host, a later id
    store(engine, [rec("tiled", SHAPES[0], ms=0.5, tflops=9.0), rec("cublas", SHAPES[1], ms=0.25)], env=A100)
    store(engine, [rec("tiled", SHAPES[1], ms=0.75), rec("tiled", SHAPES[1], block=BLOCKS[1], ms=0.7)])

    def best_rows() -> pd.DataFrame:
        with engine.connect() as conn:
            got = read(conn, "SELECT * FROM best_configs", "best_configs")
            want = read(conn, f"SELECT * FROM ({VIEWS_0002['best_configs']}) x", "best_configs")
        pd.testing.assert_frame_equal(without_eager_ms(got, want), want, obj="best_configs")
        return got.set_index(["gpu_name", "m", "variant"])

    first = best_rows()
    assert len(first) == 4 and first.loc[(H200.gpu_name, SHAPES[0][0], "tiled")].tflops == 0.0
    assert first.loc[(A100.gpu_name, SHAPES[0][0], "tiled")].tflops == 9.0
    assert first.loc[(H200.gpu_name, SHAPES[1][0], "tiled")].ms == 0.7

    # The winner again, a little faster, from a later sweep and with other numbers: the new run's row (a
    # later id; the older run of the point is no longer in the race) is copied.
    store(
        engine, [rec("tiled", SHAPES[0], block=BLOCKS[0], ms=0.45, tflops=7.0, rel_err=0.002)], sweep_id=sweep
    )
    again = best_rows().loc[(H200.gpu_name, SHAPES[0][0], "tiled")]
    assert again.id > first.loc[(H200.gpu_name, SHAPES[0][0], "tiled")].id
    assert (again.tflops, again.rel_err, again.sweep_id) == (7.0, 0.002, sweep)
    store(engine, [rec("tiled", SHAPES[0], block=BLOCKS[0], status="wrong", ms=0.5)])  # now the next tie
    assert best_rows().loc[(H200.gpu_name, SHAPES[0][0], "tiled")].tflops == 1.0


def test_rebuild_after_a_bulk_load_gives_what_the_writers_keep(engine: Engine) -> None:
    """db.summaries.rebuild (benchmarks/db_views.py's fill, which inserts around db.writes) refills every
    summary: the views and queries match the passes over every row, on both backends."""
    rng = random.Random(5)
    for env in (H200, H200_NODE2, A100):
        store(engine, [random_point(rng) for _ in range(60)], env=env)
    with engine.begin() as conn:
        for name in summaries.TABLES:
            conn.execute(text(f"DELETE FROM {name}"))
        summaries.rebuild(conn)
    assert all(count(engine, name) for name in ("shape_best", "split_best", "gpu_best", "variant_stats"))
    with engine.connect() as conn:
        assert_views_match_0002(conn)


def test_sweep_counts_keep_the_runs_a_later_sweep_repeats(engine: Engine) -> None:
    """A point re-measured by a later sweep (same code version) stays in the sweep that measured it first
    (revision 0006: every run is kept) and counts in both."""
    with Session(engine) as session:
        first, second = (start_sweep(session, name=n, spec={}, command="", n_points=2) for n in "ab")
        session.commit()
    point, other = rec("tiled", SHAPES[0], ms=1.0), rec("tiled", SHAPES[1], ms=2.0)
    store(engine, [point, other], sweep_id=first)
    store(engine, [rec("tiled", SHAPES[0], ms=0.9)], sweep_id=second)
    store(engine, [rec("cublas", SHAPES[1], ms=0.5)])  # no sweep: the unattributed sweep's
    with engine.connect() as conn:
        counts = queries.sweeps(conn).set_index("name").n_measurements.to_dict()
        assert_queries_match_scans(conn)
    assert counts == {"a": 2, "b": 1, "unattributed": 1}


def store_without_summaries(engine: Engine, records, env=H200, sweep_id: int | None = None) -> None:
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
                "sweep_id": sweep_id,
                "updated_at": r.created_at,
            }
            for r in records
        ]
        session.execute(table.insert(), rows)
        session.commit()


def view_frames(engine: Engine) -> dict[str, pd.DataFrame]:
    with engine.connect() as conn:
        return {name: read(conn, f"SELECT * FROM {name}", name) for name in KEYS}


SUMMARIES_0004 = {"gpu_best", "shape_stats", "variant_stats", "grouping_best", "sweep_counts"}
INDEXES_0004 = {"ix_measurements_recent", "ix_measurements_shape"}


def tables_and_indexes(engine: Engine) -> set[str]:
    found = inspect(engine)
    return {*found.get_table_names(), *(i["name"] for i in found.get_indexes("measurements"))}


def columns_of(engine: Engine, table: str) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns(table)}


def gpu_best_columns(engine: Engine) -> set[str]:
    return columns_of(engine, "gpu_best")


def grouping_best_indexes(engine: Engine) -> set[str]:
    return {i["name"] for i in inspect(engine).get_indexes("grouping_best")}


def test_revisions_0003_to_0005_backfill_on_upgrade_and_drop_on_downgrade(target: str) -> None:
    engine = make_engine(target)
    schema.upgrade(engine, "0002")
    rng = random.Random(7)
    points = {r.key: r for r in (random_point(rng) for _ in range(150))}  # distinct keys, as the table
    with engine.begin() as conn:  # a sweep as revision 0002 stored it (no heartbeat)
        sweep = conn.execute(
            text(
                "INSERT INTO sweeps (name, spec, command, host, started_at, status, n_points, n_ok, "
                "n_failed) VALUES ('old', '{}', '', 'vm', '2026-12-01 10:00:00', 'running', 150, 0, 0) "
                "RETURNING id"
            )
        ).scalar_one()
    for i, env in enumerate([H200, H200_NODE2, A100]):
        store_without_summaries(engine, list(points.values())[i::3], env=env, sweep_id=sweep if i else None)
    before = view_frames(engine)
    assert all(len(f) for f in before.values())

    schema.upgrade(engine, "0004")
    assert count(engine, "shape_best") > 0 and count(engine, "split_best") > 0
    assert min(count(engine, t) for t in SUMMARIES_0004) > 0
    for name, frame in view_frames(engine).items():
        pd.testing.assert_frame_equal(frame, before[name], obj=name)
    with engine.connect() as conn:
        assert_views_match_0002(conn, "0004")

    schema.upgrade(engine, "0005")  # gpu_best rebuilt with the winning rows' columns
    assert gpu_best_columns(engine) >= set(GPU_BEST_COPIED) - {"eager_ms"}  # eager_ms: revision 0007
    assert "ix_grouping_best_rows" in grouping_best_indexes(engine)
    assert {"split_k", "variant", "tiles", "tiles_per_sm"} <= columns_of(engine, "split_best")
    after = view_frames(engine)
    for name, frame in after.items():
        if name != "splitk_speedup":  # stream-K no longer its unsplit side: checked just below
            pd.testing.assert_frame_equal(frame, before[name], obj=name)
    assert "streamk_hybrid" in set(before["splitk_speedup"].unsplit_variant)
    assert "streamk_hybrid" not in set(after["splitk_speedup"].unsplit_variant)
    with engine.connect() as conn:
        assert_views_match_0002(conn, "0005")
    schema.downgrade(engine, "0004")  # 0004's narrow gpu_best and best_configs again
    assert gpu_best_columns(engine) == {"gpu_name", "dtype", "m", "n", "k", "variant", "measurement_id", "ms"}
    assert "ix_grouping_best_rows" not in grouping_best_indexes(engine)
    assert "split_k" not in columns_of(engine, "split_best")
    for name, frame in view_frames(engine).items():
        pd.testing.assert_frame_equal(frame, before[name], obj=name)

    schema.downgrade(engine, "0003")  # 0003's grouping_effect again, the 0004 tables and indexes gone
    assert (SUMMARIES_0004 | INDEXES_0004).isdisjoint(tables_and_indexes(engine))
    assert "shape_best" in tables_and_indexes(engine)
    for name, frame in view_frames(engine).items():
        pd.testing.assert_frame_equal(frame, before[name], obj=name)
    schema.upgrade(engine, "head")  # 0004's backfill over a database at 0003
    assert tables_and_indexes(engine) >= SUMMARIES_0004 | INDEXES_0004
    with engine.connect() as conn:
        assert_views_match_0002(conn)

    schema.downgrade(engine, "0002")
    assert {"shape_best", "split_best", *SUMMARIES_0004}.isdisjoint(inspect(engine).get_table_names())
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
        every = writes.done_keys(conn, [env_id])
        assert every == {r.key for r in records}
        variants, dtypes, shapes = {"splitk", "cublas"}, {"float32"}, set(SHAPES[1:])
        scoped = writes.done_keys(conn, [env_id], variants=variants, dtypes=dtypes, shapes=shapes)
        want = {k for k in every if k[1] in variants and k[2] in dtypes and k[3:6] in shapes}
        assert scoped == want and 0 < len(want) < len(every)
        ok = writes.done_keys(conn, [env_id], statuses=["ok"], variants=variants, shapes=shapes)
        assert ok == {
            r.key for r in records if r.status == "ok" and r.variant in variants and (r.m, r.n, r.k) in shapes
        }
        versions = {"c0ffee", "later"}
        assert writes.done_keys(conn, [env_id], code_versions=versions, variants=variants) == {
            k for k in every if k[1] in variants
        }
        assert writes.done_keys(conn, [env_id], code_versions=["later"]) == set()
        assert writes.done_keys(conn, [env_id], shapes=[]) == set()
        assert writes.done_keys(conn, [env_id], shapes=[(1, 2, 3)]) == set()


def test_merge_keeps_the_summaries(engine: Engine, target: str, tmp_path) -> None:
    """farm db merge writes measurements around db.writes' upsert: it refreshes what it touched."""
    rng = random.Random(11)
    store(engine, [random_point(rng) for _ in range(90)])
    source = make_engine(str(tmp_path / "other.db"))
    schema.ensure_current(source)
    for env in (H200, A100):  # the H200's points overlap, some faster, some turned wrong
        store(source, [random_point(rng) for _ in range(90)], env=env)
    source.dispose()
    merge([str(tmp_path / "other.db")], into=target)
    with engine.connect() as conn:
        sizes = assert_views_match_0002(conn)
    assert all(sizes.values()), sizes
