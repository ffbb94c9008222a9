"""A plan priced from its axes before it is expanded: points, pruning and GPU time counted, not listed,
so memory and time stay flat however large the grid; and the bounds past which a sweep is refused
unless --allow-huge takes the risk (docs/design.md, "A sweep").
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from farm.plan import (
    EST_COMPILE_S,
    INTERP_LAUNCHES,
    INTERP_S_PER_MNK,
    INTERPRETER_MAX_MNK,
    check_variants,
    duration,
    host_memory_bytes,
    int_class,
    interpreter_message,
    is_baseline,
    point_run_seconds,
)
from farm.spec import GridSpec
from kernels import MatmulConfig, get_variant
from kernels.space import DEFAULT_SMEM_LIMIT, Problem

# A spec of 12.8 million points planned silently for 140 s in 4.1 GB before anything was said (0.96M
# points: 14 s, 220 MB): `price` counts instead. Up to PRICE_EXACT_WORK candidate checks (shapes x
# dtypes x each variant's candidates) it prunes every shape, as `expand` does, and its counts are
# exact (the full preset: 243,552 points, 43 shapes x 3 dtypes x 14 variants); beyond, it prunes a
# seeded sample of shapes and of candidates about that large and scales the kept share up. A sample
# of 30,000 checks prices a 10^7-point spec in about 1 s on the 2-core VM.
PRICE_EXACT_WORK = 400_000
PRICE_SAMPLE_WORK = 30_000
# Memory planning takes per point: the Point and its config, its point key, its batch: 680 B a point at
# the peak of `expand`, the keys and `make_batches` for the full preset (tracemalloc, 243,552 points;
# the 0.96M-point plan above: 220 MB); the driver's resume and claim sets come on top. Rounded up:
PLAN_BYTES_PER_POINT = 1_000
# The bounds past which a sweep is refused unless --allow-huge takes the risk: a day of GPU time on
# the workers it has, or planning memory over what this machine has free.
HUGE_GPU_SECONDS_PER_WORKER = 86_400.0


@dataclass
class Price:
    """A plan's size and cost from its axes (`price`): exact where `exact`, else a sampled estimate."""

    points: int
    per_variant: Counter
    pruned: Counter
    shapes: int  # distinct shapes (exact), or the products' sizes added up (an upper bound)
    gpu_seconds: float  # one H100-class worker, start-up excluded (estimate_gpu_seconds)
    exact: bool
    gpu_sized: int = 0  # points over INTERPRETER_MAX_MNK multiply-adds
    largest: tuple[int, int, int] | None = None  # the GPU-sized shape with the most multiply-adds
    interpreter_seconds: float = 0.0

    @property
    def plan_bytes(self) -> int:
        return self.points * PLAN_BYTES_PER_POINT


def price(
    spec: GridSpec,
    compile_threads: int = 8,
    smem_limit: int = DEFAULT_SMEM_LIMIT,
    exact_work: int = PRICE_EXACT_WORK,
    sample_work: int = PRICE_SAMPLE_WORK,
) -> Price:
    """Points, pruning and GPU time of `spec` without listing its points: memory and time stay flat
    however large the grid (module comment above PRICE_EXACT_WORK). Exact counts agree with `expand`
    and `estimate_gpu_seconds`."""
    check_variants(spec)
    timing = spec.timing
    axes = spec.configs.axes()
    spaces = {name: get_variant(name).space for name in spec.variants}
    n_candidates = {name: _candidate_count(space, axes) for name, space in spaces.items()}
    products = [(len(p.m), len(p.n), len(p.k)) for p in spec.shapes]
    n_shapes = sum(a * b * c for a, b, c in products)
    work = n_shapes * len(spec.dtypes) * sum(n_candidates.values())
    exact = work <= exact_work
    if exact:
        shapes = [(shape, 1.0) for shape in spec.shape_list()]
        n_shapes = len(shapes)
        candidates = {name: sorted(set(space.candidates(axes))) for name, space in spaces.items()}
        scale = dict.fromkeys(spaces, 1.0)
    else:
        rng = random.Random(spec.seed)
        per_variant_checks = max(1, sample_work // max(1, len(spec.dtypes) * len(spaces)))
        n_shape_samples = max(1, min(n_shapes, int(per_variant_checks**0.5)))
        shapes = [
            (_shape_at(spec, i), n_shapes / n_shape_samples)
            for i in sorted(rng.sample(range(n_shapes), n_shape_samples))
        ]
        per_shape = max(1, per_variant_checks // n_shape_samples)
        candidates = {name: _candidate_sample(space, axes, per_shape, rng) for name, space in spaces.items()}
        scale = {name: n_candidates[name] / max(1, len(candidates[name])) for name in spaces}
    per_variant: Counter = Counter()
    pruned: Counter = Counter()
    run_s = interp_s = 0.0
    gpu_sized = 0.0
    largest = None
    kernels: set = set()
    for dtype in spec.dtypes:
        for (m, n, k), weight in shapes:
            problem = Problem(m, n, k, dtype, smem_limit)
            seconds = point_run_seconds(
                2 * m * n * k, dtype, timing.regime, timing.limit_passes, timing.energy_window_s
            )
            for name, space in spaces.items():
                kept = space.configs(problem, candidates=candidates[name])
                count = len(kept) * scale[name] * weight
                per_variant[name] += count
                pruned[name] += (len(candidates[name]) * scale[name] - len(kept) * scale[name]) * weight
                run_s += count * seconds
                if kept and m * n * k > INTERPRETER_MAX_MNK:
                    gpu_sized += count
                    if largest is None or m * n * k > largest[0] * largest[1] * largest[2]:
                        largest = (m, n, k)
                interp_s += count * INTERP_S_PER_MNK * INTERP_LAUNCHES * m * n * k
                if not is_baseline(name):
                    classes = tuple(int_class(v) for v in (m, n, k, m * n))
                    kernels.update((name, dtype, cfg.key, classes) for cfg in kept)
    per_variant = Counter({name: round(v) for name, v in per_variant.items()})
    points = sum(per_variant.values())
    # Sampled: each kept config seen stands for as many kernels as the sample's scale, up to a
    # kernel per point (a rough count; the compiles are a small share of a large plan's time).
    n_kernels = len(kernels) if exact else min(points, len(kernels) * n_shapes / max(1, len(shapes)))
    if not exact and gpu_sized:  # the sample may have missed it: each product's largest corner
        corners = [(max(p.m), max(p.n), max(p.k)) for p in spec.shapes]
        largest = max(corners, key=lambda s: s[0] * s[1] * s[2])
    return Price(
        points=points,
        per_variant=per_variant,
        pruned=Counter({name: round(v) for name, v in pruned.items()}),
        shapes=n_shapes,
        gpu_seconds=n_kernels * EST_COMPILE_S / compile_threads + run_s,
        exact=exact,
        gpu_sized=round(gpu_sized),
        largest=largest,
        interpreter_seconds=interp_s,
    )


def _candidate_count(space, axes: dict) -> int:
    """How many candidates `space.candidates(axes)` would build, without building them."""
    count = 1
    for axis, default in space.axes.items():
        count *= len(axes.get(axis, default))
    if "input_precision" not in space.axes:
        count *= len(axes.get("input_precision", ("ieee",)))
    return count


def _candidate_sample(space, axes: dict, size: int, rng: random.Random) -> list[MatmulConfig]:
    """At most `size` of `space.candidates(axes)`, drawn without building the others."""
    chosen = {axis: tuple(axes.get(axis, default)) for axis, default in space.axes.items()}
    chosen.setdefault("input_precision", tuple(axes.get("input_precision", ("ieee",))))
    total = _candidate_count(space, axes)
    sample = []
    for index in sorted(rng.sample(range(total), min(size, total))):
        values = {}
        for axis, options in reversed(chosen.items()):  # the last axis varies fastest, as in product()
            index, at = divmod(index, len(options))
            values[axis] = options[at]
        sample.append(space.base.replace(**values))
    return sample


def _shape_at(spec: GridSpec, index: int) -> tuple[int, int, int]:
    """The index-th shape of the spec's products laid end to end (repeats across products counted)."""
    for product in spec.shapes:
        size = len(product.m) * len(product.n) * len(product.k)
        if index < size:
            i, rest = divmod(index, len(product.n) * len(product.k))
            j, k = divmod(rest, len(product.k))
            return product.m[i], product.n[j], product.k[k]
        index -= size
    raise IndexError(index)


def huge_refusal(plan: Price, workers: int | None, memory_bytes: int) -> str | None:
    """Why a plan is too big to start without --allow-huge (one line), or None: more than a day of GPU
    time on its `workers` (None: not known before Ray starts, not checked), or planning memory over
    `memory_bytes` (0: unknown)."""
    about = "" if plan.exact else "about "
    what = (
        f"{about}{plan.points:,} points over {about}{plan.shapes:,} shapes, {about}"
        f"{duration(plan.gpu_seconds)} of GPU time on one H100-class GPU"
    )
    if workers and plan.gpu_seconds / workers > HUGE_GPU_SECONDS_PER_WORKER:
        return (
            f"this plan is {what}: {duration(plan.gpu_seconds / workers)} on its {workers} worker(s), "
            "over a day. Narrow the spec (`--dry-run` prices it), add GPUs, or pass --allow-huge to run it "
            "anyway"
        )
    if memory_bytes and plan.plan_bytes > memory_bytes:
        return (
            f"this plan is {what}, and planning it needs about {plan.plan_bytes / 1e9:,.1f} GB of memory, "
            f"more than the {memory_bytes / 1e9:,.1f} GB this machine has free. Narrow the spec (`--dry-run` "
            "prices it) or pass --allow-huge to plan it anyway"
        )
    return None


def free_memory_bytes() -> int:
    """Memory this machine has available now (Linux's MemAvailable), else its total; 0 if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return host_memory_bytes()


def priced_interpreter_refusal(plan: Price) -> str | None:
    """`interpreter_refusal` from a plan's price (`price`), without its points."""
    if not plan.gpu_sized or plan.largest is None:
        return None
    about = "" if plan.exact else "about "
    counts = f"{about}{plan.gpu_sized:,} of {about}{plan.points:,}"
    return interpreter_message(counts, plan.largest, plan.interpreter_seconds, plan.gpu_seconds)
