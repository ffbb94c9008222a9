"""The dashboard tests' databases, built with samples.record (one record builder for every test).

- empty: the schema, no rows.
- small: a handful of points per page with hand-picked times, so each chart's expected data is
  known exactly (the constants below).
- interpreter: only rows from Triton's interpreter (CPU times), as `farm sweep --preset smoke` on a
  machine without a GPU writes them.
- failed_sweep: one sweep that failed with every point failed.
- splitk_verdict: the H200 case where the best per-block split-K ratio and best-vs-best disagree.
- fidelity: revision 0002's columns: grouping that saves time and more energy, split-K whose eager
  speedup differs from its kernel-time one, and a pair stored before 0002.
The 100,000-row database is tools/sample_db.py's big_db (the benchmark builds it too).
"""

from __future__ import annotations

from pathlib import Path

from samples import A100, H200, INTERPRETER, SMOKE_SHAPES, Batch, build, interpreter_records, record

from db.records import EnvironmentInfo, MeasurementRecord

__all__ = ["A100", "H200", "INTERPRETER", "SMOKE_SHAPES"]  # the tests read the environments from here too


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
# Energy on 8192^3 only (the GPU near its 700 W limit at every group_m): the energy gain is the time gain.
GROUPED_WATTS = {BIG_SQUARE: 650.0}
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
# Host time of a split launcher call (zeros + kernel + cast), as the H200 host measured it (76 us,
# docs/perf-notes.md); unsplit rows keep samples.record's 30 us. Eager time per call, max(stream, host):
# SKINNY's splits all wait on the host, 0.076 ms (the first stored, split 4, is the pick), against the
# 64x64 unsplit 0.160 ms; MID's split 2 (0.080 ms) and SQUARE's (0.3125 ms) outlast their host time.
SPLIT_HOST_MS = 0.076
SMALL_SPLITK_EAGER = {SKINNY: 0.160 / 0.076, MID: 0.120 / 0.080, SQUARE: 0.250 / 0.3125}
A100_SPLITK = {(SKINNY, (128, 128)): {1: 0.5, 4: 0.25}}  # speedup 2.0 at 4 / 108 tiles per SM
# How rows stored before revision 0002 read (the A100 pair here): interleaved, stream_ms = ms, no host
# time, no energy.
LEGACY = dict(host_ms=None, timing_regime="interleaved")


def _splitk(env: EnvironmentInfo, table: dict, **kw) -> list[MeasurementRecord]:
    return [
        record(
            "splitk",
            shape,
            env=env,
            ms=ms,
            block=(*blocks, 64),
            split_k=s,
            nondeterminism=SPLITK_NONDETERMINISM * (s > 1),
            **({"host_ms": SPLIT_HOST_MS} if s > 1 else {}) | kw,
        )
        for (shape, blocks), times in table.items()
        for s, ms in times.items()
    ]


# Timing sections of stored specs (farm.spec.Timing as a sweep stores it): the default since visit
# 30, and settling at the power limit as before it, with two passes there.
STEADY = {"timing": {"regime": "steady", "max_settle_s": 0.02, "limit_passes": 1}}
SETTLED = {"timing": {"regime": "steady", "max_settle_s": 1.5, "limit_passes": 2}}


def small_db(path: Path) -> Path:
    """H200 bfloat16 points for every page, one A100 pair, a wrong and two failed rows; two sweeps."""
    grouped = [
        record("grouped", shape, env=H200, ms=ms, group_m=g, avg_watts=GROUPED_WATTS.get(shape))
        for shape, times in GROUPED_MS.items()
        for g, ms in times.items()
    ]
    cublas = [record("cublas", shape, env=H200, ms=ms) for shape, ms in CUBLAS_MS.items()]
    failed = [
        # Faster than any ok row but wrong: no view may use it.
        record(
            "splitk", SKINNY, env=H200, ms=0.010, split_k=32, status="wrong", rel_err=0.5, nondeterminism=0.1
        ),
        record("splitk", SKINNY, env=H200, ms=None, block=(256, 256, 64), split_k=4, status="compile_error"),
        record("grouped", BIG_SQUARE, env=H200, ms=None, block=(256, 256, 64), group_m=8, status="timeout"),
    ]
    sweep_b = [
        record(
            "splitk",
            SKINNY,
            env=H200,
            ms=0.042,
            split_k=16,
            nondeterminism=SPLITK_NONDETERMINISM,
            host_ms=SPLIT_HOST_MS,
            code_version="v2",
        ),
        record("splitk", SQUARE, env=H200, ms=0.300, code_version="v2"),
        record("grouped", BIG_SQUARE, env=H200, ms=1.61, group_m=8, code_version="v2"),
    ]
    return build(
        path,
        [
            Batch(H200, _splitk(H200, SPLITK_MS) + grouped + cublas + failed, sweep="small-a", spec=STEADY),
            Batch(H200, sweep_b, sweep="small-b", spec=SETTLED),
            Batch(A100, _splitk(A100, A100_SPLITK, **LEGACY), sweep="small-a100"),
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
    """The 96x7168x2048 case above, on an H200 in bfloat16, plus stream-K at 0.0210 ms with blocks A,
    measured throttled at 1500 MHz."""
    records = [
        record(variant, VERDICT_SHAPE, env=H200, ms=ms, block=block, split_k=s)
        for (variant, block, s), ms in VERDICT_MS.items()
    ]
    # Measured while NVML reported a power cap: the page must say so.
    throttled = dict(throttled=True, sm_clock_mhz=1500, throttle_reasons="sw_power_cap")
    records.append(record("streamk", VERDICT_SHAPE, env=H200, ms=0.0210, block=BLOCKS_A, **throttled))
    return build(path, [Batch(H200, records, sweep="splitk-verdict")])


# ---- interpreter-only and failed-sweep databases ----


def interpreter_db(path: Path) -> Path:
    return build(path, [Batch(INTERPRETER, interpreter_records(), sweep="smoke")])


FAILED_STATUSES = ("crashed", "crashed", "compile_error", "timeout")


def failed_sweep_db(path: Path) -> Path:
    """A sweep that failed after four points, all of them failed: no view has a row."""
    records = [
        record("splitk", SKINNY, env=H200, ms=None, split_k=2**i, status=status)
        for i, status in enumerate(FAILED_STATUSES)
    ]
    return build(path, [Batch(H200, records, sweep="smoke", sweep_status="failed")])


# ---- measurement fidelity: eager time and energy (revision 0002's columns), on an H200 in bfloat16 ----

# Grouping (grouped 128x128x64 w8 s3 at 8192^3, operands 6.4x L2): group_m 8 saves 10% of the time and
# 15% of the energy of group_m 1; group_m 4 has no energy reading (NVML without an energy counter).
FIDELITY_GROUPING = {1: (1.0, 0.600), 4: (0.95, None), 8: (0.9, 0.600 * 0.85)}  # group_m -> (ms, J)
# (group_m) -> (time gain, energy gain): 1 / 0.9 = 1.11 and 1 / 0.85 = 1.18.
FIDELITY_GAINS = {4: (1 / 0.95, None), 8: (1 / 0.9, 1 / 0.85)}
# Split-K on 256x256x65536, 128x128 blocks: split_k -> (kernel ms, stream ms, host ms, J per launch).
# Kernel time: split 4 is fastest, 0.100 / 0.050 = 2.0. Eager time per call = max(stream, host):
# unsplit 0.105 ms; split 4 waits on its host (0.080), split 8 on its stream (0.065): the eager caller's
# best split is split 8, 0.105 / 0.065 = 1.62.
FIDELITY_SPLITK = {
    1: (0.100, 0.105, 0.020, 0.060),
    4: (0.050, 0.070, 0.080, 0.034),
    8: (0.060, 0.065, 0.060, 0.040),
}
FIDELITY_KERNEL_SPEEDUP = 0.100 / 0.050
FIDELITY_EAGER_SPEEDUP = 0.105 / 0.065


def fidelity_db(path: Path) -> Path:
    """The grouping and split-K cases above, steady regime, plus one grouped pair stored before revision
    0002 on 1024^3 (interleaved, no host time, no energy)."""
    grouped = [
        record(
            "grouped",
            BIG_SQUARE,
            env=H200,
            ms=ms,
            group_m=g,
            avg_watts=None if joules is None else joules / ms * 1e3,
        )
        for g, (ms, joules) in FIDELITY_GROUPING.items()
    ]
    splitk = [
        record(
            "splitk",
            SKINNY,
            env=H200,
            ms=ms,
            split_k=s,
            stream_ms=stream,
            host_ms=host,
            avg_watts=joules / ms * 1e3,
            nondeterminism=SPLITK_NONDETERMINISM * (s > 1),
        )
        for s, (ms, stream, host, joules) in FIDELITY_SPLITK.items()
    ]
    legacy = [
        record("grouped", SMALL_SQUARE, env=H200, ms=ms, group_m=g, **LEGACY)
        for g, ms in ((1, 0.02), (8, 0.019))
    ]
    return build(path, [Batch(H200, grouped + splitk + legacy, sweep="fidelity")])
