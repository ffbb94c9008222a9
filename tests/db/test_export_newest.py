"""`farm export-best` writes one entry per (GPU, dtype, shape, variant, objective), each config read from
its newest ok run (db.queries.export_best): a study and its rerun under new code are two points of every
config, both the newest run of their point, and the export had carried both runs' cuBLAS rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from dbkit import H200, rec
from samples import H200_NODE2, Batch, build

from db import queries
from db.export import reading
from kernels.tuned import TunedConfigs

SHAPE = (1234, 4321, 2345)
T0 = datetime(2026, 12, 5, 15, 0, tzinfo=UTC)
OLD_CODE, NEW_CODE = "585e17b89ac2", "fd6c031eade2"
KEY = (*queries.SHAPE_ORDER, "variant")


def _row(variant: str, ms: float, *, hours: float, code: str, host_ms: float = 0.03, **config):
    return rec(
        variant,
        SHAPE,
        ms=ms,
        host_ms=host_ms,
        code_version=code,
        created_at=T0 + timedelta(hours=hours),
        **config,
    )


def _three_runs(target: str) -> None:
    """A study (old code, one host), its rerun under new code on another host of the same GPU model, and
    a `--repeat` of the rerun's cuBLAS point (same host and code: the same point, a newer run of it)."""
    study = [
        # 1 us at 1234x4321x2345, where the roofline allows 25.3: a time physics forbids, and the fastest
        _row("cublas", 0.001, hours=0, code=OLD_CODE, stream_ms=0.2222, host_ms=0.0255),
        _row("grouped", 0.2000, hours=0, code=OLD_CODE, group_m=1),  # measured again below, slower
        _row("grouped", 0.2300, hours=0, code=OLD_CODE, group_m=8),  # only the study measured it
        _row("splitk", 0.2100, hours=0, code=OLD_CODE, split_k=2, host_ms=0.05),
    ]
    rerun = [
        _row("cublas", 0.2196, hours=3, code=NEW_CODE, stream_ms=0.2235, host_ms=0.0326),
        _row("grouped", 0.2415, hours=3, code=NEW_CODE, group_m=1),
        _row("splitk", 0.2500, hours=3, code=NEW_CODE, split_k=2, host_ms=0.3000),  # the faster kernel
        _row("splitk", 0.2600, hours=3, code=NEW_CODE, split_k=4),  # the shorter wait
    ]
    repeat = [_row("cublas", 0.2250, hours=4, code=NEW_CODE, stream_ms=0.2260)]
    build(
        target,
        [
            Batch(H200, study, sweep="study"),
            Batch(H200_NODE2, rerun, sweep="rerun"),
            Batch(H200_NODE2, repeat, sweep="rerun --repeat"),
        ],
    )


def test_export_best_writes_one_entry_per_key_from_each_configs_newest_run(
    farm_main, target: str, out_dir: Path
) -> None:
    _three_runs(target)
    with reading(target) as conn:
        assert len(queries.results(conn, variant="cublas")) == 2  # control: two points of cuBLAS, both latest
        best = {o: queries.export_best(conn, objective=o) for o in queries.OBJECTIVES}
    for objective, df in best.items():
        assert not df.duplicated(list(KEY)).any(), objective
        assert set(df.variant) == {"cublas", "grouped", "splitk"}, objective
    picked = {o: {r.variant: (r.ms, r.group_m, r.split_k) for r in df.itertuples()} for o, df in best.items()}
    # cuBLAS: the repeat's row, the newest run of the newest point; never the study's 1 us
    # grouped: group_m 8, which only the study measured, beats group_m 1's newer 0.2415 (its 0.2000 is gone)
    assert picked["kernel"] == {"cublas": (0.2250, 1, 1), "grouped": (0.2300, 8, 1), "splitk": (0.2500, 1, 2)}
    # eager: splitk 2 waits 0.3 ms on its launcher's host, splitk 4 0.26
    assert picked["eager"] == {"cublas": (0.2250, 1, 1), "grouped": (0.2300, 8, 1), "splitk": (0.2600, 1, 4)}

    out = out_dir / "best.json"
    assert farm_main(["export-best", "--db", target, "--out", str(out)]) == 0
    entries = sorted((e.variant, e.ms, e.config.split_k) for e in TunedConfigs.load(out).entries)
    # splitk twice: each objective's best (one config each); cuBLAS's and grouped's are one row for both
    assert entries == [
        ("cublas", 0.2250, 1),
        ("grouped", 0.2300, 1),
        ("splitk", 0.2500, 2),
        ("splitk", 0.2600, 4),
    ]
