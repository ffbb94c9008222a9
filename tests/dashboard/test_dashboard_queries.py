"""db.dashboard_queries' own arithmetic: roofs, size bins, the default sweep pair, interpreter GPUs."""

from __future__ import annotations

from pathlib import Path

import dashkit as kit
import pandas as pd
import pytest

from db import dashboard_queries as dq
from db.engine import make_engine


def on(db: Path, fn, **kw):
    engine = make_engine(str(db), readonly=True)
    try:
        with engine.connect() as conn:
            return fn(conn, **kw)
    finally:
        engine.dispose()


def test_roofs_meet_at_the_ridge_and_span_the_points() -> None:
    roofs = dq.roof_lines(989.4, 4800.0, 100.0, 3000.0)
    ridge = 989.4e3 / 4800.0  # 206 FLOP/B
    assert roofs.values.tolist() == [
        ["bandwidth", 100.0, 480.0],
        ["bandwidth", ridge, 989.4],
        ["compute", ridge, 989.4],
        ["compute", 3000.0, 989.4],
    ]
    # Points all left of the ridge still get a compute roof to look up to.
    assert dq.roof_lines(989.4, 4800.0, 10.0, 50.0).intensity.max() == pytest.approx(2 * ridge)


@pytest.mark.parametrize("peaks", [(0.0, 4800.0), (989.4, 0.0)], ids=["no-tflops", "no-bandwidth"])
def test_no_roofs_without_both_peaks(peaks: tuple[float, float]) -> None:
    assert dq.roof_lines(*peaks, 1.0, 10.0).empty


def test_size_bins_are_powers_of_two_of_operands_over_l2() -> None:
    points = pd.DataFrame(
        {
            "m": [1, 2, 3, 4, 5],
            "n": 1,
            "k": 1,
            "group_m": 8,
            "operand_to_l2": [0.1, 0.5, 1.0, 1.9, 6.4],
            "speedup": [1.0, 1.02, 1.1, 1.3, 1.5],
        }
    )
    cells = dq.grouping_heatmap(points.assign(shape=dq.shape_label(points)))
    assert cells["size"].tolist() == ["1/16-1/8 L2", "1/2-1 L2", "1-2 L2", "4-8 L2"]
    assert cells.speedup.tolist() == pytest.approx([1.0, 1.02, 1.2, 1.5])  # 1.0 and 1.9 share a bin
    assert cells.n_shapes.tolist() == [1, 1, 2, 1]


def test_default_comparison_prefers_sweeps_sharing_a_gpu(dbs: dict[str, Path]) -> None:
    assert on(dbs["small"], dq.default_comparison) == (1, 2)  # not (2, 3): sweep 3 is the A100's alone
    assert on(dbs["interpreter"], dq.default_comparison) is None  # one sweep


def test_interpreter_gpus_come_from_the_environments(dbs: dict[str, Path]) -> None:
    assert on(dbs["interpreter"], dq.interpreter_gpus) == [kit.INTERPRETER.gpu_name]
    assert on(dbs["small"], dq.interpreter_gpus) == []
