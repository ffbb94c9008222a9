"""Schema checks on open, idempotent writes, resume keys and the shared query functions, on both backends."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from dbkit import A100, H200, HEAD, INTERPRETER, count, grid, rec, run_together, snapshot, store
from sqlalchemy import Engine, inspect, select, text
from sqlalchemy.orm import Session

from db import queries, schema, writes
from db.engine import describe, make_engine
from db.errors import DatabaseError
from db.models import Base, Environment, Measurement, Sweep
from db.records import point_key
from db.views import VIEW_NAMES
from db.writes import environment_id, finish_sweep, start_sweep, upsert_measurements

EXTRA_VERSIONS = Path(__file__).with_name("migrations")


# ---- schema checks on open ----


def test_empty_database_is_created_at_head(target: str) -> None:
    engine = make_engine(target)
    schema.ensure_current(engine)
    assert schema.current(engine) == schema.head() == HEAD
    insp = inspect(engine)
    assert {"environments", "sweeps", "measurements"} <= set(insp.get_table_names())
    assert set(VIEW_NAMES) <= set(insp.get_view_names())
    schema.ensure_current(engine)  # a second open is a no-op
    engine.dispose()


def test_models_match_migration(engine: Engine) -> None:
    """Revision 0001 (explicit DDL) creates exactly what the models describe: no autogenerate diff."""
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == []


def test_empty_database_not_created_when_not_asked(target: str) -> None:
    engine = make_engine(target)
    with pytest.raises(DatabaseError, match="not a farm results database") as err:
        schema.ensure_current(engine, create=False)
    assert f"farm db upgrade --db {describe(engine)}" in str(err.value)
    assert inspect(engine).get_table_names() == []
    engine.dispose()


def test_older_revision_says_how_to_upgrade(engine: Engine) -> None:
    """Code that knows one more revision meets a database at the package's head."""
    newer_code = schema.alembic_config(extra_version_locations=[EXTRA_VERSIONS])
    with pytest.raises(DatabaseError) as err:
        schema.ensure_current(engine, create=False, cfg=newer_code)
    msg = str(err.value)
    assert f"at schema revision {HEAD}, this code expects later" in msg
    assert f"`farm db upgrade --db {describe(engine)}`" in msg
    assert schema.current(engine) == HEAD  # refused, not upgraded behind the user's back


def test_newer_revision_is_refused(engine: Engine) -> None:
    store(engine, [rec()])
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
    for attempt in (schema.ensure_current, schema.upgrade):
        with pytest.raises(
            DatabaseError, match=r"revision f00d, which this version of the code does not know"
        ):
            attempt(engine)
    assert schema.current(engine) == "f00d" and count(engine) == 1


def test_someone_elses_database_is_refused(target: str) -> None:
    engine = make_engine(target)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"))
    for attempt in (schema.ensure_current, schema.upgrade):
        with pytest.raises(
            DatabaseError, match="not a farm results database: it has no schema revision but holds notes"
        ):
            attempt(engine)
    assert inspect(engine).get_table_names() == ["notes"]
    engine.dispose()


# ---- writes ----


def test_environment_id_gets_or_creates(engine: Engine) -> None:
    with Session(engine) as s:
        first, again, other = environment_id(s, H200), environment_id(s, H200), environment_id(s, A100)
        s.commit()
    assert first == again != other
    with Session(engine) as s:
        assert environment_id(s, dataclasses.replace(H200)) == first
        row = s.get(Environment, first)
        assert (row.fingerprint, row.gpu_name, row.memory_bytes) == (
            H200.fingerprint,
            "NVIDIA H200",
            150_754_820_096,
        )
    assert count(engine, "environments") == 2


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"peak_tflops": 1979.0}, id="datasheet-tflops-edited"),
        pytest.param({"peak_gbps": 4900.0, "peak_tflops": 0.0}, id="datasheet-gbps-edited"),
    ],
)
def test_display_data_is_not_identity(engine: Engine, change: dict) -> None:
    """Editing the datasheet peaks keeps the environment: a resumed sweep skips what it measured."""
    edited = dataclasses.replace(H200, **change)
    assert edited.fingerprint == H200.fingerprint
    with Session(engine) as s:
        assert environment_id(s, H200) == environment_id(s, edited)
        s.commit()
    assert count(engine, "environments") == 1


def test_environment_row_with_an_older_fingerprint_is_found(engine: Engine) -> None:
    """Rows written when the fingerprint hashed the peaks too: found by their identity columns."""
    with Session(engine) as s:
        first = environment_id(s, H200)
        s.execute(Environment.__table__.update().values(fingerprint="0123456789abcdef"))
        s.commit()
    with Session(engine) as s:
        assert environment_id(s, dataclasses.replace(H200, peak_gbps=1.0)) == first
        assert environment_id(s, dataclasses.replace(H200, host="other")) != first
        s.commit()
    assert count(engine, "environments") == 2


def test_environment_id_race(engine: Engine) -> None:
    """Four sessions ask for the same new environment at once: one row, one id."""

    def get_id() -> int:
        with Session(engine) as s:
            env_id = environment_id(s, INTERPRETER)
            s.commit()
        return env_id

    ids, errors = run_together(4, get_id)
    assert errors == [] and len(ids) == 4 and len(set(ids)) == 1
    assert count(engine, "environments") == 1


def test_sweep_lifecycle(engine: Engine) -> None:
    with Session(engine) as s:
        sid = start_sweep(
            s, name="study", spec={"dtypes": ["bfloat16"], "k": [512, 4096]}, command="farm sweep", n_points=7
        )
        s.commit()
        sweep = s.get(Sweep, sid)
        assert (sweep.status, sweep.n_points, sweep.finished_at) == ("running", 7, None)
        assert sweep.spec == '{"dtypes": ["bfloat16"], "k": [512, 4096]}' and sweep.host
        finish_sweep(s, sid, status="interrupted", n_ok=5, n_failed=1)
        s.commit()
        s.refresh(sweep)
        assert (sweep.status, sweep.n_ok, sweep.n_failed) == ("interrupted", 5, 1)
        assert sweep.finished_at >= sweep.started_at and sweep.started_at.tzinfo is not None
        with pytest.raises(ValueError, match="sweep status 'done' is not one of"):
            finish_sweep(s, sid, status="done", n_ok=0, n_failed=0)
        with pytest.raises(DatabaseError, match="no sweep with id 999"):
            finish_sweep(s, 999, status="failed", n_ok=0, n_failed=0)


def test_same_batch_twice_stores_it_once(engine: Engine) -> None:
    failures = ("compile_error", "crashed", "timeout", "launch_error")
    batch = grid(300) + [rec(status=st, split_k=i + 2, ms=None) for i, st in enumerate(failures)]
    with Session(engine) as s:
        sid = start_sweep(s, name="a", spec={}, command="", n_points=len(batch))
        s.commit()
    for _ in range(2):
        with Session(engine) as s:
            env_id = environment_id(s, H200)
            assert upsert_measurements(s, environment_id=env_id, sweep_id=sid, records=batch) == 304
            s.commit()
        if _ == 0:
            first = snapshot(engine)
    assert snapshot(engine) == first  # same rows, same ids, same values
    assert len(first) == 304 and [r[0] for r in first] == list(range(1, 305))


def test_every_run_is_kept_and_the_newest_is_latest(engine: Engine) -> None:
    with Session(engine) as s:
        sweeps = [start_sweep(s, name=n, spec={}, command="", n_points=1) for n in ("a", "b")]
        s.commit()
    point = dict(variant="splitk", shape=(1000, 3000, 16384), split_k=4)
    store(engine, [rec(**point, ms=2.0, status="wrong")], sweep_id=sweeps[0])
    store(engine, [rec(**point, ms=1.0, worker="node-2:0")], sweep_id=sweeps[1])
    store(engine, [rec(**point, ms=1.5, worker="node-2:0")], sweep_id=sweeps[1])  # its own run: updated
    with Session(engine) as s:
        rows = s.scalars(select(Measurement).order_by(Measurement.id)).all()
        got = [(r.id, r.ms, r.status, r.sweep_id, r.latest) for r in rows]
        assert got == [(1, 2.0, "wrong", sweeps[0], 0), (2, 1.5, "ok", sweeps[1], 1)]
        assert rows[1].error == "" and rows[1].updated_at >= rows[1].created_at
    with engine.connect() as conn:
        assert queries.results(conn)[["id", "ms"]].values.tolist() == [[2, 1.5]]  # the newest run
        assert queries.results(conn, sweep=sweeps[0])[["id", "latest"]].values.tolist() == [[1, 0]]
    # A write without a sweep (an import) is a run of the unattributed sweep, and the newest.
    store(engine, [rec(**point, ms=1.25)], sweep_id=None)
    with Session(engine) as s:
        unattributed = s.scalars(select(Sweep).where(Sweep.name == "unattributed")).one()
        latest = s.scalars(select(Measurement).where(Measurement.latest == 1)).one()
        assert (latest.sweep_id, latest.ms) == (unattributed.id, 1.25)
    assert count(engine) == 3


def test_repeated_key_in_one_batch_keeps_the_last(engine: Engine) -> None:
    with Session(engine) as s:
        env_id = environment_id(s, H200)
        n = upsert_measurements(s, environment_id=env_id, sweep_id=None, records=[rec(ms=3.0), rec(ms=2.0)])
        s.commit()
    with engine.connect() as conn:
        assert n == 1 and queries.results(conn).ms.tolist() == [2.0]


def test_batch_larger_than_a_chunk(engine: Engine) -> None:
    store(engine, grid(1234))  # 500-row chunks: 500 + 500 + 234
    assert count(engine) == 1234


def test_bad_record_writes_nothing(engine: Engine) -> None:
    with Session(engine) as s:
        env_id = environment_id(s, H200)
        with pytest.raises(ValueError, match="status 'exploded'"):
            upsert_measurements(
                s, environment_id=env_id, sweep_id=None, records=[rec(), rec(status="exploded")]
            )
    assert count(engine) == 0


def test_writes_join_the_callers_transaction(engine: Engine) -> None:
    with Session(engine) as s:
        env_id = environment_id(s, H200)
        upsert_measurements(s, environment_id=env_id, sweep_id=None, records=grid(10))
        s.rollback()
    assert count(engine) == 0 and count(engine, "environments") == 0


def test_done_keys(engine: Engine) -> None:
    ok, failed = rec(ms=1.0), rec("splitk", split_k=2, status="timeout", ms=None)
    h200 = store(engine, [ok, failed])
    a100 = store(engine, [rec("tiled", (512, 512, 512))], env=A100)
    with engine.connect() as conn:
        assert writes.done_keys(conn, [h200]) == {ok.key, failed.key}
        assert writes.done_keys(conn, [h200], statuses=["ok"]) == {ok.key}
        assert writes.done_keys(conn, np.array([h200, a100])) == {
            ok.key,
            failed.key,
            rec("tiled", (512, 512, 512)).key,
        }
        assert writes.done_keys(conn, []) == set()
    assert ok.key == point_key("c0ffee", "grouped", "bfloat16", 4096, 4096, 4096, ok.config_key)


# ---- query functions ----


@pytest.fixture
def filled(engine: Engine) -> Engine:
    """Two sweeps over the same points (second one re-measured on another host), plus an A100 and CI rows."""
    host2 = dataclasses.replace(H200, host="gpu-node-2", torch_version="2.8.0")
    with Session(engine) as s:
        a, b = (
            start_sweep(s, name=n, spec={}, command="farm sweep", n_points=4) for n in ("before", "after")
        )
        s.commit()
    shape = (4096, 4096, 512)
    store(
        engine,
        [
            rec("tiled", shape, ms=1.00, ms_p20=0.99, ms_p80=1.01),
            rec("splitk", shape, split_k=4, ms=0.50, ms_p20=0.49, ms_p80=0.51),
            rec("grouped", shape, ms=2.00, ms_p20=1.90, ms_p80=2.10),
            rec("splitk", shape, split_k=8, ms=0.4, status="wrong", rel_err=0.5, nondeterminism=1e-3),
        ],
        sweep_id=a,
    )
    store(
        engine,
        [
            rec("tiled", shape, ms=1.005, ms_p20=0.995, ms_p80=1.015),  # same within noise
            rec("splitk", shape, split_k=4, ms=0.40, ms_p20=0.39, ms_p80=0.41),  # faster
            rec("grouped", shape, ms=3.00, ms_p20=2.90, ms_p80=3.10),  # slower
        ],
        env=host2,
        sweep_id=b,
    )
    store(engine, [rec("tiled", (512, 512, 512), dtype="float32", ms=0.1, rel_err=1e-6)], env=A100)
    store(
        engine, [rec("tiled", (64, 64, 64), ms=5.0, throttled=True, backend="interpreter")], env=INTERPRETER
    )
    return engine


def test_summary(filled: Engine) -> None:
    with filled.connect() as conn:
        s = queries.summary(conn)
    # 2 sweeps: the unattributed one of the rows stored without a sweep never ran
    assert s["measurements"] == 9 and s["sweeps"] == 2 and s["environments"] == 4
    assert s["by_status"] == {"ok": 8, "wrong": 1}
    assert s["by_backend"] == {"cuda": 8, "interpreter": 1}
    assert s["by_gpu"] == {"NVIDIA H200": 7, "NVIDIA A100-SXM4-80GB": 1, "CPU (Triton interpreter)": 1}
    assert s["last_sweep"]["name"] == "after" and s["last_sweep"]["status"] == "running"


def test_results_filters_and_types(filled: Engine) -> None:
    with filled.connect() as conn:
        df = queries.results(conn, gpu_name="NVIDIA H200", variant=["splitk", "tiled"], status="ok")
        assert sorted(df.ms) == [0.4, 0.5, 1.0, 1.005]
        assert df.m.dtype == "Int64" and df.ms.dtype == "float64" and df.throttled.dtype == "boolean"
        assert str(df.created_at.dtype).startswith("datetime64") and str(df.created_at.dt.tz) == "UTC"
        assert len(queries.results(conn, k_range=(512, 512), limit=2)) == 2
        assert list(queries.results(conn, m_range=(1, 600), dtype="float32").gpu_name) == [
            "NVIDIA A100-SXM4-80GB"
        ]
        ci = queries.results(conn, gpu_name="CPU (Triton interpreter)")
        assert ci.throttled.tolist() == [True] and ci.backend.tolist() == ["interpreter"]


def test_view_queries_filter_like_the_dashboard(filled: Engine) -> None:
    with filled.connect() as conn:
        best = queries.best_configs(conn, gpu_name="NVIDIA H200", dtype="bfloat16", shape=(4096, 4096, 512))
        assert list(zip(best.variant, best.ms)) == [("splitk", 0.4), ("tiled", 1.0), ("grouped", 2.0)]
        sk = queries.splitk_speedup(conn, gpu_name=np.str_("NVIDIA H200"), dtype="bfloat16")
        assert list(zip(sk.best_split_k, sk.speedup)) == [(4, 2.5)]
        assert queries.vs_cublas(conn, gpu_name="NVIDIA H200").empty
        assert queries.grouping_effect(conn, gpu_name="NVIDIA H200").empty
        assert queries.best_configs(conn, gpu_name="NVIDIA H100").empty


def test_splitk_curve(filled: Engine) -> None:
    with filled.connect() as conn:
        df = queries.splitk_curve(conn, gpu_name="NVIDIA H200", dtype="bfloat16", m=4096, n=4096, k=512)
    # split_k 8 only has a failed row: not on the curve.
    assert df[["split_k", "ms", "variant", "speedup"]].values.tolist() == [
        [1, 1.0, "tiled", 1.0],
        [4, 0.4, "splitk", 2.5],
    ]


def test_accuracy(filled: Engine) -> None:
    with filled.connect() as conn:
        df = queries.accuracy(conn, gpu_name="NVIDIA H200", variant="splitk")
    assert df[["variant", "dtype", "n_checked", "n_wrong", "n_nondeterministic"]].values.tolist() == [
        ["splitk", "bfloat16", 3, 1, 1]
    ]
    assert df.rel_err_max.tolist() == [0.5] and df.nondeterminism_max.tolist() == [1e-3]


def test_compare_runs_pairs_points_across_hosts_of_one_gpu(filled: Engine) -> None:
    with filled.connect() as conn:
        sweeps = queries.sweeps(conn)
        a, b = sorted(sweeps.id[sweeps.name != "unattributed"])
        runs = queries.compare_runs(conn, a, b)
    assert sweeps.n_measurements.tolist() == [2, 3, 4]  # newest first
    # b ran on another host of the same GPU model; b over a
    got = {r.variant: (r.verdict, round(r.ratio_b_over_a, 4)) for r in runs.points.itertuples()}
    assert got == {"tiled": ("same", 1.005), "splitk": ("faster", 0.8), "grouped": ("slower", 1.5)}


def test_filter_options_and_environments(filled: Engine) -> None:
    with filled.connect() as conn:
        opts = queries.filter_options(conn)
        envs = queries.environments(conn)
    assert opts["gpu_names"] == ["CPU (Triton interpreter)", "NVIDIA A100-SXM4-80GB", "NVIDIA H200"]
    assert opts["dtypes"] == ["bfloat16", "float32"] and opts["statuses"] == ["ok", "wrong"]
    assert opts["variants"] == ["grouped", "splitk", "tiled"]
    assert (opts["m"], opts["k"]) == ((64, 4096), (64, 512))
    assert envs.n_measurements.tolist() == [4, 3, 1, 1] and envs.n_measurements.dtype == "Int64"


def test_iter_view_in_chunks(filled: Engine) -> None:
    with filled.connect() as conn:
        chunks = list(queries.iter_view(conn, "results", chunk_rows=4))
        views = "results, run_results, best_configs"
        with pytest.raises(DatabaseError, match=f"unknown view 'bogus'; the views are: {views}"):
            queries.view("bogus")
    assert [len(c) for c in chunks] == [4, 4, 1]
    assert sorted(pd.concat(chunks).id) == list(range(1, 10))


def test_two_processes_create_one_database_at_once(target: str) -> None:
    """Three sweeps started together on a new database: one creates it, the others find it at head."""

    def open_it() -> None:
        engine = make_engine(target)
        schema.ensure_current(engine)
        engine.dispose()

    assert run_together(3, open_it)[1] == []
    engine = make_engine(target)
    assert schema.current(engine) == HEAD
    engine.dispose()


def test_numpy_values_are_stored_as_numbers(engine: Engine) -> None:
    """A worker that computes with numpy must not leave BLOBs in integer columns."""
    store(
        engine,
        [rec(tiles=np.int64(192), tiles_per_sm=np.float32(1.5), reps=np.int32(7), throttled=np.bool_(True))],
    )
    with engine.connect() as conn:
        row = conn.execute(text("SELECT tiles, tiles_per_sm, reps, throttled FROM measurements")).one()
        assert conn.execute(text("SELECT COUNT(*) FROM results WHERE tiles = 192")).scalar() == 1
    assert (row.tiles, row.tiles_per_sm, row.reps, bool(row.throttled)) == (192, 1.5, 7, True)
