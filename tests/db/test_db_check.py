"""`farm db check`: every shipped database passes; the H100 study as it was shipped before revision 0009 (its
five impossible cuBLAS rows stored ok) fails, naming those five; --mark marks them and the check passes;
revision 0009 marks such rows on upgrade and deletes them on downgrade; no page of the H100 study draws
a point above the compute roof."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from dbkit import H200, rec, store
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

import kernels.sizes
from db import check, physics, queries, schema
from db.engine import make_engine
from db.export import reading
from db.writes import start_sweep

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "dashboard" / "demo"
SHIPPED = sorted(DEMO.glob("*.db"))
STUDY = DEMO / "h100-study.db"
# The five cuBLAS rows of the H100 study's sweep #2 that read 0.75-1.0 us of kernel time (a profile that
# lost the launch's kernel) against a roofline of 4.3-139 us.
IMPOSSIBLE = {"4096x4096x4096", "8192x8192x128", "2048x8192x128", "6000x333x4100", "1234x4321x2345"}


@pytest.fixture
def as_shipped(tmp_path: Path) -> Path:
    """A copy of the H100 study as shipped before revision 0009: the five rows stored ok at revision 0008.
    (The copy keeps 0009's status CHECK, which neither the check nor the upgrade reads.)"""
    path = tmp_path / "h100-study.db"
    shutil.copyfile(STUDY, path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE measurements SET status = 'ok', error = '' WHERE status = 'implausible'")
        conn.execute("UPDATE alembic_version SET version_num = '0008'")
    conn.close()
    return path


def _shapes(out: str) -> set[str]:
    """The shape column of `farm db check`'s table."""
    lines = out.splitlines()
    at = lines[0].index("shape")
    return {line[at:].split()[0] for line in lines[1:-1]}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_database_passes(farm_main, path: Path, capsys) -> None:
    assert farm_main(["db", "check", "--db", str(path)]) == 0
    assert "ok rows pass the physics and consistency checks" in capsys.readouterr().out


def test_the_study_as_shipped_fails_on_its_five_impossible_rows_read_only(
    farm_main, as_shipped: Path, capsys
) -> None:
    before = as_shipped.read_bytes()
    assert farm_main(["db", "check", "--db", str(as_shipped)]) == 1
    out = capsys.readouterr().out
    assert _shapes(out) == IMPOSSIBLE
    assert out.count("beats the roofline") == 5
    assert "(revision 0008): 5 of 8,684 ok rows are impossible" in out.splitlines()[-1]
    assert as_shipped.read_bytes() == before  # not upgraded, not written
    assert sorted(p.name for p in as_shipped.parent.iterdir()) == ["h100-study.db"]


def test_mark_upgrades_marks_the_five_and_the_check_then_passes(farm_main, as_shipped: Path, capsys) -> None:
    target = str(as_shipped)
    with sqlite3.connect(as_shipped) as conn:
        n_ok_before = conn.execute("SELECT n_ok FROM sweeps WHERE id = 2").fetchone()[0]
    conn.close()
    assert farm_main(["db", "check", "--db", target, "--mark"]) == 0
    assert "marked 5 implausible, upgraded from 0008 to 0009; 0 left" in capsys.readouterr().out
    assert farm_main(["db", "check", "--db", target]) == 0
    with reading(target) as conn:
        rows = conn.execute(
            text("SELECT m, n, k, error FROM measurements WHERE status = 'implausible' ORDER BY id")
        ).all()
        n_ok = conn.execute(text("SELECT n_ok FROM sweeps WHERE id = 2")).scalar_one()
        best = queries.best_configs(conn, variant="cublas")
    assert {f"{m}x{n}x{k}" for m, n, k, _ in rows} == IMPOSSIBLE
    assert all("beats the roofline" in error for *_, error in rows)
    assert n_ok == n_ok_before - 5
    assert best.tflops.max() < 989.4  # the summaries hold another sweep's cuBLAS row, or none


def test_mark_at_head_marks_what_the_check_finds(farm_main, sqlite_target: str) -> None:
    """Rows of every kind the check rejects, stored ok at head (the worker would store them implausible
    now): --mark marks each, and only those, and no summary keeps them."""
    target = sqlite_target
    engine = make_engine(target)
    schema.upgrade(engine)
    shape = (2048, 1536, 4104)
    bad = [
        rec("cublas", shape, ms=1e-3, stream_ms=0.2),  # under the roofline
        rec("tiled", shape, ms=0.1, stream_ms=0.05),  # kernel time twice its stream time
        rec("grouped", shape, ms=0.1, stream_ms=6.0),  # stream time 60x its kernel time
        rec("splitk", shape, split_k=3, ms=0.1, tflops=1.0),  # tflops is not 2MNK / ms
        rec("tiled", shape, block=(64, 64, 32), ms=0.1, ms_p20=0.11),  # median below its p20
    ]
    good = [rec("tiled", shape, block=(128, 64, 32), ms=0.2), rec("tiled", (495, 5333, 71), ms=0.01)]
    store(engine, [*bad, *good])
    found = check.read(target).findings
    assert [(f.variant, f.config_key) for f in found] == [(r.variant, r.config_key) for r in bad]
    assert farm_main(["db", "check", "--db", target, "--mark"]) == 0
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT variant, config_key, status FROM measurements")).all()
        best = {(v, c) for v, c in conn.execute(text("SELECT variant, config_key FROM best_configs"))}
        counted = conn.execute(text("SELECT n_rows FROM shape_stats WHERE status = 'implausible'")).scalars()
        counted = sum(counted)
    engine.dispose()
    assert {(v, c) for v, c, s in rows if s == "implausible"} == {(r.variant, r.config_key) for r in bad}
    assert best == {(r.variant, r.config_key) for r in good}
    assert counted == len(bad)


# Compute-bound, memory-bound (A and B, 4.4 GiB, outlast 2MNK; M x K passes 2^31, PostgreSQL's integer),
# ragged.
ROOF_SHAPES = {"compute": (4096, 4096, 4096), "memory": (36000, 24, 65536), "ragged": (6000, 333, 4100)}


def test_the_sql_finds_what_the_physics_rejects_at_the_roof(engine: Engine) -> None:
    """The candidates' SQL, on either backend, misses no row the Python rule rejects and the check names
    no other: rows 1% under and 1% over the roofline of compute- and memory-bound shapes."""
    rows, expected = [], set()
    for shape in ROOF_SHAPES.values():
        floor = physics.roofline_floor_ms(*shape, "bfloat16", H200.peak_tflops, H200.peak_gbps)
        for variant, factor in (("cublas", 0.99), ("tiled", 1.01)):
            ms = floor * factor
            rows.append(rec(variant, shape, ms=ms, stream_ms=ms))
            if physics.implausibility(*shape, "bfloat16", ms, ms, H200.peak_tflops, H200.peak_gbps):
                expected.add((variant, shape))
    store(engine, rows)
    with engine.connect() as conn:
        found = {(f.variant, (f.m, f.n, f.k)) for f in check.find(conn)}
    assert found == expected == {("cublas", shape) for shape in ROOF_SHAPES.values()}


def test_no_page_of_the_h100_study_draws_a_point_above_the_compute_roof() -> None:
    """The rows the Roofline/versus-cuBLAS and Shape pages chart (best configs by either objective, the
    Triton-cuBLAS pairs, each shape's ok rows) stay under the GPU's peak, by stored and derived TFLOP/s."""
    with reading(str(STUDY)) as conn:
        gpu = queries.filter_options(conn)["gpu_names"][0]
        peak = queries.gpu_peaks(conn, gpu_name=gpu)["peak_tflops"]
        charted = [queries.best_configs(conn, objective=o) for o in queries.OBJECTIVES]
        vs = queries.vs_cublas(conn, gpu_name=gpu)
        rows = queries.results(conn, status="ok")
    assert peak == pytest.approx(989.4)
    for df in (*charted, rows):
        assert len(df) and df.tflops.max() < peak
        derived = 2.0 * df.m * df.n * df.k / (df.ms * 1e-3) / 1e12
        assert derived.max() < peak
    assert len(vs) and max(vs.triton_tflops.max(), vs.cublas_tflops.max()) < peak


def test_revision_0009_marks_impossible_rows_and_its_downgrade_deletes_them(target: str) -> None:
    """0008 -> 0009 marks the impossible ok row (its reason in error), the summaries drop it and the
    point's other run stays; the downgrade deletes it, its older run becomes the point's newest again,
    and the old CHECK refuses the word."""
    engine = make_engine(target)
    schema.upgrade(engine, "0008")
    shape = (4096, 4096, 4096)
    with Session(engine) as s:
        first, second = (start_sweep(s, name=n, spec={}, command="", n_points=2) for n in ("first", "second"))
        s.commit()
    store(engine, [rec("cublas", shape, ms=0.175)], sweep_id=first)
    store(engine, [rec("cublas", shape, ms=0.00075, stream_ms=0.18)], sweep_id=second)
    store(engine, [rec("tiled", (495, 5333, 71), ms=0.01)], sweep_id=second)

    def state() -> tuple:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT sweep_id, status, latest, error FROM measurements WHERE variant = 'cublas'")
            ).all()
            best = conn.execute(text("SELECT ms FROM best_configs WHERE variant = 'cublas'")).scalars().all()
            stats = dict(
                conn.execute(text("SELECT status, SUM(n_rows) FROM shape_stats GROUP BY status")).all()
            )
        return sorted(rows), best, stats

    schema.upgrade(engine, "0009")
    rows, best, stats = state()
    assert [r[:3] for r in rows] == [(first, "ok", 0), (second, "implausible", 1)]
    assert "beats the roofline" in rows[1].error
    assert best == [] and stats == {"ok": 1, "implausible": 1}  # the newest run gives no time
    schema.upgrade(engine, "head")  # and on through whatever later revisions add

    schema.downgrade(engine, "0008")
    rows, best, stats = state()
    assert [r[:3] for r in rows] == [(first, "ok", 1)]
    assert best == [pytest.approx(0.175)] and stats == {"ok": 2}
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(text("UPDATE measurements SET status = 'implausible'"))
    engine.dispose()


def test_physics_knows_the_dtypes_the_kernels_measure() -> None:
    assert physics.DTYPE_BYTES == kernels.sizes.DTYPE_BYTES


def test_explorer_labels_an_implausible_row_as_no_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Explorer and Compare show every row with its status; an implausible one's `timing` column says its
    times are none, as an interpreter row's says they are CPU times."""
    from dashboard import texts, widgets

    monkeypatch.setattr(widgets, "interpreter_gpus", lambda: ["CPU"])
    rows = pd.DataFrame(
        {"gpu_name": ["NVIDIA H100", "NVIDIA H100", "CPU"], "status": ["ok", "implausible", "ok"]}
    )
    labels = list(widgets.label_timings(rows).timing)
    assert labels == [texts.GPU_LABEL, texts.IMPLAUSIBLE_LABEL, texts.INTERPRETER_LABEL]
