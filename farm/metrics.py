"""The derived numbers of a measurement. This module computes them; nothing else recomputes them
(the database stores them, the views and the dashboard read them).

- tiles: output tiles of the schedule, cdiv(M, BM) * cdiv(N, BN); programs = tiles * SPLIT_K.
- tiles_per_sm: tiles / SMs, the x axis of the split-K study (< 1: some SMs idle unsplit).
- occupancy: programs that fit on one SM at once, from the compiled kernel's registers, shared
  memory and warps; waves = programs / (SMs * occupancy).
- tflops: 2 M N K / time. operand_bytes: A + B + C once each, the L2 study's x axis over L2 size.
  Both from kernels.sizes, where the dashboard reads the same arithmetic (it may not import farm).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernels import MatmulConfig
from kernels.sizes import DTYPE_BYTES, cdiv, flop, operand_bytes, tflops
from kernels.space import shared_memory_elements

# Registers are allocated per warp in units of 256 (sm_70 .. sm_90); a CTA also reserves 1 KiB
# of shared memory for the system on sm_80 and later.
REG_ALLOC_UNIT = 256
CTA_RESERVED_SMEM = 1024
MAX_CTAS_PER_SM = 32


@dataclass(frozen=True)
class DeviceLimits:
    sm_count: int
    l2_bytes: int
    smem_per_block: int
    smem_per_sm: int
    regs_per_sm: int
    threads_per_sm: int


# Interpreter rows model an H100/H200-class GPU (132 SMs, 60 MiB L2), so their derived columns
# have the meaning they would have on one; their times are CPU times and are labelled so.
NOMINAL_GPU = DeviceLimits(132, 60 * 2**20, 232_448, 233_472, 65_536, 2_048)


@dataclass(frozen=True)
class KernelResources:
    registers: int | None  # per thread
    shared_mem: int  # bytes per program
    num_warps: int


def occupancy(res: KernelResources, limits: DeviceLimits) -> int | None:
    """Programs of this kernel resident on one SM at a time (0: it does not fit)."""
    if res.registers is None:
        return None
    threads = 32 * res.num_warps
    regs_per_warp = cdiv(max(res.registers, 1) * 32, REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    by_regs = limits.regs_per_sm // (regs_per_warp * res.num_warps)
    by_smem = limits.smem_per_sm // (res.shared_mem + CTA_RESERVED_SMEM)
    by_threads = limits.threads_per_sm // threads
    return min(by_regs, by_smem, by_threads, MAX_CTAS_PER_SM)


def derived(
    m: int,
    n: int,
    k: int,
    dtype: str,
    cfg: MatmulConfig,
    limits: DeviceLimits,
    resources: KernelResources | None,
    ms: float | None,
) -> dict:
    """The derived columns of one measurement record (None where they do not apply)."""
    out: dict = {
        "operand_bytes": operand_bytes(m, n, k, dtype),
        "tflops": tflops(m, n, k, ms) if ms else None,
    }
    if cfg.is_library:  # no tile grid we know of
        return out
    tiles, programs, tiles_per_sm = tile_counts(m, n, cfg, limits.sm_count)
    occ = occupancy(resources, limits) if resources else None
    out.update(
        tiles=tiles,
        programs=programs,
        tiles_per_sm=tiles_per_sm,
        occupancy=occ,
        waves=programs / (limits.sm_count * occ) if occ else None,
        registers=resources.registers if resources else None,
        shared_mem=resources.shared_mem if resources else None,
    )
    return out


# -- before compiling: what a search's cost model knows of a point (farm/search/features.py) --------

# The roofline a search normalises times by where the GPU's own peaks are not at hand: an H100/H200
# SXM's dense bf16/fp16 tensor-core rate (989.4 TFLOP/s, the datasheet's), fp32 on CUDA cores (66.9)
# and the H200's 4.8 TB/s of HBM3e. A model learns time over this roof; one roof for every shape
# keeps the target comparable between shapes.
NOMINAL_PEAK_TFLOPS = {"bfloat16": 989.4, "float16": 989.4, "float32": 66.9}
NOMINAL_PEAK_GBPS = 4800.0


def roofline_ms(m: int, n: int, k: int, dtype: str) -> float:
    """The least time the roofline allows: 2 M N K at the peak rate, or the operands once at peak
    bandwidth."""
    compute_ms = flop(m, n, k) / (NOMINAL_PEAK_TFLOPS[dtype] * 1e12) * 1e3
    memory_ms = operand_bytes(m, n, k, dtype) / (NOMINAL_PEAK_GBPS * 1e9) * 1e3
    return max(compute_ms, memory_ms)


def tile_counts(m: int, n: int, cfg: MatmulConfig, sm_count: int) -> tuple[int, int, float]:
    """(tiles, programs, tiles_per_sm) of a tile config's schedule (see the module's docstring)."""
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    return tiles, tiles * cfg.split_k, tiles / sm_count


def tile_intensity(cfg: MatmulConfig) -> float:
    """Multiply-adds per element loaded in one K step of a BM x BN tile: BM BN / (BM + BN)."""
    return cfg.block_m * cfg.block_n / (cfg.block_m + cfg.block_n)


def tile_fill(m: int, n: int, k: int, cfg: MatmulConfig) -> float:
    """The share of the padded M x N x K block grid that is the problem's (1: no block pads)."""
    padded = cdiv(m, cfg.block_m) * cfg.block_m * cdiv(n, cfg.block_n) * cfg.block_n
    return m * n * k / (padded * cdiv(k, cfg.block_k) * cfg.block_k)


def estimated_waves(m: int, n: int, dtype: str, cfg: MatmulConfig, limits: DeviceLimits) -> float:
    """waves before compiling: the occupancy from the pipeline's shared memory and the warps alone
    (registers are known only once compiled; `occupancy` counts them where they are)."""
    smem = shared_memory_elements(cfg, 0) * DTYPE_BYTES[dtype]
    resident = min(
        limits.smem_per_sm // (smem + CTA_RESERVED_SMEM),
        limits.threads_per_sm // (32 * cfg.num_warps),
        MAX_CTAS_PER_SM,
    )
    _, programs, _ = tile_counts(m, n, cfg, limits.sm_count)
    return programs / (limits.sm_count * max(resident, 1))
