"""Benchmark (not a test): how many records a second the driver, the one database writer, can store.

    python benchmarks/writer_rate.py --db /tmp/writer.db
    python benchmarks/writer_rate.py --db postgresql+psycopg://postgres@127.0.0.1:5433/postgres

The driver flushes what its workers sent once a second (farm/driver.py, FLUSH_EVERY_S), one
transaction per flush through db.writes.upsert_measurements. This times exactly that write path
with synthetic MeasurementRecord batches of the sizes N GPUs produce in a second (the farm
measures about 23 points/s per H200 on the splitk preset, 1400/min), each flush new points as in
a sweep, on top of what the database already holds (--db may be benchmarks/db_views.py's 1M-row file).
Prints per flush size: median and p95 seconds of a flush, records/s, and the share of the driver's
second it takes. Results go in docs/cluster.md ("How many GPUs one driver feeds"; no results file).
Time: seconds per flush size after the fill. Since revision 0003 a flush also recomputes the
per-shape summaries of what it wrote (db.summaries); these records
are each a new shape, the worst case for that (a sweep writes about 100 configs per shape).

A throwaway PostgreSQL as tests/db/conftest.py starts one (as root: runuser -u postgres --):
    initdb -D /tmp/pg/data -U postgres --auth=trust --no-sync
    pg_ctl -D /tmp/pg/data -l /tmp/pg/log -o "-p 5433 -k /tmp/pg -c listen_addresses=127.0.0.1" -w start
(the tests also turn fsync off; this bench keeps the server's durable defaults).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from db.records import MeasurementRecord
from db.schema import open_engine
from db.writes import environment_id, finish_sweep, start_sweep, upsert_measurements
from tools.sample_db import H200

POINTS_PER_S_PER_GPU = 23.0  # splitk preset on one H200: 1215-1452 points/min measured
GPU_COUNTS = (1, 8, 32, 128, 512)
ENV = dataclasses.replace(H200, host="bench-writer")  # the sample H200 every benchmark and test uses


def records(n: int, serial: itertools.count, rng: random.Random) -> list[MeasurementRecord]:
    """n new points, every column filled as a worker fills an `ok` row."""
    out = []
    for _ in range(n):
        i = next(serial)
        m, n_, k = 256 * (1 + i % 16), 256 * (1 + i // 16 % 16), 1024 * (1 + i // 256)
        ms = rng.uniform(0.01, 5.0)
        out.append(
            MeasurementRecord(
                code_version="bench",
                variant=rng.choice(("grouped", "splitk", "splitk_det")),
                dtype="bfloat16",
                m=m,
                n=n_,
                k=k,
                config_key=f"bm128-bn128-bk64-g1-s{i % 5}-w4-st3-{i}",
                block_m=128,
                block_n=128,
                block_k=64,
                group_m=1,
                split_k=1 << (i % 5),
                num_warps=4,
                num_stages=3,
                input_precision="",
                status="ok",
                ms=ms,
                ms_p20=ms * 0.98,
                ms_p80=ms * 1.02,
                reps=rng.randint(10, 100),
                tflops=2 * m * n_ * k / ms / 1e9,
                rel_err=rng.uniform(1e-4, 3e-3),
                nondeterminism=0.0,
                tiles=4,
                programs=8,
                tiles_per_sm=0.03,
                waves=0.06,
                occupancy=2,
                operand_bytes=2 * (m * k + k * n_ + m * n_),
                registers=128,
                shared_mem=98304,
                compile_s=rng.uniform(0.3, 2.0),
                sm_clock_mhz=1980,
                temperature_c=50,
                throttled=False,
                worker="bench:0",
                gpu_uuid="GPU-bench",
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="/tmp/writer.db", help="SQLite path or PostgreSQL URL")
    ap.add_argument("--gpus", type=int, nargs="+", default=list(GPU_COUNTS), help="flush sizes, in GPUs")
    ap.add_argument("--flushes", type=int, default=10, help="flushes timed per size")
    args = ap.parse_args(argv)
    upsert = upsert_measurements

    engine = open_engine(args.db)
    rng = random.Random(0)
    # A new environment per run: every key is new, as in a sweep (resumes skip what is stored).
    env = dataclasses.replace(ENV, host=f"bench-writer-{uuid.uuid4().hex[:8]}")
    with Session(engine) as session:
        env_id = environment_id(session, env)
        sweep_id = start_sweep(session, name="writer-rate", spec={}, command="bench", n_points=0)
        session.commit()
    serial = itertools.count()
    print(f"{engine.url.get_backend_name()}: {args.db}, {upsert.__name__}")
    print(f"{'GPUs':>5} {'records/flush':>13} {'median s':>9} {'p95 s':>7} {'records/s':>10} {'of 1 s':>7}")
    for gpus in args.gpus:
        size = max(1, round(gpus * POINTS_PER_S_PER_GPU))
        times = []
        for _ in range(args.flushes):
            batch = records(size, serial, rng)  # built outside the clock: the workers made them
            start = time.perf_counter()
            with Session(engine) as session:  # as Driver._flush: one session, one commit
                upsert(session, environment_id=env_id, sweep_id=sweep_id, records=batch)
                session.commit()
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        p95 = sorted(times)[max(0, round(0.95 * len(times)) - 1)]
        rate = size / median
        print(f"{gpus:5d} {size:13d} {median:9.4f} {p95:7.4f} {rate:10.0f} {median:7.1%}", flush=True)
    with Session(engine) as session:
        finish_sweep(session, sweep_id, status="finished", n_ok=next(serial), n_failed=0)
        session.commit()
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
