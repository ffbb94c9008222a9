"""The five views on hand-built rows with known answers, on SQLite and PostgreSQL (same SQL text)."""

from __future__ import annotations

import dataclasses

import pytest
from dbkit import A100, H200, INTERPRETER, rec, store
from sqlalchemy import Engine, text

from db.records import MEASUREMENT_FIELDS
from db.views import VIEW_COLUMNS


def rows(engine: Engine, sql: str, **params) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(text(sql), params).mappings()]


def test_every_view_has_its_columns(engine: Engine) -> None:
    for name, columns in VIEW_COLUMNS.items():
        with engine.connect() as conn:
            got = tuple(conn.execute(text(f"SELECT * FROM {name} WHERE 1 = 0")).keys())
        assert got == columns, name
    # Every field the farm records reaches the results view (a new field needs a new revision).
    assert set(MEASUREMENT_FIELDS) <= set(VIEW_COLUMNS["results"])


def test_results_joins_environment_and_keeps_failed_rows(engine: Engine) -> None:
    env_id = store(engine, [rec(ms=1.5), rec("splitk", split_k=4, status="compile_error", ms=None)])
    got = rows(engine, "SELECT * FROM results ORDER BY id")
    assert [r["status"] for r in got] == ["ok", "compile_error"]
    first = got[0]
    assert (first["gpu_name"], first["sm_count"], first["l2_bytes"], first["host"]) == (
        "NVIDIA H200",
        132,
        60 * 2**20,
        "gpu-node-1",
    )
    assert (first["peak_tflops"], first["peak_gbps"], first["environment_id"]) == (989.4, 4800.0, env_id)
    assert first["sweep_id"] == 1 and first["ms"] == 1.5  # the unattributed sweep: stored without one
    assert got[1]["ms"] is None and got[1]["error"] == "compile_error: hand-made failure"


def test_best_configs_fastest_ok_row_per_variant(engine: Engine) -> None:
    shape = (1000, 3000, 16384)
    store(
        engine,
        [
            rec("grouped", shape, block=(64, 64, 32), ms=2.0),
            rec("grouped", shape, block=(64, 128, 32), ms=1.25),  # the tie written first (lower id) wins
            rec("grouped", shape, block=(128, 64, 32), ms=1.25),  # (its config_key sorts first)
            rec("grouped", shape, block=(128, 128, 32), ms=0.5, status="wrong"),  # faster but failed
            rec("grouped", shape, block=(128, 256, 32), ms=None, status="timeout"),
            rec("tiled", shape, ms=3.0),
            rec("grouped", (1000, 3000, 512), ms=0.25),  # another shape
        ],
    )
    store(engine, [rec("grouped", shape, ms=7.0)], env=A100)  # another GPU: its own partition
    store(engine, [rec("grouped", shape, ms=9.0)], env=INTERPRETER)  # kept; the dashboard labels it
    got = rows(
        engine,
        "SELECT gpu_name, variant, k, ms, block_m, block_n FROM best_configs ORDER BY gpu_name, k, variant",
    )
    assert got == [
        {
            "gpu_name": "CPU (Triton interpreter)",
            "variant": "grouped",
            "k": 16384,
            "ms": 9.0,
            "block_m": 128,
            "block_n": 128,
        },
        {
            "gpu_name": "NVIDIA A100-SXM4-80GB",
            "variant": "grouped",
            "k": 16384,
            "ms": 7.0,
            "block_m": 128,
            "block_n": 128,
        },
        {
            "gpu_name": "NVIDIA H200",
            "variant": "grouped",
            "k": 512,
            "ms": 0.25,
            "block_m": 128,
            "block_n": 128,
        },
        {
            "gpu_name": "NVIDIA H200",
            "variant": "grouped",
            "k": 16384,
            "ms": 1.25,
            "block_m": 64,
            "block_n": 128,
        },
        {
            "gpu_name": "NVIDIA H200",
            "variant": "tiled",
            "k": 16384,
            "ms": 3.0,
            "block_m": 128,
            "block_n": 128,
        },
    ]
    # best_configs carries every column of results.
    assert tuple(rows(engine, "SELECT * FROM best_configs WHERE k = 512")[0]) == VIEW_COLUMNS["results"]


SPLIT_SHAPE = (1000, 3000, 16384)  # 8 x 24 = 192 tiles of 128 x 128


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param([], (2.0, "tiled", 0.5, 4, "splitk", 4.0), id="plain"),
        # A failed row is never best, however fast; cuBLAS is not an unsplit Triton kernel.
        pytest.param(
            [
                rec("splitk", SPLIT_SHAPE, split_k=2, ms=0.1, status="wrong"),
                rec("tiled", SPLIT_SHAPE, block=(128, 128, 32), ms=None, status="crashed"),
                rec("cublas", SPLIT_SHAPE, ms=0.2),
            ],
            (2.0, "tiled", 0.5, 4, "splitk", 4.0),
            id="failed-and-cublas-excluded",
        ),
        # Equal best split times: the row written first (lower id) wins, not the lower split_k.
        pytest.param(
            [rec("splitk_det", SPLIT_SHAPE, split_k=2, block=(128, 128, 32), ms=0.5)],
            (2.0, "tiled", 0.5, 4, "splitk", 4.0),
            id="tie-lower-id",
        ),
        # An unsplit row as fast as the split one: speedup exactly 1.
        pytest.param(
            [rec("tiled", SPLIT_SHAPE, block=(128, 128, 16), ms=0.5)],
            (0.5, "tiled", 0.5, 4, "splitk", 1.0),
            id="no-gain",
        ),
    ],
)
def test_splitk_speedup(engine: Engine, extra: list, expected: tuple) -> None:
    base = [
        rec("grouped", SPLIT_SHAPE, ms=2.5),
        rec("tiled", SPLIT_SHAPE, ms=2.0),  # the best unsplit time, other knobs free
        rec("grouped", SPLIT_SHAPE, group_m=8, ms=2.25),
        rec("splitk", SPLIT_SHAPE, split_k=2, ms=0.8),
        rec("splitk", SPLIT_SHAPE, split_k=4, ms=0.5),  # the best split time: speedup 2.0 / 0.5 = 4
        rec("splitk_det", SPLIT_SHAPE, split_k=8, ms=0.6),
        rec("splitk", SPLIT_SHAPE, split_k=4, block=(64, 64, 64), ms=0.3),  # no unsplit 64x64 row: no pair
        rec("tiled", SPLIT_SHAPE, block=(64, 128, 64), ms=1.0),  # no split 64x128 row: no pair
    ]
    store(engine, base + extra)
    got = rows(engine, "SELECT * FROM splitk_speedup")
    assert len(got) == 1
    row = got[0]
    assert (row["block_m"], row["block_n"], row["m"], row["n"], row["k"]) == (128, 128, *SPLIT_SHAPE)
    assert (row["tiles"], row["sm_count"]) == (192, 132)
    assert row["tiles_per_sm"] == pytest.approx(192 / 132)
    names = ("unsplit_ms", "unsplit_variant", "split_ms", "best_split_k", "best_split_variant", "speedup")
    assert tuple(row[c] for c in names) == expected


def test_grouping_effect(engine: Engine) -> None:
    shape = (8192, 8192, 8192)  # operands 2 x 3 x 8192^2 = 402,653,184 bytes = 6.4 x the H200's 60 MiB L2
    cfg = dict(block=(128, 256, 64), num_warps=8, num_stages=3)
    store(
        engine,
        [
            rec("grouped", shape, group_m=1, ms=4.0, **cfg),
            rec("grouped", shape, group_m=1, ms=3.0, code_version="v2", **cfg),  # best group_m = 1 time
            rec("grouped", shape, group_m=8, ms=2.0, **cfg),  # speedup 3.0 / 2.0
            rec("grouped", shape, group_m=8, ms=2.5, code_version="v2", **cfg),
            rec("grouped", shape, group_m=4, ms=6.0, **cfg),  # slower than ungrouped: 0.5
            rec("grouped", shape, group_m=16, ms=0.1, status="wrong", **cfg),  # failed: excluded
            rec(
                "grouped", shape, group_m=8, ms=1.0, block=(128, 256, 64), num_warps=4
            ),  # no group_m = 1 twin
            rec("grouped", shape, group_m=1, ms=1.0, block=(64, 256, 64), num_warps=8),  # nothing grouped
        ],
    )
    got = rows(engine, "SELECT * FROM grouping_effect ORDER BY group_m")
    assert [(r["group_m"], r["ms"], r["ms_group1"], r["speedup"]) for r in got] == [
        (4, 6.0, 3.0, 0.5),
        (8, 2.0, 3.0, 1.5),
    ]
    assert {(r["operand_bytes"], r["l2_bytes"], r["operand_to_l2"]) for r in got} == {
        (402653184, 62914560, 6.4)
    }
    assert {(r["variant"], r["block_m"], r["block_n"], r["block_k"], r["split_k"]) for r in got} == {
        ("grouped", 128, 256, 64, 1)
    }


def test_grouping_effect_without_l2_size(engine: Engine) -> None:
    """No L2 size (the interpreter): operand_to_l2 is NULL on both backends (PostgreSQL raises on / 0)."""
    no_l2 = dataclasses.replace(INTERPRETER, l2_bytes=0)
    store(engine, [rec(group_m=1, ms=2.0), rec(group_m=8, ms=1.0)], env=no_l2)
    (row,) = rows(engine, "SELECT gpu_name, l2_bytes, operand_to_l2, speedup FROM grouping_effect")
    assert row == {
        "gpu_name": "CPU (Triton interpreter)",
        "l2_bytes": 0,
        "operand_to_l2": None,
        "speedup": 2.0,
    }


def test_vs_cublas(engine: Engine) -> None:
    ragged = (495, 5333, 71)
    store(
        engine,
        [
            rec("cublas", ragged, ms=0.875),
            rec("cublas", ragged, ms=0.75, code_version="v2"),  # best cuBLAS time
            rec("grouped", ragged, block=(64, 64, 32), ms=0.5),  # best Triton, written before its tie
            rec("tiled", ragged, block=(64, 64, 32), ms=0.5),
            rec("splitk", ragged, split_k=2, ms=0.01, status="wrong"),  # failed: excluded
            rec("grouped", (512, 512, 512), ms=1.0),  # no cuBLAS row for this shape
            rec("cublas", (256, 256, 256), ms=1.0),  # no Triton row for this shape
        ],
    )
    (row,) = rows(engine, "SELECT * FROM vs_cublas")
    assert (row["m"], row["n"], row["k"]) == ragged
    assert (row["triton_ms"], row["triton_variant"], row["cublas_ms"], row["ratio"]) == (
        0.5,
        "grouped",
        0.75,
        1.5,
    )
    assert row["triton_config_key"] == rec("grouped", ragged, block=(64, 64, 32)).config_key
    assert row["triton_tflops"] == pytest.approx(2 * 495 * 5333 * 71 / 0.5e-3 / 1e12)
    assert row["cublas_tflops"] == pytest.approx(2 * 495 * 5333 * 71 / 0.75e-3 / 1e12)


def test_views_partition_by_gpu_and_dtype(engine: Engine) -> None:
    """The same shape on two GPUs and two dtypes gives four independent answers."""
    shape = (2048, 2048, 2048)
    for env, scale in ((H200, 1.0), (A100, 2.0)):
        for dtype, dscale in (("bfloat16", 1.0), ("float32", 4.0)):
            t = scale * dscale
            store(
                engine,
                [
                    rec("tiled", shape, dtype=dtype, ms=2.0 * t),
                    rec("splitk", shape, dtype=dtype, split_k=2, ms=1.0 * t),
                    rec("cublas", shape, dtype=dtype, ms=1.5 * t),
                ],
                env=env,
            )
    got = rows(
        engine, "SELECT gpu_name, dtype, split_ms, speedup FROM splitk_speedup ORDER BY gpu_name, dtype"
    )
    assert [(r["gpu_name"][7:11], r["dtype"], r["split_ms"], r["speedup"]) for r in got] == [
        ("A100", "bfloat16", 2.0, 2.0),
        ("A100", "float32", 8.0, 2.0),
        ("H200", "bfloat16", 1.0, 2.0),
        ("H200", "float32", 4.0, 2.0),
    ]
    got = rows(engine, "SELECT gpu_name, dtype, ratio FROM vs_cublas WHERE gpu_name = :g", g="NVIDIA H200")
    assert sorted((r["dtype"], r["ratio"]) for r in got) == [("bfloat16", 1.5), ("float32", 1.5)]
