"""Config spaces as data, and the small pure rules that prune them per problem.

A space names the `MatmulConfig` axes a schedule varies, with default values; a sweep spec may
replace any axis's values. `ConfigSpace.configs(problem)` is the Cartesian product minus the
configs some rule rejects. Each rule returns the reason it rejects a config, or None.

No torch here: a sweep's driver expands and prunes its plan with these rules and never imports
torch (docs/design.md, "Start-up"). `DTYPES` (names to torch dtypes) loads torch when first used.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernels.config import LIBRARY_CONFIG, MatmulConfig
from kernels.sizes import DTYPE_BYTES, aligned_chunk, cdiv, dtype_name

if TYPE_CHECKING:
    import torch

# Per-block shared memory opt-in limit of an H100/H200 (227 KB); the farm passes the device's own.
DEFAULT_SMEM_LIMIT = 232_448
# Registers a thread can hold; an fp32 accumulator above half of that leaves no room for the A/B
# fragments and spills (128x256 tiles with 4 warps need 256 accumulator registers per thread).
MAX_ACC_REGS_PER_THREAD = 128
# Below this many accumulators per thread, 8 warps split a tile too finely (64x64 / 256 threads = 16).
MIN_ACC_PER_THREAD_8_WARPS = 16
# TMA (Hopper): strides and starts in 16-byte units, boxes at most 256 elements a side.
TMA_ALIGN_BYTES = 16
TMA_MAX_BOX = 256
# CTAs in a cluster (`splitk_tma_cluster`: Triton's num_ctas): the two share each program's tile.
CLUSTER_CTAS = 2


@functools.cache
def torch_dtypes() -> dict[str, torch.dtype]:
    """Spec dtype names -> torch dtypes (imports torch)."""
    import torch

    return {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def __getattr__(name: str):
    # `DTYPES` stays importable from here (kernels.space.DTYPES, `from kernels import DTYPES`) but
    # imports torch only when someone uses it, not when the config spaces are imported.
    if name == "DTYPES":
        return torch_dtypes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Problem:
    """What pruning needs to know about one matmul: C[m, n] = A[m, k] @ B[k, n] on one device.

    `dtype` is a spec name ("bfloat16") or a torch dtype; it is kept as the name."""

    m: int
    n: int
    k: int
    dtype: str
    smem_limit: int = DEFAULT_SMEM_LIMIT

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", dtype_name(self.dtype))

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]


Rule = Callable[[MatmulConfig, Problem], str | None]


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def shared_memory_elements(cfg: MatmulConfig, staged_c_elements: int) -> int:
    """Shared memory a kernel holds, in elements: num_stages A and B tiles, and the C it stages."""
    return (cfg.block_m + cfg.block_n) * cfg.block_k * cfg.num_stages + staged_c_elements


def _shared_memory_error(cfg: MatmulConfig, p: Problem, staged_c_elements: int) -> str | None:
    """`shared_memory_elements` against the device's limit."""
    need = shared_memory_elements(cfg, staged_c_elements) * p.elem_bytes
    return f"needs {need} B of shared memory > {p.smem_limit}" if need > p.smem_limit else None


def fits_shared_memory(cfg: MatmulConfig, p: Problem) -> str | None:
    """The software pipeline keeps num_stages A and B tiles in shared memory."""
    return _shared_memory_error(cfg, p, 0)


def fits_registers(cfg: MatmulConfig, p: Problem) -> str | None:
    acc = cfg.block_m * cfg.block_n // (32 * cfg.num_warps)
    return f"{acc} accumulator registers per thread" if acc > MAX_ACC_REGS_PER_THREAD else None


def blocks_fit_problem(cfg: MatmulConfig, p: Problem) -> str | None:
    """A block larger than the next power of two of its dimension only computes padding."""
    for name, size in (("block_m", p.m), ("block_n", p.n), ("block_k", p.k)):
        block = getattr(cfg, name)
        if block > max(16, _next_pow2(size)):
            return f"{name}={block} exceeds the problem ({size})"
    return None


def grouping_matters(cfg: MatmulConfig, p: Problem) -> str | None:
    """GROUP_SIZE_M > 1 changes the program order only with several tile rows and columns."""
    if cfg.group_m == 1:
        return None
    num_pid_m, num_pid_n = cdiv(p.m, cfg.block_m), cdiv(p.n, cfg.block_n)
    if num_pid_n == 1:
        return "group_m > 1 with a single tile column is the ungrouped order"
    if cfg.group_m > num_pid_m:
        return f"group_m={cfg.group_m} > {num_pid_m} tile rows (same order as group_m={num_pid_m})"
    return None


def effective_group_m(cfg: MatmulConfig, p: Problem) -> MatmulConfig:
    """The config with the GROUP_SIZE_M that names its program order: with a single tile row or
    column every group_m walks the grid as group_m 1 does, and a group taller than the grid's tile
    rows as group_m = the rows. Planning keeps that config instead of dropping it as a duplicate
    (`grouping_matters`): with group_m 8 alone, an llm preset sweep had no Triton point at 16 tokens
    and no 64- or 128-row tile at 128 tokens (later sweeps measured them)."""
    if cfg.group_m == 1:
        return cfg
    rows, columns = cdiv(p.m, cfg.block_m), cdiv(p.n, cfg.block_n)
    if rows == 1 or columns == 1:
        return cfg.replace(group_m=1)
    return cfg.replace(group_m=rows) if cfg.group_m > rows else cfg


def split_chunks_fill(cfg: MatmulConfig, p: Problem) -> str | None:
    """Each split gets at least one whole BLOCK_K, and no split is empty."""
    if cfg.split_k == 1:
        return None
    if cdiv(p.k, cfg.split_k) < cfg.block_k:
        return f"K/split_k = {cdiv(p.k, cfg.split_k)} < block_k={cfg.block_k}"
    if (cfg.split_k - 1) * aligned_chunk(p.k, cfg.split_k, cfg.block_k) >= p.k:
        return f"split_k={cfg.split_k} leaves empty chunks at K={p.k}, block_k={cfg.block_k}"
    return None


def pipeline_fits_k_loop(cfg: MatmulConfig, p: Problem) -> str | None:
    """A pipeline deeper than the K loop (per split) buffers tiles that never come: same kernel, more smem."""
    iters = cdiv(cdiv(p.k, cfg.split_k), cfg.block_k)
    if cfg.num_stages > 3 and cfg.num_stages > iters + 1:
        return f"num_stages={cfg.num_stages} > {iters} K iterations + 1"
    return None


def warps_have_work(cfg: MatmulConfig, p: Problem) -> str | None:
    """Eight warps on a tile of fewer than 16 accumulators per thread only add synchronisation."""
    per_thread = cfg.block_m * cfg.block_n // (32 * cfg.num_warps)
    if cfg.num_warps > 4 and per_thread < MIN_ACC_PER_THREAD_8_WARPS:
        return f"{cfg.num_warps} warps for {per_thread} accumulators per thread"
    return None


def unaligned_rows(p: Problem) -> str | None:
    """Why the rows of contiguous operands do not start on 16 bytes (K of A, N of B and C, times
    the itemsize), or None. TMA descriptors need it, and so do cuBLAS's fast kernels: on the H200
    cuBLAS ran 2.0-4.4x slower than this project's best Triton kernel (`persistent_tma_pad` where it
    was measured) at 4097^3, 4096x32001x4096, 2048x50257x768 and 2000x3000x1500
    (docs/results/vs_libraries_h200.csv)."""
    for name, size in (("K", p.k), ("N", p.n)):
        if (size * p.elem_bytes) % TMA_ALIGN_BYTES:
            return f"{name}={size} x {p.elem_bytes} B is not a multiple of {TMA_ALIGN_BYTES} B (TMA strides)"
    return None


def tma_strides_aligned(cfg: MatmulConfig, p: Problem) -> str | None:
    """TMA needs 16-byte row strides (`unaligned_rows`)."""
    return unaligned_rows(p)


def tma_needs_padding(cfg: MatmulConfig, p: Problem) -> str | None:
    """persistent_tma_pad only where persistent_tma cannot go: elsewhere the copy is pure cost."""
    if tma_strides_aligned(cfg, p) is None:
        return "N and K rows are 16-byte aligned: persistent_tma needs no padding"
    return None


# K up to which `grouped_pad` is planned: measured at K = 71 and 200 (H200), where loading B and
# storing C are most of the product; with a long K the main loop decides, and TMA's (`persistent_tma_pad`)
# serves odd N there.
PAD_POINTER_MAX_K = 512


def pads_odd_columns(cfg: MatmulConfig, p: Problem) -> str | None:
    """grouped_pad only where N's rows are not 16-byte aligned and K is short: elsewhere `grouped` keeps
    its vectors without a copy, and a long K is TMA's."""
    if (p.n * p.elem_bytes) % TMA_ALIGN_BYTES == 0:
        return f"N={p.n} rows are 16-byte aligned: grouped needs no padding"
    if p.k > PAD_POINTER_MAX_K:
        return f"K={p.k} > {PAD_POINTER_MAX_K}: the main loop, not B's loads and C's stores, decides"
    return None


def tma_box_fits(cfg: MatmulConfig, p: Problem) -> str | None:
    """A TMA box is at most 256 elements a side; the epilogue stores BLOCK_N/2 columns (>= 16 B)."""
    for name in ("block_m", "block_n", "block_k"):
        if getattr(cfg, name) > TMA_MAX_BOX:
            return f"{name}={getattr(cfg, name)} > {TMA_MAX_BOX} (TMA box)"
    if cfg.block_n // 2 * p.elem_bytes < TMA_ALIGN_BYTES:
        return f"block_n={cfg.block_n}: half a row is under {TMA_ALIGN_BYTES} B"
    return None


def fits_shared_memory_tma(cfg: MatmulConfig, p: Problem) -> str | None:
    """Pipeline stages plus the epilogue's staging buffer (half a C tile: the store is subtiled)."""
    return _shared_memory_error(cfg, p, cfg.block_m * cfg.block_n // 2)


def fits_shared_memory_whole_c(cfg: MatmulConfig, p: Problem) -> str | None:
    """Pipeline stages plus a whole C tile staged for its store (`splitk_tma` does not subtile it)."""
    return _shared_memory_error(cfg, p, cfg.block_m * cfg.block_n)


def fits_shared_memory_cluster(cfg: MatmulConfig, p: Problem) -> str | None:
    """A cluster's CTA holds the tile's longer side halved and its shorter side whole, in each stage; C
    leaves through pointers, staging nothing. Triton asked 262,208 B for 8 stages of 128x256x64 bf16
    ((128 + 128) x 64 x 8 x 2, and 64 B of barriers), 262,176 for 4 of 128x256x128 and of 256x128x128,
    and ran 6 of 128x256x64 and 4 of 128x128x128 (196,608; H200)."""
    long, short = max(cfg.block_m, cfg.block_n), min(cfg.block_m, cfg.block_n)
    need = (long // CLUSTER_CTAS + short) * cfg.block_k * cfg.num_stages * p.elem_bytes
    return f"needs {need} B of shared memory a CTA > {p.smem_limit}" if need > p.smem_limit else None


def cluster_splits_k(cfg: MatmulConfig, p: Problem) -> str | None:
    """Clusters store C through pointers only when K is split: a whole tile stored through TMA from a
    2-CTA cluster came out wrong (640x640x24576, all 8 configs at split 1; H200)."""
    return "split_k=1 in a cluster: its tile would go out through a TMA store" if cfg.split_k == 1 else None


def precision_applies(cfg: MatmulConfig, p: Problem) -> str | None:
    if p.dtype != "float32" and cfg.input_precision != "ieee":
        return "input_precision applies to float32 inputs only"
    return None


TILE_RULES: tuple[Rule, ...] = (
    precision_applies,
    blocks_fit_problem,
    fits_shared_memory,
    fits_registers,
    pipeline_fits_k_loop,
    warps_have_work,
)
TMA_RULES: tuple[Rule, ...] = (
    precision_applies,
    blocks_fit_problem,
    tma_strides_aligned,
    tma_box_fits,
    fits_shared_memory_tma,
    fits_registers,
    pipeline_fits_k_loop,
    warps_have_work,
    grouping_matters,
)


@dataclass(frozen=True)
class ConfigSpace:
    name: str
    # axis -> default values; the axes a schedule varies. Others keep MatmulConfig defaults.
    axes: Mapping[str, tuple] = field(default_factory=dict)
    rules: tuple[Rule, ...] = TILE_RULES
    base: MatmulConfig = field(default_factory=MatmulConfig)

    def candidates(self, axes: Mapping[str, Sequence] | None = None) -> list[MatmulConfig]:
        """The unpruned product of this space's axes, values from `axes` where given."""
        axes = axes or {}
        chosen = {axis: tuple(axes.get(axis, default)) for axis, default in self.axes.items()}
        chosen.setdefault("input_precision", tuple(axes.get("input_precision", ("ieee",))))
        names = list(chosen)
        return [
            self.base.replace(**dict(zip(names, values))) for values in itertools.product(*chosen.values())
        ]

    def prune(self, cfg: MatmulConfig, problem: Problem) -> str | None:
        """Why `cfg` is left out for `problem`, or None if it stays."""
        for rule in self.rules:
            reason = rule(cfg, problem)
            if reason is not None:
                return reason
        return None

    def configs(
        self,
        problem: Problem,
        axes: Mapping[str, Sequence] | None = None,
        *,
        candidates: Sequence[MatmulConfig] | None = None,
    ) -> list[MatmulConfig]:
        """The candidates `problem` keeps, sorted. `candidates`: this space's `candidates(axes)`,
        when the caller has them for many problems (building them was 80% of planning the full
        preset's 124k points)."""
        if candidates is None:
            candidates = self.candidates(axes)
        kept = (effective_group_m(cfg, problem) for cfg in candidates)
        return sorted({cfg for cfg in kept if self.prune(cfg, problem) is None})


# Defaults for specs that leave an axis out. Widened where the H200 measurements said
# (docs/design.md, "Variants"): 128x256x64 tiles with 8 warps lead on large squares, BLOCK_K 128 and
# 4-5 stages on skinny K, split factors up to 32 on 256x256x65536; the rules above drop what
# cannot fit (5 stages of 128x256x64 bf16 need 245,760 B) or cannot matter.
_TILE_AXES = {
    "block_m": (64, 128),
    "block_n": (64, 128, 256),
    "block_k": (32, 64, 128),
    "num_warps": (4, 8),
    "num_stages": (3, 4, 5),
}

_TMA_AXES = {
    "block_m": (64, 128),
    "block_n": (64, 128, 256),
    "block_k": (64, 128),
    "group_m": (8,),
    "num_warps": (4, 8),
    "num_stages": (3, 4),
}

SPACES: dict[str, ConfigSpace] = {
    "tiled": ConfigSpace("tiled", _TILE_AXES),
    "grouped": ConfigSpace("grouped", {**_TILE_AXES, "group_m": (1, 8)}, (*TILE_RULES, grouping_matters)),
    # short K with odd N (495x5333x71): two stages cover the K loop's few steps
    "grouped_pad": ConfigSpace(
        "grouped_pad",
        {**_TILE_AXES, "group_m": (8,), "num_stages": (2, 3)},
        (*TILE_RULES, grouping_matters, pads_odd_columns),
    ),
    "splitk": ConfigSpace(
        "splitk",
        {**_TILE_AXES, "group_m": (1,), "split_k": (1, 2, 4, 8, 16, 32)},
        (*TILE_RULES, grouping_matters, split_chunks_fill),
    ),
    "persistent_tma": ConfigSpace("persistent_tma", _TMA_AXES, TMA_RULES),
    "persistent_tma_pad": ConfigSpace(
        "persistent_tma_pad",
        _TMA_AXES,
        tuple(tma_needs_padding if rule is tma_strides_aligned else rule for rule in TMA_RULES),
    ),
    # aligned shapes as they are, odd ones padded first (`persistent_tma_bands` pads what TMA needs)
    "persistent_tma_bands": ConfigSpace(
        "persistent_tma_bands", _TMA_AXES, tuple(r for r in TMA_RULES if r is not tma_strides_aligned)
    ),
    # 16- and 32-row blocks for decode-sized M (the other spaces start at 64), deep pipelines to
    # keep a strip of B streaming, splits up to 16.
    "splitk_tma": ConfigSpace(
        "splitk_tma",
        {
            "block_m": (16, 32, 64, 128),
            "block_n": (64, 128, 256),
            "block_k": (64, 128, 256),
            "group_m": (1,),
            "split_k": (1, 2, 4, 8, 16),
            "num_warps": (4, 8),
            "num_stages": (3, 4, 5, 6),
        },
        (
            *(fits_shared_memory_whole_c if rule is fits_shared_memory_tma else rule for rule in TMA_RULES),
            split_chunks_fill,
        ),
    ),
    # skinny K only: what 2-CTA clusters gained there (512x512x32768: 41.2 -> 35.8 us, cuBLAS 33.2;
    # 256x256x65536: 34.9 -> 32.0, cuBLAS 29.0; H200). Tiles of 128 and 256 a side:
    # cuBLAS's 128x64 there ran 35.6 us in clusters at best.
    "splitk_tma_cluster": ConfigSpace(
        "splitk_tma_cluster",
        {
            "block_m": (128, 256),
            "block_n": (128, 256),
            "block_k": (64, 128),
            "group_m": (1,),
            "split_k": (2, 4, 8, 16, 32),
            "num_warps": (4, 8),
            "num_stages": (3, 4, 6),
        },
        (
            *(fits_shared_memory_cluster if rule is fits_shared_memory_tma else rule for rule in TMA_RULES),
            split_chunks_fill,
            cluster_splits_k,
        ),
    ),
    "library": ConfigSpace("library", {}, (precision_applies,), base=LIBRARY_CONFIG),
}


def get_space(space: str | ConfigSpace) -> ConfigSpace:
    if isinstance(space, ConfigSpace):
        return space
    try:
        return SPACES[space]
    except KeyError:
        raise ValueError(f"unknown config space {space!r}; known: {', '.join(SPACES)}") from None
