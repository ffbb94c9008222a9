"""`farm best --objective` and `farm export-best`: the two objectives, kernel time and eager time."""

from __future__ import annotations

import json
from pathlib import Path

from dbkit import rec, store
from sqlalchemy import Engine

import cli.db as db_cli
from kernels.tuned import TunedConfigs

SHAPE = (495, 5333, 71)


def _two_objectives(engine: Engine):
    """Two configs of `grouped`: the faster kernel (group_m 1) waits longer on its launcher's host."""
    fast_kernel = rec("grouped", SHAPE, group_m=1, ms=0.0103, stream_ms=0.0110, host_ms=0.0201)
    short_wait = rec("grouped", SHAPE, group_m=8, ms=0.0121, stream_ms=0.0125, host_ms=0.0130)
    library = rec("cublas", SHAPE, ms=0.0136, stream_ms=0.0136, host_ms=0.0110)
    store(engine, [fast_kernel, short_wait, library])
    return fast_kernel, short_wait, library


def test_best_says_which_objective_it_ranks_by(farm_main, engine: Engine, target: str, capsys) -> None:
    _two_objectives(engine)
    tables = {}
    for objective in ("kernel", "eager"):
        assert farm_main(["best", "--db", target, "--objective", objective]) == 0
        header, columns, *rows = capsys.readouterr().out.splitlines()
        assert header == db_cli.OBJECTIVE_HEADERS[objective] and tuple(columns.split()) == db_cli.BEST_TABLE
        # variant, ms, eager_ms, ..., group_m (gpu_name "NVIDIA H200" is two words)
        tables[objective] = [(r.split()[6], r.split()[7], r.split()[8], r.split()[13]) for r in rows]
    assert tables["kernel"] == [("grouped", "0.0103", "0.0201", "1"), ("cublas", "0.0136", "0.0136", "1")]
    assert tables["eager"] == [("grouped", "0.0121", "0.0130", "8"), ("cublas", "0.0136", "0.0136", "1")]


def test_export_best_carries_both_objectives_winners_and_both_times(
    farm_main,
    engine: Engine,
    target: str,
    out_dir: Path,
) -> None:
    fast_kernel, short_wait, library = _two_objectives(engine)
    out = out_dir / "best.json"
    assert farm_main(["export-best", "--db", target, "--out", str(out)]) == 0
    entries = {(e.variant, e.config.group_m): e for e in TunedConfigs.load(out).entries}
    assert sorted(entries) == [("cublas", 1), ("grouped", 1), ("grouped", 8)]  # cuBLAS: one row, both bests
    for record, key in (
        (fast_kernel, ("grouped", 1)),
        (short_wait, ("grouped", 8)),
        (library, ("cublas", 1)),
    ):
        entry = entries[key]
        assert (entry.ms, entry.host_ms, entry.eager_ms) == (record.ms, record.host_ms, record.eager_ms)
    written = json.loads(out.read_text())["entries"]
    assert all({"ms", "eager_ms", "host_ms"} <= set(e) for e in written)
