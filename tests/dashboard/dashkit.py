"""Results databases for the dashboard's tests and benchmark, written through db.writes.

- empty: the schema, no rows.
- small: a handful of points per page with hand-picked times, so each chart's expected data is
  known exactly (the constants below).
- interpreter: only rows from Triton's interpreter (CPU times), as `farm sweep --preset smoke` on a
  machine without a GPU writes them.
- failed_sweep: one sweep that failed with every point failed.
- big: N rows (100,000 in the tests) over two GPUs, three dtypes and every variant, with times from
  a small wave-quantisation + L2 model so the charts look like a real sweep; plus a second H200 host
  (what sweep comparison is for), a failed sweep and a sliver of interpreter rows.

An importable module (not conftest) so bench/dashboard_render.py builds the same big database.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from samples import A100, H200
from sqlalchemy.orm import Session

from db.records import Backend, EnvironmentInfo, MeasurementRecord
from db.schema import open_engine
from db.writes import environment_id, finish_sweep, start_sweep, upsert_measurements

H200_NODE2 = dataclasses.replace(H200, host="gpu-node-2")
# What farm.gpu reports without a GPU: the nominal H100/H200-class limits, no peaks.
INTERPRETER = dataclasses.replace(
    H200,
    gpu_name="CPU (Triton interpreter)",
    memory_bytes=0,
    compute_capability="",
    driver_version="",
    cuda_version="",
    host="ci-runner",
    backend=Backend.INTERPRETER,
    peak_tflops=0.0,
    peak_gbps=0.0,
)
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4}


def point(
    env: EnvironmentInfo,
    variant: str,
    shape: tuple[int, int, int],
    ms: float | None,
    *,
    dtype: str = "bfloat16",
    block: tuple[int, int, int] = (128, 128, 64),
    group_m: int = 1,
    split_k: int = 1,
    warps: int = 8,
    stages: int = 3,
    status: str = "ok",
    rel_err: float = 1e-3,
    nondeterminism: float | None = None,
    code_version: str = "v1",
) -> MeasurementRecord:
    """One measurement with the derived columns farm.metrics would give it (cuBLAS: no tile grid)."""
    m, n, k = shape
    library = variant == "cublas"
    bm, bn, bk = (0, 0, 0) if library else block
    warps, stages = (0, 0) if library else (warps, stages)
    key = "library" if library else f"bm{bm}_bn{bn}_bk{bk}_gm{group_m}_sk{split_k}_w{warps}_s{stages}"
    tiles = None if library else -(-m // bm) * -(-n // bn)
    timed = ms is not None
    return MeasurementRecord(
        code_version=code_version,
        variant=variant,
        dtype=dtype,
        m=m,
        n=n,
        k=k,
        config_key=f"{key}_ieee",
        block_m=bm,
        block_n=bn,
        block_k=bk,
        group_m=group_m,
        split_k=split_k,
        num_warps=warps,
        num_stages=stages,
        input_precision="ieee",
        status=status,
        error="" if status == "ok" else f"{status}: made for the dashboard tests",
        ms=ms,
        ms_p20=ms * 0.98 if timed else None,
        ms_p80=ms * 1.02 if timed else None,
        reps=50 if timed else None,
        tflops=2 * m * n * k / (ms * 1e-3) / 1e12 if timed else None,
        rel_err=rel_err if timed else None,
        nondeterminism=nondeterminism if timed else None,
        tiles=tiles,
        programs=None if library else tiles * split_k,
        tiles_per_sm=None if library else tiles / env.sm_count,
        waves=None if library else tiles * split_k / env.sm_count / 2,
        occupancy=None if library else 2,
        operand_bytes=(m * k + k * n + m * n) * ITEMSIZE[dtype],
        backend=env.backend,
        worker=f"{env.host}:gpu0",
    )


@dataclass
class Batch:
    """Records of one environment, written by one sweep (or none, like a manual import)."""

    env: EnvironmentInfo
    records: list[MeasurementRecord] = field(default_factory=list)
    sweep: str | None = None
    sweep_status: str = "finished"


def build(path: Path, batches: list[Batch]) -> Path:
    """A results database at `path` (created at head) holding the batches, sweeps numbered in order."""
    engine = open_engine(str(path))
    try:
        with Session(engine) as session:
            for b in batches:
                env_id = environment_id(session, b.env)
                sweep_id = None
                if b.sweep is not None:
                    sweep_id = start_sweep(
                        session,
                        name=b.sweep,
                        spec={},
                        command=f"farm sweep ({b.sweep})",
                        n_points=len(b.records),
                    )
                upsert_measurements(session, environment_id=env_id, sweep_id=sweep_id, records=b.records)
                if sweep_id is not None:
                    n_ok = sum(r.status == "ok" for r in b.records)
                    finish_sweep(
                        session, sweep_id, status=b.sweep_status, n_ok=n_ok, n_failed=len(b.records) - n_ok
                    )
            session.commit()
    finally:
        engine.dispose()
    return path


def empty_db(path: Path) -> Path:
    return build(path, [])


# ---- the small database: every number a test expects is written here ----

SKINNY = (256, 256, 65536)  # 128x128 tiles: 4 tiles, 0.03 per SM of an H200
MID = (1024, 1024, 16384)  # 64 tiles, 0.48 per SM
SQUARE = (4096, 4096, 4096)  # 1024 tiles, 7.8 per SM
BIG_SQUARE = (8192, 8192, 8192)  # operands 384 MiB: 6.4x the H200's 60 MiB L2
SMALL_SQUARE = (1024, 1024, 1024)  # operands 6 MiB: 0.1x L2

# split-K: (shape, block_m x block_n) -> {split_k: ms}
SPLITK_MS = {
    (SKINNY, (128, 128)): {1: 0.200, 4: 0.050, 8: 0.040, 16: 0.045},
    (SKINNY, (64, 64)): {1: 0.160, 8: 0.080},
    (MID, (128, 128)): {1: 0.120, 2: 0.080},
    (SQUARE, (128, 128)): {1: 0.250, 2: 0.3125},
}
# The splitk_speedup rows (H200, bfloat16): (shape, block) -> (tiles_per_sm, best split_k, speedup)
SMALL_SPLITK = {
    (SKINNY, (128, 128)): (4 / 132, 8, 5.0),
    (SKINNY, (64, 64)): (16 / 132, 8, 2.0),
    (MID, (128, 128)): (64 / 132, 2, 1.5),
    (SQUARE, (128, 128)): (1024 / 132, 2, 0.8),
}
# splitk_best per shape: (tiles per SM of the fastest unsplit grid, best split_k, best unsplit ms / best
# split ms). SKINNY: 64x64 unsplit (0.160 ms, 16 tiles) is the fastest unsplit kernel, 128x128 split 8
# (0.040 ms) the fastest split: 4.0, where 128x128's own ratio is 5.0.
SMALL_SPLITK_BEST = {SKINNY: (16 / 132, 8, 4.0), MID: (64 / 132, 2, 1.5), SQUARE: (1024 / 132, 2, 0.8)}
# The best Triton time per split_k over every block shape (splitk_curve), SKINNY: sweep b measured
# split 16 again at 0.042 ms, so the curve's best split-16 time is sweep b's.
SKINNY_CURVE = {1: 1.0, 4: 0.160 / 0.050, 8: 0.160 / 0.040, 16: 0.160 / 0.042}
# grouping (grouped 128x128x64 w8 s3): shape -> {group_m: ms}
GROUPED_MS = {BIG_SQUARE: {1: 2.0, 4: 1.8, 8: 1.6}, SMALL_SQUARE: {1: 0.010, 8: 0.010}}
# (shape, group_m) -> (operand bytes / L2, speedup over group_m 1)
SMALL_GROUPING = {
    (BIG_SQUARE, 4): (6.4, 2.0 / 1.8),
    (BIG_SQUARE, 8): (6.4, 1.25),
    (SMALL_SQUARE, 8): (0.1, 1.0),
}
# heatmap cells: (size bin lower edge, group_m) -> median speedup
SMALL_HEATMAP = {(4.0, 4): 2.0 / 1.8, (4.0, 8): 1.25, (0.0625, 8): 1.0}
CUBLAS_MS = {SKINNY: 0.032, SQUARE: 0.200, BIG_SQUARE: 1.5}
# vs_cublas: shape -> (best Triton ms, ratio = cuBLAS ms / Triton ms)
SMALL_VS_CUBLAS = {SKINNY: (0.040, 0.8), SQUARE: (0.250, 0.8), BIG_SQUARE: (1.6, 1.5 / 1.6)}
# sweep b (id 2) against sweep a (id 1): (variant, shape, config key) -> verdict
SMALL_COMPARE = {
    ("splitk", SKINNY, "bm128_bn128_bk64_gm1_sk16_w8_s3_ieee"): "faster",
    ("splitk", SQUARE, "bm128_bn128_bk64_gm1_sk1_w8_s3_ieee"): "slower",
    ("grouped", BIG_SQUARE, "bm128_bn128_bk64_gm8_sk1_w8_s3_ieee"): "same",
}
SPLITK_NONDETERMINISM = 2e-3  # the atomic split-K rows with split_k > 1
A100_SPLITK = {(SKINNY, (128, 128)): {1: 0.5, 4: 0.25}}  # speedup 2.0 at 4 / 108 tiles per SM


def _splitk(env: EnvironmentInfo, table: dict, **kw) -> list[MeasurementRecord]:
    return [
        point(
            env,
            "splitk",
            shape,
            ms,
            block=(*blocks, 64),
            split_k=s,
            nondeterminism=SPLITK_NONDETERMINISM * (s > 1),
            **kw,
        )
        for (shape, blocks), times in table.items()
        for s, ms in times.items()
    ]


def small_db(path: Path) -> Path:
    """H200 bfloat16 points for every page, one A100 pair, a wrong and two failed rows; two sweeps."""
    grouped = [
        point(H200, "grouped", shape, ms, group_m=g)
        for shape, times in GROUPED_MS.items()
        for g, ms in times.items()
    ]
    cublas = [point(H200, "cublas", shape, ms) for shape, ms in CUBLAS_MS.items()]
    failed = [
        # Faster than any ok row but wrong: no view may use it.
        point(H200, "splitk", SKINNY, 0.010, split_k=32, status="wrong", rel_err=0.5, nondeterminism=0.1),
        point(H200, "splitk", SKINNY, None, block=(256, 256, 64), split_k=4, status="compile_error"),
        point(H200, "grouped", BIG_SQUARE, None, block=(256, 256, 64), group_m=8, status="timeout"),
    ]
    sweep_b = [
        point(
            H200, "splitk", SKINNY, 0.042, split_k=16, nondeterminism=SPLITK_NONDETERMINISM, code_version="v2"
        ),
        point(H200, "splitk", SQUARE, 0.300, code_version="v2"),
        point(H200, "grouped", BIG_SQUARE, 1.61, group_m=8, code_version="v2"),
    ]
    return build(
        path,
        [
            Batch(H200, _splitk(H200, SPLITK_MS) + grouped + cublas + failed, sweep="small-a"),
            Batch(H200, sweep_b, sweep="small-b"),
            Batch(A100, _splitk(A100, A100_SPLITK), sweep="small-a100"),
        ],
    )


# ---- split-K where the best per-block ratio and best-vs-best disagree (seen on an H200) ----

# 96x7168x2048: blocks A (64x128) unsplit 0.0205 ms is the fastest kernel; blocks B (32x64) split 4
# at 0.0229 ms is the fastest split, and B unsplit takes 0.0254 ms. Per block shape B's ratio is
# 0.0254 / 0.0229 = 1.11 (the old table's "split wins"); best against best is 0.0205 / 0.0229 = 0.90.
VERDICT_SHAPE = (96, 7168, 2048)
BLOCKS_A, BLOCKS_B = (64, 128, 64), (32, 64, 64)
VERDICT_MS = {
    ("grouped", BLOCKS_A, 1): 0.0205,
    ("splitk", BLOCKS_B, 1): 0.0254,
    ("splitk", BLOCKS_B, 4): 0.0229,
}
VERDICT_SPEEDUP = 0.0205 / 0.0229
VERDICT_BLOCK_RATIO = 0.0254 / 0.0229
# p20-p80 of +-2% on each side: 0.90's range (0.86-0.93) stays under 1, so the verdict is a loss.
VERDICT = "split loses"


def splitk_verdict_db(path: Path) -> Path:
    """The 96x7168x2048 case above, on an H200 in bfloat16, plus stream-K at 0.0210 ms with blocks A."""
    records = [
        point(H200, variant, VERDICT_SHAPE, ms, block=block, split_k=s)
        for (variant, block, s), ms in VERDICT_MS.items()
    ]
    records.append(point(H200, "streamk", VERDICT_SHAPE, 0.0210, block=BLOCKS_A))
    return build(path, [Batch(H200, records, sweep="splitk-verdict")])


# ---- interpreter-only and failed-sweep databases ----

SMOKE_SHAPES = ((48, 64, 96), (80, 64, 96), (40, 48, 200))


def interpreter_records() -> list[MeasurementRecord]:
    """A smoke sweep's rows under the interpreter: CPU milliseconds, split-K slower (no parallel SMs)."""
    out = []
    for i, shape in enumerate(SMOKE_SHAPES):
        base = 30.0 + 10 * i
        block = (16, 32, 16)
        out += [
            point(INTERPRETER, "tiled", shape, base * 1.1, block=block, warps=4, stages=2),
            point(INTERPRETER, "grouped", shape, base, block=block, warps=4, stages=2),
            point(INTERPRETER, "grouped", shape, base * 0.95, block=block, group_m=2, warps=4, stages=2),
            point(INTERPRETER, "splitk", shape, base, block=block, warps=4, stages=2),
            point(
                INTERPRETER,
                "splitk",
                shape,
                base * 2,
                block=block,
                split_k=4,
                warps=4,
                stages=2,
                nondeterminism=0.0,
            ),
            point(INTERPRETER, "cublas", shape, base / 20),
        ]
    return out


def interpreter_db(path: Path) -> Path:
    return build(path, [Batch(INTERPRETER, interpreter_records(), sweep="smoke")])


FAILED_STATUSES = ("crashed", "crashed", "compile_error", "timeout")


def failed_sweep_db(path: Path) -> Path:
    """A sweep that failed after four points, all of them failed: no view has a row."""
    records = [
        point(H200, "splitk", SKINNY, None, split_k=2**i, status=status)
        for i, status in enumerate(FAILED_STATUSES)
    ]
    return build(path, [Batch(H200, records, sweep="smoke", sweep_status="failed")])


# ---- the big database ----

BIG_SIZES = (128, 256, 512, 1024, 2048, 4096, 8192)
BIG_K = (512, 2048, 8192, 32768)
BIG_DTYPES = ("bfloat16", "float16", "float32")
# (variant, [(block_m, block_n, block_k, group_m, split_k, warps)]): 93 configs a shape.
BIG_CONFIGS = (
    ("cublas", [(0, 0, 0, 1, 1, 0)]),
    (
        "tiled",
        [
            (bm, bn, bk, 1, 1, w)
            for bm in (64, 128)
            for bn in (64, 128, 256)
            for bk in (32, 64)
            for w in (4, 8)
        ],
    ),
    (
        "grouped",
        [
            (bm, bn, 64, g, 1, w)
            for bm in (64, 128)
            for bn in (64, 128, 256)
            for g in (1, 4, 8)
            for w in (4, 8)
        ],
    ),
    ("splitk", [(bm, bn, 64, 1, s, 8) for bm in (64, 128) for bn in (64, 128) for s in (1, 2, 4, 8, 16)]),
    ("splitk_det", [(bm, bn, 64, 1, s, 8) for bm in (64, 128) for bn in (64, 128) for s in (2, 4, 8)]),
)
N_NODE2 = 5_000  # points the second H200 host measures again (a comparable sweep)
N_CRASHED = 40  # the failed sweep's points
N_INTERPRETER = len(SMOKE_SHAPES) * 6


def model_ms(env: EnvironmentInfo, variant: str, dtype: str, shape, cfg, rng: random.Random) -> float:
    """A plausible time: compute at a wave-quantised share of the peak, or memory traffic with B
    re-read from DRAM once the operands outgrow L2 (less so in grouped order), plus split-K's
    fp32 partial sums; +-3% noise."""
    m, n, k = shape
    bm, bn, _, g, s, _ = cfg
    peak = env.peak_tflops * 1e12 / (14 if dtype == "float32" else 1)
    bw = env.peak_gbps * 1e9
    op = (m * k + k * n + m * n) * ITEMSIZE[dtype]
    if variant == "cublas":
        return (max(2 * m * n * k / (0.75 * peak), op / bw) * 1e3 + 0.005) * rng.uniform(0.98, 1.02)
    tiles = -(-m // bm) * -(-n // bn)
    slots = env.sm_count * 2
    programs = tiles * s
    util = programs / (math.ceil(programs / slots) * slots)
    shape_eff = (bm * bn / (128 * 256)) ** 0.25
    compute = 2 * m * n * k / (0.8 * peak * util * shape_eff)
    over = op / env.l2_bytes
    reread = 0.0 if over <= 1 else min(1.0, math.log2(over) / 4) * (0.25 if g > 1 else 1.0)
    memory = op * (1 + 3 * reread) / bw
    partials = 2 * m * n * 4 * s / bw if s > 1 else 0.0
    return (max(compute, memory) + partials + 0.004e-3) * 1e3 * rng.uniform(0.97, 1.03)


def _big_grid(n_rows: int, rng: random.Random) -> list[tuple[EnvironmentInfo, MeasurementRecord]]:
    out = []
    for env in (H200, A100):
        for dtype in BIG_DTYPES:
            for shape in ((m, n, k) for m in BIG_SIZES for n in BIG_SIZES for k in BIG_K):
                for variant, configs in BIG_CONFIGS:
                    for cfg in configs:
                        if len(out) == n_rows:
                            return out
                        out.append((env, _big_point(env, variant, dtype, shape, cfg, rng)))
    return out


def _big_point(env, variant, dtype, shape, cfg, rng: random.Random) -> MeasurementRecord:
    bm, bn, bk, g, s, w = cfg
    roll = rng.random()
    if variant != "cublas" and bm * bn >= 128 * 256 and w == 4:
        status = "compile_error"  # out of registers, as Triton refuses it
    elif variant != "cublas" and roll < 0.01:
        status = ("crashed", "timeout", "launch_error")[int(roll * 300) % 3]
    elif roll < 0.02:
        status = "wrong"
    else:
        status = "ok"
    ms = model_ms(env, variant, dtype, shape, cfg, rng) if status in ("ok", "wrong") else None
    rel_err = (0.3 if status == "wrong" else 1e-3 if dtype == "bfloat16" else 2e-4) * rng.uniform(0.5, 1.5)
    atomic = variant == "splitk" and s > 1
    return point(
        env,
        variant,
        shape,
        ms,
        dtype=dtype,
        block=(bm, bn, bk),
        group_m=g,
        split_k=s,
        warps=w,
        status=status,
        rel_err=rel_err,
        nondeterminism=rng.uniform(1e-4, 4e-3) if atomic else None,  # the farm repeats atomic variants only
    )


def _retimed(rec: MeasurementRecord, factor: float, worker: str) -> MeasurementRecord:
    """The same point measured again elsewhere: its time scaled by factor."""
    if rec.ms is None:
        return dataclasses.replace(rec, worker=worker)
    ms = rec.ms * factor
    tflops = 2 * rec.m * rec.n * rec.k / (ms * 1e-3) / 1e12
    return dataclasses.replace(rec, ms=ms, ms_p20=ms * 0.98, ms_p80=ms * 1.02, tflops=tflops, worker=worker)


def big_batches(n_rows: int, seed: int = 0) -> list[Batch]:
    """n_rows rows: the grid on H200 then A100, a second H200 host re-measuring N_NODE2 points, a failed
    sweep and interpreter rows."""
    rng = random.Random(seed)
    grid = _big_grid(n_rows - N_NODE2 - N_CRASHED - N_INTERPRETER, rng)
    by_env: dict[str, list[MeasurementRecord]] = {}
    for env, rec in grid:
        by_env.setdefault(env.gpu_name, []).append(rec)
    node2 = [_retimed(r, rng.uniform(0.95, 1.06), "gpu-node-2:gpu0") for r in by_env[H200.gpu_name][:N_NODE2]]
    crashed = [
        point(A100, "grouped", (16384, 16384, k), None, group_m=8, status="crashed", code_version="v2")
        for k in range(1024, 1024 * (N_CRASHED + 1), 1024)
    ]
    return [
        Batch(H200, by_env[H200.gpu_name], sweep="h200-full"),
        Batch(A100, by_env.get(A100.gpu_name, []), sweep="a100-full"),
        Batch(H200_NODE2, node2, sweep="h200-node2"),
        Batch(A100, crashed, sweep="a100-large", sweep_status="failed"),
        Batch(INTERPRETER, interpreter_records(), sweep="ci-smoke"),
    ]


def big_db(path: Path, n_rows: int = 100_000) -> Path:
    return build(path, big_batches(n_rows))
