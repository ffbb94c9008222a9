"""Benchmark (not a test): the dashboard's typical query of each view on a realistic results database.

    python benchmarks/db_views.py --rows 1000000 --db /tmp/bench.db

Fills the database once (bulk insert; reused on later runs when it already holds --rows rows), then
times each query, filtered by one GPU and dtype as the dashboard does, --reps times, and prints the
best and median wall time. Results and the machine go in docs/results/db_views.md. Target: < 0.5 s
each at 10M rows. Time: the fill dominates (10M rows: 964 s on a 2-core VM; `make bench-db`'s 1M
rows about a tenth of that), then every query --reps times. A database filled by code of an older
schema revision is upgraded first (timed: the backfill of the summaries).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from db import queries, schema, summaries, writes
from db.engine import make_engine
from db.models import Measurement
from db.records import MEASUREMENT_FIELDS, eager_ms
from db.schema import open_engine
from db.writes import environment_id, finish_sweep, start_sweep
from tools.sample_db import H200

BASE = H200  # the sample H200 every benchmark and test uses (tools/sample_db.py)
# (environment, share of the rows): two H200 hosts with different torch (what compare_runs is for),
# an H100, an A100, and a sliver of interpreter rows from CI.
ENVIRONMENTS = (
    (BASE, 0.3),
    (dataclasses.replace(BASE, host="gpu-node-2", torch_version="2.8.0"), 0.2),
    (dataclasses.replace(BASE, gpu_name="NVIDIA H100 80GB HBM3", sm_count=132, l2_bytes=50 * 2**20), 0.25),
    (dataclasses.replace(BASE, gpu_name="NVIDIA A100-SXM4-80GB", sm_count=108, l2_bytes=40 * 2**20), 0.249),
    (
        dataclasses.replace(
            BASE,
            gpu_name="CPU (Triton interpreter)",
            sm_count=0,
            l2_bytes=0,
            backend="interpreter",
            peak_tflops=0,
        ),
        0.001,
    ),
)
DTYPES = ("bfloat16", "float16", "float32")
VARIANTS = ("tiled", "grouped", "splitk", "splitk_det", "streamk", "persistent_tma")
SIZES = (64, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 16384)
K_SIZES = (64, 256, 512, 1024, 2048, 4096, 8192, 16384, 65536)
# (status, weight): what a real sweep over aggressive configs produces.
STATUSES = (
    ("ok", 90),
    ("compile_error", 4),
    ("wrong", 2),
    ("crashed", 2),
    ("launch_error", 1),
    ("timeout", 1),
)
T0 = datetime(2025, 11, 1, tzinfo=UTC)
SWEEP_POINTS = 25_000  # one preset's worth: each environment's rows come from sweeps of this size


def _configs(variant: str) -> list[tuple[int, ...]]:
    """A variant's config grid: (block_m, block_n, block_k, group_m, split_k, num_warps, num_stages)."""
    group = (1, 8) if variant == "grouped" else (1,)
    split = (1, 2, 4, 8) if variant.startswith("splitk") else (1,)
    return [
        (bm, bn, bk, g, s, w, st)
        for bm in (64, 128)
        for bn in (64, 128, 256)
        for bk in (32, 64)
        for g in group
        for s in split
        for w in (4, 8)
        for st in (3, 4)
    ]


def _quotas(n_rows: int) -> list[int]:
    quotas = [round(n_rows * share) for _, share in ENVIRONMENTS[:-1]]
    return [*quotas, n_rows - sum(quotas)]


def _rows(
    n_rows: int, env_ids: list[int], sweeps: dict[int, list[int]], rng: random.Random
) -> Iterator[tuple]:
    """n_rows measurement tuples in MEASUREMENT_FIELDS order plus environment_id, sweep_id, updated_at."""
    shapes = [(m, n, k) for m in SIZES for n in SIZES for k in K_SIZES]
    rng.shuffle(shapes)  # 15 x 15 x 9 = 2025 shapes; each GPU and dtype measures about 1000 of them
    grids = {v: _configs(v) for v in VARIANTS}
    status_words, weights = zip(*STATUSES)
    for e, ((env, _), env_id, quota) in enumerate(zip(ENVIRONMENTS, env_ids, _quotas(n_rows))):
        made = 0
        # Each environment starts 500 shapes further along: GPUs overlap in part, as real studies do.
        mine = shapes[500 * e :] + shapes[: 500 * e]
        for i, dtype in enumerate(DTYPES):
            want = quota // 3 + (i < quota % 3)
            # One pass over the shapes holds about 200k rows per GPU and dtype; past that the same
            # shapes are measured again by a later night's code (months of nightly sweeps).
            for night in itertools.count():
                if want <= 0:
                    break
                code_version = "a1b2c3d" if night == 0 else f"a1b2c3d+{night}"
                for shape in mine:
                    if want <= 0:
                        break
                    m, n, k = shape
                    cublas_ms = 2 * m * n * k / (env.peak_tflops * 1e9 * rng.uniform(0.4, 0.8) + 1) + 0.004
                    todo = [("cublas", (0,) * 7)]
                    for variant in VARIANTS:
                        todo += [(variant, cfg) for cfg in rng.sample(grids[variant], rng.randint(8, 24))]
                    for variant, cfg in todo[:want]:
                        status = "ok" if variant == "cublas" else rng.choices(status_words, weights)[0]
                        ms = cublas_ms * rng.uniform(0.7, 3.0) if status in ("ok", "wrong") else None
                        if variant == "cublas":
                            ms = cublas_ms
                        sweep_id = sweeps[env_id][made // SWEEP_POINTS]
                        point = (code_version, dtype, variant, shape, cfg)
                        yield _row(env_id, sweep_id, env.backend, point, status, ms, rng)
                        made += 1
                    want -= len(todo)


def _row(env_id, sweep_id, backend, point, status, ms, rng) -> tuple:
    code_version, dtype, variant, shape, cfg = point
    m, n, k = shape
    bm, bn, bk, g, s, w, st = cfg
    key = "cublas" if variant == "cublas" else f"bm{bm}-bn{bn}-bk{bk}-g{g}-s{s}-w{w}-st{st}"
    tiles = -(-m // bm) * -(-n // bn) if bm else None
    when = T0 + timedelta(seconds=rng.randint(0, 30 * 86400))
    rec = {
        "code_version": code_version,
        "variant": variant,
        "dtype": dtype,
        "m": m,
        "n": n,
        "k": k,
        "config_key": key,
        "block_m": bm,
        "block_n": bn,
        "block_k": bk,
        "group_m": g,
        "split_k": s,
        "num_warps": w,
        "num_stages": st,
        "input_precision": "ieee" if dtype == "float32" else "",
        "status": status,
        "error": "" if status == "ok" else f"{status}: synthetic",
        "ms": ms,
        "ms_p20": ms and ms * 0.98,
        "ms_p80": ms and ms * 1.02,
        "reps": 100 if ms else None,
        "stream_ms": ms and ms * 0.99,
        "host_ms": ms and ms * 1.05,
        "eager_ms": eager_ms(ms and ms * 0.99, ms and ms * 1.05),  # its stream and host times' rule
        "timing_regime": "steady" if ms else "",
        "tflops": ms and 2 * m * n * k / ms / 1e9,
        "rel_err": rng.uniform(1e-4, 3e-3) if ms else None,
        "nondeterminism": rng.uniform(0, 1e-3) if ms and variant == "splitk" else 0.0 if ms else None,
        "tiles": tiles,
        "programs": tiles and tiles * s,
        "tiles_per_sm": tiles and tiles / 132,
        "waves": tiles and tiles * s / 132 / 2,
        "occupancy": 2,
        "operand_bytes": 2 * (m * k + k * n + m * n),
        "registers": 128,
        "shared_mem": 98304,
        "compile_s": rng.uniform(0.5, 3),
        "sm_clock_mhz": rng.choice((1980, 1755, 1500)),
        "temperature_c": rng.randint(40, 80),
        "throttled": rng.random() < 0.1,
        "throttle_reasons": "",
        "joules_per_launch": ms and ms * 0.7,
        "avg_watts": 700.0 if ms else None,
        "power_limit_w": 700.0,
        "worker": "gpu-node-1:0",
        "gpu_uuid": "GPU-0000",
        "backend": backend,
        "created_at": when.strftime("%Y-%m-%d %H:%M:%S.%f"),
    }
    return (*(rec[f] for f in MEASUREMENT_FIELDS), env_id, sweep_id, rec["created_at"])


def fill(engine: Engine, n_rows: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with Session(engine) as session:
        env_ids = [environment_id(session, env) for env, _ in ENVIRONMENTS]
        sweeps: dict[int, list[int]] = {}
        for env_id, quota in zip(env_ids, _quotas(n_rows)):
            sweeps[env_id] = []
            for i in range(-(-quota // SWEEP_POINTS)):
                sid = start_sweep(session, name=f"bench-{env_id}-{i}", spec={}, command="bench", n_points=0)
                finish_sweep(session, sid, status="finished", n_ok=0, n_failed=0)
                sweeps[env_id].append(sid)
        session.commit()
    cols = (*MEASUREMENT_FIELDS, "environment_id", "sweep_id", "updated_at")
    rows = _rows(n_rows, env_ids, sweeps, rng)
    if engine.dialect.name == "postgresql":
        # COPY: about 4x the rows per second of an executemany of INSERTs here.
        raw = engine.raw_connection()
        try:
            with raw.cursor() as cur, cur.copy(f"COPY measurements ({', '.join(cols)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            raw.commit()
        finally:
            raw.close()
        with engine.begin() as conn:
            summaries.rebuild(conn)  # the rows went around db.writes
        return
    sql = f"INSERT INTO measurements ({', '.join(cols)}) VALUES ({', '.join(['?'] * len(cols))})"
    with engine.begin() as conn:
        # A cache that holds the indexes: with the default 2 MB, SQLite spills and rewrites index
        # pages into the WAL again and again (10M rows: a WAL of many GB, hours).
        conn.exec_driver_sql("PRAGMA cache_size = -4000000")
        while chunk := [row for _, row in zip(range(50_000), rows)]:
            conn.exec_driver_sql(sql, chunk)
        summaries.rebuild(conn)  # the rows went around db.writes


def timed(fn: Callable[[], object], reps: int) -> tuple[float, float, object]:
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--db", default="/tmp/bench.db", help="SQLite path (or a PostgreSQL URL)")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)

    engine = make_engine(args.db)
    if schema.current(engine) not in (None, schema.head()):  # filled by older code: time the upgrade
        t = time.perf_counter()
        schema.upgrade(engine)
        print(f"upgraded to revision {schema.head()} in {time.perf_counter() - t:.1f} s")
    engine.dispose()
    engine = open_engine(args.db)
    with engine.connect() as conn:
        have = conn.scalar(select(func.count()).select_from(Measurement))
    if have != args.rows:
        if have:
            sys.exit(f"{args.db} holds {have} rows, not {args.rows}: delete it or pass another --db")
        t = time.perf_counter()
        fill(engine, args.rows)
        print(f"filled {args.rows:,} rows in {time.perf_counter() - t:.1f} s")

    gpu, dtype = "NVIDIA H200", "bfloat16"
    with engine.connect() as conn:
        env_ids = [int(i) for i in queries.environments(conn).id]
        # Two sweeps over the same shapes on the two H200 hosts (what compare_runs is for): the
        # second host's first sweep, and the first host's sweep holding that sweep's first shape.
        sweep_b = int(queries.sweeps(conn).query("name == 'bench-2-0'").id.iloc[0])
        sweep_a = (
            conn.execute(
                text(
                    "SELECT a.sweep_id FROM measurements a JOIN measurements b "
                    "ON (a.dtype, a.m, a.n, a.k) = (b.dtype, b.m, b.n, b.k) "
                    "WHERE b.id = (SELECT MIN(id) FROM measurements WHERE sweep_id = :b) "
                    "AND a.environment_id = :env LIMIT 1"
                ),
                {"b": sweep_b, "env": env_ids[0]},
            ).scalar()
            or sweep_b
        )  # a small --rows may have no overlap
        shape = tuple(queries.vs_cublas(conn, gpu_name=gpu, dtype=dtype)[["m", "n", "k"]].iloc[0])
    cases: list[tuple[str, Callable]] = [
        (
            "results (gpu, dtype, 5000 rows)",
            lambda c: queries.results(c, gpu_name=gpu, dtype=dtype, limit=5000),
        ),
        (
            "results (gpu, dtype, one shape)",
            lambda c: queries.results(
                c,
                gpu_name=gpu,
                dtype=dtype,
                m_range=shape[:1] * 2,
                n_range=shape[1:2] * 2,
                k_range=shape[2:] * 2,
            ),
        ),
        ("count_results (gpu, dtype)", lambda c: [queries.count_results(c, gpu_name=gpu, dtype=dtype)]),
        ("best_configs (gpu, dtype)", lambda c: queries.best_configs(c, gpu_name=gpu, dtype=dtype)),
        ("splitk_speedup (gpu, dtype)", lambda c: queries.splitk_speedup(c, gpu_name=gpu, dtype=dtype)),
        (
            "splitk_curve (one shape)",
            lambda c: queries.splitk_curve(c, gpu_name=gpu, dtype=dtype, m=shape[0], n=shape[1], k=shape[2]),
        ),
        ("grouping_effect (gpu, dtype)", lambda c: queries.grouping_effect(c, gpu_name=gpu, dtype=dtype)),
        ("vs_cublas (gpu, dtype)", lambda c: queries.vs_cublas(c, gpu_name=gpu, dtype=dtype)),
        ("accuracy (gpu, dtype)", lambda c: queries.accuracy(c, gpu_name=gpu, dtype=dtype)),
        ("compare_runs (25k-point sweeps)", lambda c: queries.compare_runs(c, sweep_a, sweep_b)),
        ("summary", queries.summary),
        ("filter_options", queries.filter_options),
        ("sweeps", queries.sweeps),
        ("environments", queries.environments),
        ("done_keys (one environment, unscoped)", lambda c: writes.done_keys(c, env_ids[:1])),
        *resume_cases(engine, env_ids[:1]),
    ]
    print(f"{'query':50} {'best s':>8} {'median s':>9} {'rows':>9}")
    with engine.connect() as conn:
        for name, fn in cases:
            best, median, out = timed(lambda fn=fn: fn(conn), args.reps)
            n = len(out) if hasattr(out, "__len__") and not isinstance(out, dict) else 1
            flag = "" if median < 0.5 else "  <-- over 0.5 s"
            print(f"{name:50} {best:8.3f} {median:9.3f} {n:9,}{flag}")
    bench_refresh(engine, args.reps)
    engine.dispose()
    return 0


def resume_cases(engine: Engine, env_ids: list[int]) -> list[tuple[str, Callable]]:
    """done_keys as the driver's resume asks it: scoped to a sweep's code version (the environment's
    latest night), variants, dtypes and shapes."""
    with engine.connect() as conn:
        shapes = [
            tuple(r) for r in conn.execute(text("SELECT DISTINCT m, n, k FROM shape_best ORDER BY m, n, k"))
        ]
        latest = conn.execute(
            text("SELECT code_version FROM measurements WHERE environment_id = :e ORDER BY id DESC LIMIT 1"),
            {"e": env_ids[0]},
        ).scalar_one()
    rng = random.Random(1)
    cases = []
    for label, n_shapes, variants, dtypes in (
        (
            "splitk-like: 12 shapes x 4 variants",
            12,
            ["grouped", "splitk", "splitk_det", "cublas"],
            ["bfloat16"],
        ),
        ("full-like: 130 shapes x 7 x 3 dtypes", 130, [*VARIANTS, "cublas"], list(DTYPES)),
    ):
        scope = dict(
            code_versions=[latest],
            variants=variants,
            dtypes=dtypes,
            shapes=rng.sample(shapes, min(n_shapes, len(shapes))),
        )
        cases.append((f"done_keys ({label})", lambda c, s=scope: writes.done_keys(c, env_ids, **s)))
    # The same sweep's scope over every code version (what a caller without code_versions reads).
    anyv = {**scope, "code_versions": None}
    cases.append(("done_keys (full-like, any code version)", lambda c: writes.done_keys(c, env_ids, **anyv)))
    return cases


def bench_refresh(engine: Engine, reps: int) -> None:
    """What the writer adds to a flush: recomputing the summaries of 5 shapes x 7 variants (rolled back)."""
    with engine.connect() as conn:
        (env_id,) = conn.execute(
            text("SELECT environment_id FROM measurements ORDER BY id DESC LIMIT 1")
        ).one()
        shapes = conn.execute(
            text("SELECT DISTINCT dtype, m, n, k FROM shape_best WHERE environment_id = :e LIMIT 5"),
            {"e": env_id},
        ).all()
        groups = {(*shape, v) for shape in shapes for v in (*VARIANTS, "cublas")}
        best, median, _ = timed(lambda: summaries.refresh(conn, env_id, groups), reps)
        conn.rollback()
    print(f"{'refresh (5 shapes x 7 variants, a flush)':50} {best:8.3f} {median:9.3f}")


if __name__ == "__main__":
    sys.exit(main())
