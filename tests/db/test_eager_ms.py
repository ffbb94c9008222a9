"""eager_ms: one definition (db.records.eager_ms) stored per row, backfilled by revision 0007, and the
objective of best_configs."""

from __future__ import annotations

import pytest
from dbkit import HEAD, rec, store
from sqlalchemy import Engine, text

from db import queries, schema
from db.errors import DatabaseError
from db.records import eager_ms

# (stream_ms, host_ms, eager_ms)
EAGER_CASES = {
    "gpu-longer": (0.050, 0.020, 0.050),
    "host-longer": (0.010, 0.030, 0.030),
    "equal": (0.020, 0.020, 0.020),
    "no-host-time": (0.020, None, None),
    "no-stream-time": (None, 0.020, None),
}


@pytest.mark.parametrize(("stream", "host", "eager"), EAGER_CASES.values(), ids=EAGER_CASES.keys())
def test_records_and_the_migration_share_the_definition(engine: Engine, stream, host, eager) -> None:
    """A record fills eager_ms from its stream and host times; revision 0007's backfill of a row stored
    before it gives the same value."""
    assert eager_ms(stream, host) == eager
    record = rec("grouped", (96, 160, 48), ms=0.01, stream_ms=stream, host_ms=host)
    assert record.eager_ms == eager
    store(engine, [record])
    schema.downgrade(engine, "0006")  # the column is dropped ...
    schema.upgrade(engine, "head")  # ... and filled again from stream_ms and host_ms
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT eager_ms FROM measurements")).scalar_one()
        best = conn.execute(text("SELECT eager_ms FROM best_configs")).all()
    assert stored == eager
    assert [tuple(r) for r in best] == [(eager,)]


def test_revision_0007_backfills_the_copies_of_gpu_best(engine: Engine) -> None:
    records = [
        rec("grouped", (96, 160, 48), ms=0.010, stream_ms=0.011, host_ms=0.030),
        rec("tiled", (96, 160, 48), ms=0.012, stream_ms=0.012, host_ms=0.015),
    ]
    store(engine, records)
    schema.downgrade(engine, "0006")
    assert "eager_ms" not in _columns(engine, "gpu_best")
    schema.upgrade(engine, "head")
    assert schema.current(engine) == HEAD
    with engine.connect() as conn:
        copies = conn.execute(text("SELECT variant, eager_ms FROM gpu_best ORDER BY variant")).all()
    assert [tuple(r) for r in copies] == [("grouped", 0.030), ("tiled", 0.015)]


def _columns(engine: Engine, table: str) -> set[str]:
    from sqlalchemy import inspect

    return {c["name"] for c in inspect(engine).get_columns(table)}


def test_best_configs_ranks_by_the_objective(engine: Engine) -> None:
    """Two configs of `grouped` at one shape: the faster kernel waits on its launcher's host time."""
    fast_kernel = rec("grouped", (96, 160, 48), group_m=1, ms=0.010, stream_ms=0.011, host_ms=0.030)
    short_wait = rec("grouped", (96, 160, 48), group_m=8, ms=0.012, stream_ms=0.012, host_ms=0.015)
    untimed_host = rec("grouped", (96, 160, 48), block=(64, 64, 32), ms=0.005, stream_ms=0.005, host_ms=None)
    other_shape = rec("tiled", (200, 160, 48), ms=0.020, stream_ms=0.021, host_ms=0.010)
    store(engine, [fast_kernel, short_wait, untimed_host, other_shape])
    with engine.connect() as conn:
        kernel = queries.best_configs(conn)
        eager = queries.best_configs(conn, objective="eager")
        one_shape = queries.best_configs(conn, objective="eager", shape=(96, 160, 48))
        nothing = queries.best_configs(conn, objective="eager", gpu_name="no such GPU")
    assert list(eager.columns) == list(kernel.columns)
    assert list(zip(kernel.config_key, kernel.ms)) == [
        (untimed_host.config_key, 0.005),  # the fastest kernel, though its host time is unknown
        (other_shape.config_key, 0.020),
    ]
    assert list(zip(eager.config_key, eager.eager_ms)) == [
        (short_wait.config_key, 0.015),
        (other_shape.config_key, 0.021),
    ]
    assert list(one_shape.config_key) == [short_wait.config_key]
    assert nothing.empty and list(nothing.columns) == list(kernel.columns)


def test_an_unknown_objective_is_an_error(engine: Engine) -> None:
    with engine.connect() as conn, pytest.raises(DatabaseError, match="unknown objective 'wall'"):
        queries.best_configs(conn, objective="wall")


SHAPE = (96, 160, 48)


def _eager_winners(engine: Engine, records) -> list[tuple[str, str]]:
    store(engine, records)
    with engine.connect() as conn:
        best = queries.best_configs(conn, objective="eager")
    return list(zip(best.variant, best.config_key))


def test_host_bound_eager_times_within_the_tie_go_to_kernel_time(engine: Engine) -> None:
    """At 2999x1501x1234 on an H100 the best configs' host times read 71.5-73.2 us, their kernels 39.8-50.0:
    host-bound times within HOST_TIE (5%) of the least tie and the least kernel time wins, within one variant
    and across variants; a time outside the tie still loses on eager time."""
    least_eager = rec("grouped", SHAPE, group_m=1, ms=0.050, stream_ms=0.052, host_ms=0.0715)
    faster_kernel = rec("grouped", SHAPE, group_m=8, ms=0.040, stream_ms=0.045, host_ms=0.0731)
    outside_tie = rec("grouped", SHAPE, block=(64, 64, 32), ms=0.030, stream_ms=0.032, host_ms=0.080)
    other_variant = rec("tiled", SHAPE, ms=0.045, stream_ms=0.047, host_ms=0.0720)
    winners = _eager_winners(engine, [least_eager, faster_kernel, outside_tie, other_variant])
    assert winners == [("grouped", faster_kernel.config_key), ("tiled", other_variant.config_key)]


def test_a_gpu_bound_least_eager_time_ties_with_nothing(engine: Engine) -> None:
    """Where the least eager time is the GPU's (stream_ms >= host_ms) it is measured, not host noise: it
    wins though a host-bound row within 5% has the faster kernel."""
    gpu_bound = rec("grouped", SHAPE, group_m=1, ms=0.070, stream_ms=0.0715, host_ms=0.060)
    host_bound = rec("grouped", SHAPE, group_m=8, ms=0.040, stream_ms=0.045, host_ms=0.0731)
    assert _eager_winners(engine, [gpu_bound, host_bound]) == [("grouped", gpu_bound.config_key)]


def test_split_k_eager_sides_are_picked_by_the_same_tie(engine: Engine) -> None:
    """splitk_eager names each side's pick by best_configs(objective="eager")'s rule: the split side's
    host-bound times 2% apart tie and the faster kernel is the pick, so the eager speedup is the one a
    caller following the drop-in's pick would see (0.080 / 0.0730), not the least eager time's."""
    unsplit = rec("splitk", SHAPE, split_k=1, ms=0.070, stream_ms=0.072, host_ms=0.080)
    least_eager = rec("splitk", SHAPE, split_k=2, ms=0.050, stream_ms=0.052, host_ms=0.0715)
    faster_kernel = rec("splitk", SHAPE, split_k=4, ms=0.040, stream_ms=0.045, host_ms=0.0730)
    store(engine, [unsplit, least_eager, faster_kernel])
    with engine.connect() as conn:
        row = queries.splitk_eager(conn).iloc[0]
        eager_best = queries.best_configs(conn, objective="eager", variant="splitk")
    assert (row.split_eager_split_k, row.unsplit_eager_split_k) == (4, 1)
    assert eager_best.config_key.iloc[0] == faster_kernel.config_key
    assert row.eager_speedup == pytest.approx(0.080 / 0.0730, rel=1e-9)
