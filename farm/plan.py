"""From a validated spec to work: points, resume filtering, batches, and a time estimate.

A batch is one (dtype, shape, variant) with that variant's configs for it: the worker builds the
inputs and the fp64 reference once, and times the batch's configs under the same clock
conditions. Batches are dealt so that each kernel is compiled once per host, not once per GPU
(see `make_batches`).

Torch-free, like the rest of the driver's path: variants come from their declarations and config
spaces (kernels/registry.py), not from their modules (tests/farm/test_driver_imports.py).
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import os
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from db.records import MeasurementRecord, point_key
from farm.errors import UserError
from farm.spec import GridSpec, Timing
from kernels import MatmulConfig, UnknownVariantError, get_variant
from kernels.sizes import flop
from kernels.space import DEFAULT_SMEM_LIMIT, Problem

# Points per batch: enough to interleave the configs of a shape, few enough that a batch lost to a
# crashed worker costs seconds, not minutes.
MAX_BATCH_POINTS = 48


@dataclass(frozen=True)
class Point:
    variant: str
    dtype: str
    m: int
    n: int
    k: int
    config: MatmulConfig

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.m, self.n, self.k

    @property
    def flops(self) -> int:
        return flop(self.m, self.n, self.k)

    def key(self, code_version: str) -> tuple:
        return point_key(code_version, self.variant, self.dtype, self.m, self.n, self.k, self.config.key)

    def label(self) -> str:
        return f"{self.variant} {self.dtype} {self.m}x{self.n}x{self.k} {self.config.key}"

    def record(self, status: str, error: str = "", **measured) -> MeasurementRecord:
        """This point's row: identity and config columns, plus whatever was measured.

        The driver fills in code_version when it stores the record."""
        cfg = self.config
        return MeasurementRecord(
            code_version="",
            variant=self.variant,
            dtype=self.dtype,
            m=self.m,
            n=self.n,
            k=self.k,
            config_key=cfg.key,
            block_m=cfg.block_m,
            block_n=cfg.block_n,
            block_k=cfg.block_k,
            group_m=cfg.group_m,
            split_k=cfg.split_k,
            num_warps=cfg.num_warps,
            num_stages=cfg.num_stages,
            input_precision=cfg.input_precision,
            status=status,
            error=error,
            **measured,
        )


@dataclass(frozen=True)
class Plan:
    """A sweep's points, pruned for one GPU's shared memory: the driver plans for an H100/H200's while
    the workers start and again where theirs differs."""

    smem_limit: int  # bytes of shared memory a block may use, which the points were pruned for
    points: list[Point]


@dataclass
class Batch:
    dtype: str
    m: int
    n: int
    k: int
    points: list[Point]
    seed: int
    # The early cut: a point whose first samples read over this many ms stops at the minimum
    # repetitions (db.records.CUT_FACTOR times the best kernel time stored for the shape); None: no cut.
    cut_ms: float | None = None
    # Its points were given a fresh worker process for the instrument (farm.faults.FaultPolicy.restarted):
    # a fault of the instrument in this one is stored, not sent to another process.
    fresh_process: bool = False
    # The worker whose restarted process this batch waits for (the driver's; None: any worker).
    worker: int | None = None


def check_variants(spec: GridSpec) -> None:
    """Every variant the spec names is registered (built in, or by a plugin loaded before); the error
    names the spec's file and line, as validation errors do: `my.yaml:4: variants[1]: ...`."""
    for i, name in enumerate(spec.variants):
        try:
            get_variant(name)
        except UnknownVariantError as exc:
            raise UserError(f"{spec.where('variants', i)}: variants[{i}]: {exc}") from None


def expand(spec: GridSpec, smem_limit: int = DEFAULT_SMEM_LIMIT) -> tuple[list[Point], Counter]:
    """Every point of the spec after pruning, and how many candidates each variant lost to pruning."""
    check_variants(spec)
    axes = spec.configs.axes()
    spaces = {name: get_variant(name).space for name in spec.variants}
    # The candidates depend on the axes alone: built once per variant, pruned per problem.
    candidates = {name: sorted(set(space.candidates(axes))) for name, space in spaces.items()}
    points: list[Point] = []
    pruned: Counter = Counter()
    for dtype in spec.dtypes:
        for m, n, k in spec.shape_list():
            problem = Problem(m, n, k, dtype, smem_limit)
            for name in spec.variants:
                kept = spaces[name].configs(problem, candidates=candidates[name])
                pruned[name] += len(candidates[name]) - len(kept)
                points += [Point(name, dtype, m, n, k, cfg) for cfg in kept]
    return points, pruned


def code_versions(variants: Iterable[str]) -> dict[str, str]:
    """Per variant: a hash of the kernels package and, for a plugin, of the plugin's file.

    Editing any kernel file invalidates every variant's results (the variants share tile code);
    editing a plugin invalidates that plugin's variants only.
    """
    package = Path(get_variant("tiled").source_file).parent
    base = hashlib.sha256()
    for path in sorted(package.glob("*.py")):
        base.update(path.name.encode() + path.read_bytes())
    out = {}
    for name in variants:
        h = base.copy()
        source = Path(get_variant(name).source_file)
        if source.parent != package:
            h.update(source.read_bytes())
        out[name] = h.hexdigest()[:12]
    return out


def pending(points: Sequence[Point], versions: dict[str, str], done: set[tuple]) -> list[Point]:
    return [p for p in points if p.key(versions[p.variant]) not in done]


# Triton specializes a kernel's integer arguments on divisibility by 16 (and makes the value 1 a
# constant), not on their values: triton 3.9 gives 16 -> i32 "D", 17 -> i32, 1 -> constexpr,
# 2**31 + 16 -> i64 "D" (triton/backends/compiler.py, get_int_specialization). The launchers pass
# M, N, K, the strides of contiguous operands (K, N and 1) and M * N (a split-K workspace's
# stride), so a config compiled for one shape serves every shape whose sizes fall in the same
# classes: the splitk preset's 12 shapes are all multiples of 16 and share 44 kernels.
def int_class(value: int) -> str:
    """The part of an integer argument that Triton compiles a kernel for."""
    if value == 1:
        return "1"
    return ("D" if value % 16 == 0 else "") + ("i64" if value >= 2**31 else "")


def compile_key(point: Point) -> tuple | None:
    """What Triton compiles this point's kernel for; None for a library baseline (nothing to compile).

    An approximation for a plugin that passes other shape-derived integers: a wrong guess costs a
    compile on a second GPU, never a wrong result."""
    if is_baseline(point.variant):
        return None
    classes = tuple(int_class(v) for v in (point.m, point.n, point.k, point.m * point.n))
    return point.variant, point.dtype, point.config.key, classes


@functools.cache
def is_baseline(variant: str) -> bool:
    """A library baseline (cuBLAS): measured beside the kernels, compiles nothing."""
    return get_variant(variant).baseline


def make_batches(points: Sequence[Point], seed: int, max_points: int = MAX_BATCH_POINTS) -> list[Batch]:
    """Group points by (dtype, shape, variant) in chunks of at most `max_points`, in dealing order.

    The driver hands the queue out in order to the least busy worker, and every worker on a host
    reads and fills the host's one Triton cache (the worker sets TRITON_CACHE_DIR). Measured on
    2 x H200 (splitk preset): batches holding every variant of a shape made both workers compile
    the same kernels side by side, 0.64 efficiency of the sweep loop. So the order is:

    1. spread: batches that share no kernel with any batch before them, most kernels first: the
       first batches dealt (one per worker, then each worker's second) compile different kernels
       at once;
    2. cover: then the batches that still bring kernels nobody compiled, most new kernels first;
    3. reuse: the rest, whose kernels the host's cache holds by the time they run, longest first
       (`estimate_run_seconds`), so that the last batches dealt are short: 2 x H200, splitk preset
       in shuffled order, one worker finished 30 s (of 158) before the other, which ran a batch of
       20 configs at the power limit last (loop efficiency 0.84; docs/design.md, "A sweep").

    Ties go by a shuffle with the spec's seed: shapes in random order keep slow clock drift from
    lining up with the grid's order.
    """
    groups: dict[tuple, list[Point]] = {}
    for p in points:
        groups.setdefault((p.dtype, p.m, p.n, p.k, p.variant), []).append(p)
    batches = []
    for (dtype, m, n, k, _), group in groups.items():
        for start in range(0, len(group), max_points):
            batches.append(Batch(dtype, m, n, k, group[start : start + max_points], seed=seed))
    random.Random(seed).shuffle(batches)
    return deal_order(batches)


def batch_kernels(batch: Batch) -> frozenset:
    """The compile keys a batch needs."""
    return frozenset(key for key in map(compile_key, batch.points) if key is not None)


def deal_order(batches: Sequence[Batch]) -> list[Batch]:
    """Spread, cover, reuse (see `make_batches`); stable for ties, so the caller's shuffle decides them
    (the reuse phase's estimates tie between batches of the same shape and size)."""
    kernels = [batch_kernels(b) for b in batches]
    dealt: set = set()
    order: list[int] = []
    left = set(range(len(batches)))
    while True:  # spread
        fresh = [i for i in sorted(left) if kernels[i] and kernels[i].isdisjoint(dealt)]
        if not fresh:
            break
        pick = max(fresh, key=lambda i: len(kernels[i]))  # max keeps the first of equals
        order.append(pick)
        left.discard(pick)
        dealt |= kernels[pick]
    # cover: greedy set cover with lazily updated counts (a count only ever shrinks)
    heap = [(-len(kernels[i] - dealt), i) for i in sorted(left)]
    heapq.heapify(heap)
    while heap:
        negative, i = heapq.heappop(heap)
        new = len(kernels[i] - dealt)
        if new == 0:
            continue
        if new != -negative:
            heapq.heappush(heap, (-new, i))
            continue
        order.append(i)
        left.discard(i)
        dealt |= kernels[i]
    # reuse, stable; their kernels are compiled by then, so the run time alone orders them (and the
    # full preset's 140k points skip a second compile_key each: 3.2 -> 2.2 s of batching here)
    order += sorted(left, key=lambda i: -estimate_run_seconds(batches[i].points))
    return [batches[i] for i in order]


# Rates for the estimate, from sweeps on an H200 in the interleaved regime (splitk preset: 540 points
# in 23 s; grouping: 328 in 15-18 s): dense bf16/fp16 at 400 TFLOP/s (about what tuned configs
# reach on average), fp32 "ieee" on CUDA cores at 20 TFLOP/s; 0.45 s per compile on 8 threads;
# 24 launches per point (check and repetitions), each behind a 70 us L2 flush; 35 ms of host
# work per point (checking against fp64, rounds, records).
EST_TFLOPS = {"float16": 400.0, "bfloat16": 400.0, "float32": 20.0}
EST_COMPILE_S, EST_LAUNCHES, EST_FLUSH_S, EST_POINT_S = 0.45, 24, 70e-6, 0.035
# The steady regime on an H200, fitted to two sweeps from empty caches on one GPU (docs/design.md,
# "The stop rule and what a point costs"): the grouping preset's sweep loop 83 s, 72 points under
# 0.1 ms of kernel and 256 over; the splitk preset's 124 s, 294 and 294. So 0.09 s more per point
# than the rates above below 0.1 ms, 0.24 s at or over it, where kernels run back to back may meet
# the power limit (8192x8192x4096 at 0.8 ms did; 512x512x8192 at 21 us did not) and a config there
# takes one 300 ms block.
EST_STEADY_POINT_S, EST_STEADY_LIMITED_S, EST_LIMITED_KERNEL_S = 0.09, 0.24, 1e-4
# Every point without an energy reading of its own then runs its launches alone for the spec's
# timing.energy_window_s (farm.clock.ENERGY_WINDOW_S: 0.35 s, three updates of NVML's ~100 ms energy
# counter): in the steady regime the points below the power limit (a point at the limit reads its
# energy over its own 300 ms block), in the interleaved and rest regimes every point (their blocks are
# shared or single launches). The fits above predate the window.
EST_ENERGY_WINDOW_S = Timing.model_fields["energy_window_s"].default


def estimate_gpu_seconds(
    points: Sequence[Point],
    compile_threads: int = 8,
    regime: str = "steady",
    limit_passes: int = 1,
    energy_window_s: float = EST_ENERGY_WINDOW_S,
) -> float:
    """GPU-seconds of one H100-class worker, start-up excluded (limit_passes: the spec's passes at
    the power limit, each a measured block again; energy_window_s: the spec's window, 0 for none)."""
    kernels = {compile_key(p) for p in points} - {None}
    compile_s = len(kernels) * EST_COMPILE_S / compile_threads
    return compile_s + estimate_run_seconds(points, regime, limit_passes, energy_window_s)


def estimate_run_seconds(
    points: Sequence[Point],
    regime: str = "steady",
    limit_passes: int = 1,
    energy_window_s: float = EST_ENERGY_WINDOW_S,
) -> float:
    """`estimate_gpu_seconds` without the compiles: the points' checks, timing and energy windows."""
    return sum(point_run_seconds(p.flops, p.dtype, regime, limit_passes, energy_window_s) for p in points)


def point_run_seconds(
    flops: int,
    dtype: str,
    regime: str = "steady",
    limit_passes: int = 1,
    energy_window_s: float = EST_ENERGY_WINDOW_S,
) -> float:
    """One point's share of `estimate_run_seconds`: it depends on the shape and dtype alone, so a plan
    is priced per shape from counts (`price`)."""
    kernel_s = flops / (EST_TFLOPS[dtype] * 1e12)
    run_s = EST_POINT_S + EST_LAUNCHES * (kernel_s + EST_FLUSH_S)
    limited = regime == "steady" and kernel_s >= EST_LIMITED_KERNEL_S
    if regime == "steady":
        run_s += EST_STEADY_LIMITED_S * limit_passes if limited else EST_STEADY_POINT_S
    if not limited:
        run_s += energy_window_s
    return run_s


# -- the plan against the machine ------------------------------------------------------------------

# Under Triton's interpreter (a CPU, no GPU) one launch of tiled bf16 took, on the 2-core VM, 0.66 s
# at 256^3 with 32x32x32 blocks and 1.7 s with 16x32x16 (3.6 and 9.6 s at 512^3; 0.05-0.1 s at the
# smoke preset's 80x64x96), and a point launches its kernel about INTERP_LAUNCHES times (the check,
# the repeats, the timed repetitions): past 256^3 multiply-adds a point takes 4-10 s or more, and a
# grid of them hours. Such a point is GPU-sized: a sweep refuses it under the interpreter unless
# asked (--backend interpreter).
INTERPRETER_MAX_MNK = 256**3
INTERP_S_PER_MNK, INTERP_LAUNCHES = 3e-8, 6  # the 32x32x32 rate above: 3.6 s / 512^3
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4}
FP64 = 8
# The dry run's target when no worker has said what it holds: an 80 GB H100, the GPU its time
# estimate is for. A sweep checks each point against its workers' own memory.
DRY_RUN_MEMORY_BYTES = 80 * 10**9


def point_bytes(point: Point) -> int:
    """Device memory a point needs at once while the worker checks it (farm/measure.py): the
    operands, their fp64 copies and the fp64 product (the reference, kernels.accuracy), the output
    and its fp64 copy for the comparison, and split-K's fp32 workspace."""
    m, n, k = point.shape
    size = ITEMSIZE.get(point.dtype, 4)
    operands = (m * k + k * n) * (size + FP64)
    output = m * n * (FP64 + size + FP64)
    workspace = point.config.split_k * m * n * 4 if point.config.split_k > 1 else 0
    return operands + output + workspace


def split_too_large(points: Sequence[Point], memory_bytes: int) -> tuple[list[Point], list[Point]]:
    """(points that fit in memory_bytes, points that do not); every point fits where it is 0 (unknown)."""
    if memory_bytes <= 0:
        return list(points), []
    fit, large = [], []
    for p in points:
        (fit if point_bytes(p) <= memory_bytes else large).append(p)
    return fit, large


def too_large_error(point: Point, memory_bytes: int) -> str:
    """The error a too_large row stores."""
    return (
        f"needs {point_bytes(point) / 1e9:,.1f} GB (operands, fp64 reference, output) and the target has "
        f"{memory_bytes / 1e9:,.1f} GB: not run"
    )


def gpu_sized(points: Sequence[Point]) -> list[Point]:
    """The points too large for Triton's interpreter to finish in seconds (INTERPRETER_MAX_MNK)."""
    return [p for p in points if p.m * p.n * p.k > INTERPRETER_MAX_MNK]


def estimate_interpreter_seconds(points: Sequence[Point]) -> float:
    """CPU-seconds under Triton's interpreter, at the rate measured above (a rough floor)."""
    return sum(INTERP_S_PER_MNK * INTERP_LAUNCHES * p.m * p.n * p.k for p in points)


def interpreter_refusal(points: Sequence[Point], gpu_seconds: float) -> str | None:
    """Why a plan must not run under Triton's interpreter (one line), or None when it may."""
    big = gpu_sized(points)
    if not big:
        return None
    largest = max(big, key=lambda p: p.m * p.n * p.k)
    return interpreter_message(
        f"{len(big)} of {len(points)}", largest.shape, estimate_interpreter_seconds(points), gpu_seconds
    )


def interpreter_message(counts: str, largest: tuple[int, int, int], cpu_s: float, gpu_s: float) -> str:
    """The one line that refuses GPU-sized points under the interpreter (from points or from a price)."""
    m, n, k = largest
    return (
        f"{counts} points are GPU-sized for Triton's interpreter, which this sweep "
        f"would run (no GPU): over {INTERPRETER_MAX_MNK:,} multiply-adds (the largest "
        f"{m}x{n}x{k}); about {duration(cpu_s)} "
        f"on the CPU against {gpu_s / 60:.1f} min on one H100-class GPU. Try `--preset smoke`, "
        "sweep a GPU cluster (--address), or pass --backend interpreter to run it anyway"
    )


def duration(seconds: float) -> str:
    """A time estimate in the unit a person reads it in: "90 s", "45 min", "30 h", "32 days"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:,.0f} days"


def host_memory_bytes() -> int:
    """This host's memory (the interpreter's device is the CPU); 0 where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0
