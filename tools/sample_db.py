"""Sample results databases, written through db.writes: the one record builder (`record`), the sample
environments, and the synthetic 100,000-row database of the dashboard's benchmark and tests.

- `record`: one measurement with the derived columns farm.metrics would give it, its config key the
  farm's own (kernels.MatmulConfig.key), so hand-made rows look like swept ones.
- H200 as the GPU visits saw it (driver 580.159.04, CUDA 13.0, torch 2.11, triton 3.6), an A100, a second
  H200 host, and INTERPRETER: what farm.gpu reports without a GPU (the nominal 132-SM limits, no peaks).
- `big_db`: N rows (100,000 in the tests) over two GPUs, three dtypes and every variant, with times
  from a small wave-quantisation + L2 model so the charts look like a real sweep; plus a second H200
  host (what sweep comparison is for), a failed sweep and a sliver of interpreter rows.

In bench/ (not tests/): benchmarks import no test helpers; the tests import this.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.orm import Session

from db.records import Backend, EnvironmentInfo, MeasurementRecord
from db.schema import open_engine
from db.writes import environment_id, finish_sweep, start_sweep, upsert_measurements
from kernels.config import MatmulConfig

H200 = EnvironmentInfo(
    gpu_name="NVIDIA H200",
    sm_count=132,
    l2_bytes=60 * 2**20,
    memory_bytes=150_754_820_096,
    compute_capability="9.0",
    driver_version="580.159.04",
    cuda_version="13.0",
    torch_version="2.11.0",
    triton_version="3.6.0",
    ray_version="2.60.0",
    python_version="3.12.3",
    host="gpu-node-1",
    project_version="0.1.0",
    peak_tflops=989.4,
    peak_gbps=4800.0,
)
A100 = dataclasses.replace(
    H200,
    gpu_name="NVIDIA A100-SXM4-80GB",
    sm_count=108,
    l2_bytes=40 * 2**20,
    peak_tflops=312.0,
    peak_gbps=2039.0,
)
H200_NODE2 = dataclasses.replace(H200, host="gpu-node-2")
# What farm.gpu reports without a GPU: the nominal H100/H200-class limits (farm.metrics.NOMINAL_GPU),
# no peaks.
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
# Host time of one launcher call: the H200 host's split-K launcher (zeros + kernel + cast) took 76 us,
# a one-kernel launcher less; 30 us is a sample value between.
HOST_MS = 0.030
POWER_LIMIT_W = 700.0  # the H200's enforced limit as NVML read it


def record(
    variant: str = "grouped",
    shape: tuple[int, int, int] = (4096, 4096, 4096),
    *,
    env: EnvironmentInfo = H200,
    ms: float | None = 1.0,
    dtype: str = "bfloat16",
    block: tuple[int, int, int] = (128, 128, 64),
    group_m: int = 1,
    split_k: int = 1,
    num_warps: int = 8,
    num_stages: int = 3,
    input_precision: str = "ieee",
    status: str = "ok",
    rel_err: float = 1e-3,
    code_version: str = "c0ffee",
    avg_watts: float | None = None,
    **fields,
) -> MeasurementRecord:
    """One measurement of `variant` on `shape` in `env` (cuBLAS: no tile grid), p20-p80 at +-2% of ms.

    Times as revision 0002 stores them: stream_ms = ms (no idle gap between kernels), host_ms
    HOST_MS (the interpreter: all three one wall time), regime steady. Energy only where avg_watts
    is given: joules_per_launch = avg_watts x ms, as farm.measure charges it, under a 700 W limit.
    Any MeasurementRecord field can be given in `fields` (nondeterminism, throttled, stream_ms, ...).
    """
    m, n, k = shape
    library = variant == "cublas"
    bm, bn, bk = (0, 0, 0) if library else block
    num_warps, num_stages = (0, 0) if library else (num_warps, num_stages)
    precision = input_precision
    cfg = MatmulConfig(
        block_m=bm,
        block_n=bn,
        block_k=bk,
        group_m=group_m,
        split_k=split_k,
        num_warps=num_warps,
        num_stages=num_stages,
        input_precision=precision,
    )
    tiles = None if library else -(-m // bm) * -(-n // bn)
    timed = ms is not None
    interpreted = env.backend == Backend.INTERPRETER
    metered = timed and avg_watts is not None
    values = dict(
        ms_p20=ms * 0.98 if timed else None,
        ms_p80=ms * 1.02 if timed else None,
        reps=50 if timed else None,
        stream_ms=ms,
        host_ms=(ms if interpreted else HOST_MS) if timed else None,
        timing_regime="steady" if timed else "",
        avg_watts=avg_watts if metered else None,
        joules_per_launch=avg_watts * ms / 1e3 if metered else None,
        power_limit_w=POWER_LIMIT_W if metered else None,
        tflops=2 * m * n * k / (ms * 1e-3) / 1e12 if timed else None,
        rel_err=rel_err if timed else None,
        tiles=tiles,
        programs=None if library else tiles * split_k,
        tiles_per_sm=None if library else tiles / env.sm_count,
        waves=None if library else tiles * split_k / env.sm_count / 2,
        occupancy=None if library else 2,
        operand_bytes=(m * k + k * n + m * n) * ITEMSIZE[dtype],
        backend=env.backend,
        worker=f"{env.host}:gpu0",
        error="" if status == "ok" else f"{status}: hand-made failure",
    )
    values.update(fields)
    return MeasurementRecord(
        code_version=code_version,
        variant=variant,
        dtype=dtype,
        m=m,
        n=n,
        k=k,
        config_key=cfg.key,
        block_m=bm,
        block_n=bn,
        block_k=bk,
        group_m=group_m,
        split_k=split_k,
        num_warps=num_warps,
        num_stages=num_stages,
        input_precision=precision,
        status=status,
        ms=ms,
        **values,
    )


@dataclass
class Batch:
    """Records of one environment, written by one sweep (or none, like a manual import)."""

    env: EnvironmentInfo
    records: list[MeasurementRecord] = field(default_factory=list)
    sweep: str | None = None
    sweep_status: str = "finished"
    spec: dict = field(default_factory=dict)  # the sweep's spec as `farm sweep` stores it


def build(path: Path | str, batches: list[Batch]) -> Path | str:
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
                        spec=b.spec,
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


# ---- a smoke sweep under the interpreter ----

SMOKE_SHAPES = ((48, 64, 96), (80, 64, 96), (40, 48, 200))


def interpreter_records() -> list[MeasurementRecord]:
    """A smoke sweep's rows under the interpreter: CPU milliseconds, split-K slower (no parallel SMs)."""
    out = []
    for i, shape in enumerate(SMOKE_SHAPES):
        base = 30.0 + 10 * i
        block = (16, 32, 16)
        out += [
            record("tiled", shape, env=INTERPRETER, ms=base * 1.1, block=block, num_warps=4, num_stages=2),
            record("grouped", shape, env=INTERPRETER, ms=base, block=block, num_warps=4, num_stages=2),
            record(
                "grouped",
                shape,
                env=INTERPRETER,
                ms=base * 0.95,
                block=block,
                group_m=2,
                num_warps=4,
                num_stages=2,
            ),
            record("splitk", shape, env=INTERPRETER, ms=base, block=block, num_warps=4, num_stages=2),
            record(
                "splitk",
                shape,
                env=INTERPRETER,
                ms=base * 2,
                block=block,
                split_k=4,
                num_warps=4,
                num_stages=2,
                nondeterminism=0.0,
            ),
            record("cublas", shape, env=INTERPRETER, ms=base / 20),
        ]
    return out


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
    return record(
        variant,
        shape,
        env=env,
        ms=ms,
        dtype=dtype,
        block=(bm, bn, bk),
        group_m=g,
        split_k=s,
        num_warps=w,
        status=status,
        rel_err=rel_err,
        nondeterminism=rng.uniform(1e-4, 4e-3) if atomic else None,
        # Near the limit where the kernel is long enough to heat the GPU (an H200 drew 684-692 W at 16384^3).
        avg_watts=min(POWER_LIMIT_W * 0.98, 250 + 40 * math.log2(1 + ms / 0.01)) if ms else None,
    )


def _retimed(rec: MeasurementRecord, factor: float, worker: str) -> MeasurementRecord:
    """The same point measured again elsewhere: its time scaled by factor."""
    if rec.ms is None:
        return dataclasses.replace(rec, worker=worker)
    ms = rec.ms * factor
    tflops = 2 * rec.m * rec.n * rec.k / (ms * 1e-3) / 1e12
    joules = rec.joules_per_launch * factor if rec.joules_per_launch is not None else None
    return dataclasses.replace(
        rec,
        ms=ms,
        ms_p20=ms * 0.98,
        ms_p80=ms * 1.02,
        stream_ms=ms,
        tflops=tflops,
        joules_per_launch=joules,
        worker=worker,
    )


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
        record(
            "grouped", (16384, 16384, k), env=A100, ms=None, group_m=8, status="crashed", code_version="v2"
        )
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
