"""The derived numbers of a measurement. This module computes them; nothing else recomputes them
(the database stores them, the views and the dashboard read them).

- tiles: output tiles of the schedule, cdiv(M, BM) * cdiv(N, BN); programs = tiles * SPLIT_K.
- tiles_per_sm: tiles / SMs, the x axis of the split-K study (< 1: some SMs idle unsplit).
- occupancy: programs that fit on one SM at once, from the compiled kernel's registers, shared
  memory and warps; waves = programs / (SMs * occupancy).
- tflops: 2 M N K / time. operand_bytes: A + B + C once each, the L2 study's x axis over L2 size.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernels import MatmulConfig
from kernels.sizes import DTYPE_BYTES, cdiv

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


def operand_bytes(m: int, n: int, k: int, dtype: str) -> int:
    return (m * k + k * n + m * n) * DTYPE_BYTES[dtype]


def tflops(m: int, n: int, k: int, ms: float) -> float:
    return 2 * m * n * k / (ms * 1e-3) / 1e12


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
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    programs = tiles * cfg.split_k
    occ = occupancy(resources, limits) if resources else None
    out.update(
        tiles=tiles,
        programs=programs,
        tiles_per_sm=tiles / limits.sm_count,
        occupancy=occ,
        waves=programs / (limits.sm_count * occ) if occ else None,
        registers=resources.registers if resources else None,
        shared_mem=resources.shared_mem if resources else None,
    )
    return out
