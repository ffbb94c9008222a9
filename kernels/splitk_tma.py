"""`splitk_tma`: split-K through TMA, its partial tiles summed inside the one kernel, in a fixed order.

Why (issue #12, decode rows): at M = 16 the product reads the whole weight B once and computes
little, and no other variant here serves it: their blocks start at 64 rows (`blocks_fit_problem`
keeps a block within the problem's next power of two), so the dispatcher ran cuBLAS there. With
16-row blocks and a split of K, every SM streams its own strip of B through a TMA pipeline. On the
H200 its GPU time ties cuBLAS's at the 16-token rows (CUDA graphs: 8.5 against 8.9 us at
16x4096x4096, 30.2 against 32.0 at 16x4096x14336); an eager call's host time decided (89-100 us a
call with a split, before the launch plans of `kernels.launching.DirectCalls`).

Grid: cdiv(M, BM) * cdiv(N, BN) * SPLIT_K programs, the SPLIT_K programs of a tile side by side
(`splitk_tile`), chunks of whole BLOCK_K tiles (`split_range`). Each program stores its fp32 partial
into its own slot of a workspace, then bumps its tile's counter (release, after a CTA barrier so
every thread's part is written). The program that brings the count to SPLIT_K is the last: it reads
the slots (acquire; loads that bypass L1) in the fixed order 0..SPLIT_K-1, so the sum is the same
bit for bit whichever program finishes last, resets the counter and stores the tile in the output
dtype through C's descriptor. Nothing runs before or after the kernel, and no program waits on
another (no deadlock in any schedule, the interpreter's sequential one included).

The counters are zeroed once and left zeroed by the kernel, kept per device and stream
(`kernels.scratch`): two launches on different streams never share them. The workspace is written
whole before it is read: a plain allocation per call (SPLIT_K x tiles x BM x BN x 4 B: 2 MiB at
16x4096x4096 in 16x128 tiles split 8). SPLIT_K = 1 is a plain one-program-per-tile TMA kernel.

Revived from an earlier experiment (commit 712b68c), which lost to the pointer `splitk_det`
on skinny-K shapes (512x512x32768: 0.71 of cuBLAS against 0.80) with descriptors made on the
device; these are made on the host once per key (`TmaPlan`), and the compiled kernel is called
directly (`DirectCalls`). On skinny-K, with the split that fills one wave of programs, it runs at
0.63-0.99 of cuBLAS in CUDA graphs (38.3 against 29.7 us at 512x512x32768 in 128x128 tiles split
8, 50.3 against 49.9 at 1024x1024x16384 split 2; docs/design.md, "Split-K through TMA").
Layout constraints are persistent_tma's (`check_tma`, the rule `tma_strides_aligned`). `launch_into`
writes into a C it is given (a view): `persistent_tma_bands` runs its thin tail bands through it.

`splitk_tma_reduce` is the same kernel compiled with SUM_APART: each program stores its partial
into its split's M x N slice of an fp32 workspace and exits, and `splitk_det`'s fixed-order reduce
kernel sums the slices over all SMs, as cuBLAS's skinny-K kernels do (`splitKreduce`). The last
program of a tile summing SPLIT_K partials alone costs where few tiles take long splits: at
256x256x65536 (4 tiles of 128x128, split 16) 41.6 us against 34.1 summed apart, cuBLAS 29.0; at
512x512x32768 42.6 against 40.4 (33.3); where splits are short they tie (768x768x12288 split 3: 30.7
and 29.9; CUDA graphs, L2 flushed, 6 stages).

`splitk_tma_cluster` launches that SUM_APART kernel with each program a cluster of two CTAs
(Triton's num_ctas=2), the two sharing the program's tile as cuBLAS's skinny-K kernels pair theirs
(2x1 and 1x2 clusters, as ncu names cuBLAS's kernels). Where few tiles take long splits it
closed most of the gap: 512x512x32768 in 128x256 tiles split 8, 6 stages, 35.8 us against 41.2 for
the best single-CTA config and cuBLAS's 33.2; 256x256x65536 32.5 against 34.9 (29.0); at
640x640x24576 it lost (48.2 against 38.7; CUDA graphs, L2 flushed). Only with K split (the plain
kernel's whole-tile TMA store computed wrong in clusters) and a row-major A: with A column-major
Triton failed to compile it in 16x32 tiles ("PassManager::run failed") and it computed wrong in
128x256 tiles at 512x512x32768 (relative error 1.0; H200).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels.config import ConfigError, MatmulConfig
from kernels.launching import BoundCall, DirectCalls, binds, dependent_launch
from kernels.operands import check_operands
from kernels.persistent_tma import TmaPlan, TmaUnsupported, bind_tma, checked_plan, compiled_tma
from kernels.registry import register_variant
from kernels.schedule import cdiv, split_range_jit, splitk_tile_jit
from kernels.scratch import zeroed_counters
from kernels.space import CLUSTER_CTAS
from kernels.splitk_det import BoundDeterministic, compiled_reduce, reduce_splits


@triton.jit
def _splitk_tma_kernel(
    a_desc, b_desc, c_desc, ws_ptr, counts_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, SUM_APART: tl.constexpr, A_TRANSPOSED: tl.constexpr, B_TRANSPOSED: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, PDL: tl.constexpr,
):  # fmt: skip
    if PDL:  # the reduce queued next with programmatic dependent launch may become resident and wait
        gdc_launch_dependents()
    pid = tl.program_id(0)
    tile = pid // SPLIT_K
    pid_m, pid_n, pid_k = splitk_tile_jit(pid, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M, SPLIT_K)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    k_start, k_end = split_range_jit(pid_k, K, SPLIT_K, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(k_start // BLOCK_K, tl.cdiv(k_end, BLOCK_K)):
        off_k = ki * BLOCK_K
        # A transposed descriptor holds the tile as [cols, rows]: load that box, transpose in registers.
        a = a_desc.load([off_k, off_m]).T if A_TRANSPOSED else a_desc.load([off_m, off_k])
        b = b_desc.load([off_n, off_k]).T if B_TRANSPOSED else b_desc.load([off_k, off_n])
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    if SPLIT_K == 1:
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
    elif SUM_APART:  # into split pid_k's M x N slice of the workspace; `reduce_splits` sums them after
        rows = off_m + tl.arange(0, BLOCK_M)[:, None]
        cols = off_n + tl.arange(0, BLOCK_N)[None, :]
        tl.store(ws_ptr + pid_k.to(tl.int64) * M * N + rows * N + cols, acc, mask=(rows < M) & (cols < N))
    else:
        slot = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        tile_size = BLOCK_M * BLOCK_N
        tl.store(ws_ptr + (tile * SPLIT_K + pid_k) * tile_size + slot, acc)
        tl.debug_barrier()  # every thread's part precedes the release below
        before = tl.atomic_add(counts_ptr + tile, 1, sem="acq_rel")
        if before == SPLIT_K - 1:  # the last program of this tile sums and stores it
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for s in range(SPLIT_K):  # fixed order: the same sum, bit for bit, every run
                total += tl.load(ws_ptr + (tile * SPLIT_K + s) * tile_size + slot, cache_modifier=".cg")
            tl.store(counts_ptr + tile, 0)  # zeroed for the next launch
            c_desc.store([off_m, off_n], total.to(c_desc.dtype))
    if PDL:
        # Launched overlapping the kernel before it (`launch_into(..., overlapping=True)`), this kernel
        # ends only after that one: work queued after it then follows both. Otherwise a no-op.
        gdc_wait()


# Called directly after a key's first launch, its checks and descriptors made once per key
# (`TmaPlan`, keyed by `tma_key` as persistent_tma's); the workspace and counters come from PyTorch's
# allocator (aligned starts).
_CALLS = DirectCalls(_splitk_tma_kernel)
_APART_CALLS = DirectCalls(_splitk_tma_kernel)  # the same keys, compiled with SUM_APART
_CLUSTER_CALLS = DirectCalls(_splitk_tma_kernel)  # SUM_APART in clusters of CLUSTER_CTAS
_OVERLAP_CALLS = DirectCalls(_splitk_tma_kernel)  # the same keys, launched with programmatic dependent launch


def _plan(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: MatmulConfig, apart: bool = False
) -> TmaPlan:
    m, n = c.shape
    grid = (cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n) * cfg.split_k,)
    c_desc = TensorDescriptor(c, [m, n], [c.stride(0), 1], [cfg.block_m, cfg.block_n])
    return TmaPlan.make(a, b, c, c_desc, cfg, grid, SPLIT_K=cfg.split_k, SUM_APART=apart)


_apart_plan = functools.partial(_plan, apart=True)  # made once: `_summed_apart` runs on every call


@register_variant("splitk_tma", config_space="splitk_tma")
def splitk_tma(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Split-K through TMA (Hopper); partials in their own slots, the last program sums them in order."""
    m, n, _ = check_operands(a, b, cfg)
    return launch_into(a, b, torch.empty((m, n), device=a.device, dtype=a.dtype), cfg)


class SplitTmaOperands:
    """`splitk_tma`'s leading arguments for a bound call (`bind_tma`): descriptors over a, b and c from
    the key's plan, then a fresh partial slot for each program and the kept zeroed counters, as its
    launcher passes them (C itself for both where split_k is 1: the kernel touches neither)."""

    __slots__ = ("plan", "slots", "tiles")

    def __init__(self, plan: TmaPlan, cfg: MatmulConfig) -> None:
        self.plan, self.tiles = plan, plan.grid[0] // cfg.split_k
        self.slots = 0 if cfg.split_k == 1 else plan.grid[0] * cfg.block_m * cfg.block_n

    def __call__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple:
        if not self.slots:
            return (*self.plan.descriptors(a, b, c), c, c)
        ws = torch.empty(self.slots, device=c.device, dtype=torch.float32)
        return (*self.plan.descriptors(a, b, c), ws, zeroed_counters(self.tiles, c.device))


@binds("splitk_tma")
def _bind(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback) -> BoundCall | None:
    """`splitk_tma` at cfg for operands like a and b (kernels.launching.bound_launch)."""
    return bind_tma(_CALLS, a, b, cfg, fallback, lambda plan: SplitTmaOperands(plan, cfg))


@register_variant("splitk_tma_reduce", config_space="splitk_tma")
def splitk_tma_reduce(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Split-K through TMA (Hopper); each split's partial into a workspace slice, summed in order by a
    second kernel over all SMs (`splitk_det`'s `reduce_splits`)."""
    m, n, _ = check_operands(a, b, cfg)
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    if cfg.split_k == 1:  # nothing to sum: splitk_tma's plain kernel
        return launch_into(a, b, c, cfg)
    return _summed_apart(_APART_CALLS, a, b, c, cfg)


@binds("splitk_tma_reduce")
def _bind_reduce(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback):
    """`splitk_tma_reduce` at cfg for operands like a and b (kernels.launching.bound_launch)."""
    if cfg.split_k == 1:  # splitk_tma's plain kernel, as its launcher runs it
        return _bind(a, b, cfg, fallback)
    return _bind_apart(_APART_CALLS, a, b, cfg, fallback)


class ApartOperands:
    """The summed-apart split kernel's leading arguments for a bound call (`BoundDeterministic`):
    descriptors over a, b and c from the key's plan, then the workspace for its partials and in place
    of its counters, as `_summed_apart` passes them."""

    __slots__ = ("plan",)

    def __init__(self, plan: TmaPlan) -> None:
        self.plan = plan

    def __call__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, ws: torch.Tensor) -> tuple:
        return (*self.plan.descriptors(a, b, c), ws, ws)


def _bind_apart(calls: DirectCalls, a, b, cfg: MatmulConfig, fallback) -> BoundDeterministic | None:
    """The SUM_APART kernel `calls` launched and its reduce, bound to operands like a and b: None where
    either was not compiled for them yet, or an operand starts off 16 bytes."""
    m, n = a.shape[0], b.shape[1]
    split = compiled_tma(calls, a, b, torch.empty((m, n), device=a.device, dtype=a.dtype), cfg)
    reduce = compiled_reduce(a, m, n, cfg.split_k, overlap=dependent_launch(a.device))
    if split is None or reduce is None:
        return None
    (runner, tail), plan = split
    return BoundDeterministic(
        (runner, tail), ApartOperands(plan), reduce, (cfg.split_k, m, n), a.device, a.dtype, fallback
    )


@register_variant("splitk_tma_cluster", config_space="splitk_tma_cluster")
def splitk_tma_cluster(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """`splitk_tma_reduce` with each program a cluster of two CTAs sharing its tile (Hopper)."""
    m, n, _ = check_operands(a, b, cfg)
    if cfg.split_k == 1:
        raise ConfigError(
            "splitk_tma_cluster needs split_k >= 2: its whole-tile TMA store computed wrong in 2-CTA"
            " clusters (H200); split_k = 1 is splitk_tma's plain kernel"
        )
    if a.stride(1) != 1:
        raise TmaUnsupported(
            "splitk_tma_cluster needs a row-major A: with A column-major (its tiles transposed in"
            " registers) its kernel did not compile or computed wrong in 2-CTA clusters (H200)"
        )
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    return _summed_apart(_CLUSTER_CALLS, a, b, c, cfg, num_ctas=CLUSTER_CTAS)


@binds("splitk_tma_cluster")
def _bind_cluster(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback) -> BoundDeterministic | None:
    """`splitk_tma_cluster` at cfg for operands like a and b (kernels.launching.bound_launch)."""
    return _bind_apart(_CLUSTER_CALLS, a, b, cfg, fallback)


def _summed_apart(calls: DirectCalls, a, b, c, cfg: MatmulConfig, num_ctas: int = 1) -> torch.Tensor:
    """The SUM_APART kernel's partials into an fp32 (SPLIT_K, M, N) workspace, then summed into c."""
    (m, k), n = a.shape, b.shape[1]
    key, plan = checked_plan(calls, a, b, c, cfg, _apart_plan)
    ws = torch.empty((cfg.split_k, m, n), device=a.device, dtype=torch.float32)
    # no counters: ws stands in for their pointer
    calls.launch(
        key, plan.grid, (*plan.descriptors(a, b, c), ws, ws, m, n, k), plan.constexprs,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, num_ctas=num_ctas,
    )  # fmt: skip
    return reduce_splits(ws, c, overlap=dependent_launch(c.device))


def compiled_split_tma(a, b, c, cfg: MatmulConfig, overlapping: bool = False) -> tuple[tuple, TmaPlan] | None:
    """`compiled_tma` of the kernel `launch_into` launches (with `overlapping` as it takes it), for
    operands like a, b and c."""
    calls = _OVERLAP_CALLS if overlapping and dependent_launch(a.device) else _CALLS
    return compiled_tma(calls, a, b, c, cfg)


def launch_into(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: MatmulConfig, overlapping: bool = False
) -> torch.Tensor:
    """The split-K kernel into c (any of a, b, c may be views TMA can describe: `check_tma`).

    overlapping: launched with programmatic dependent launch where the device has it, so it may start
    while the kernel queued before it runs: only after a kernel of this project's that writes nothing
    this one reads (the bands' main band beside their tail); it ends after that kernel does."""
    m, k = a.shape
    n = b.shape[1]
    overlapping = overlapping and dependent_launch(a.device)
    calls = _OVERLAP_CALLS if overlapping else _CALLS
    key, plan = checked_plan(calls, a, b, c, cfg, _plan)
    if cfg.split_k == 1:  # the kernel touches neither
        ws = counts = c
    else:
        tiles = plan.grid[0] // cfg.split_k
        counts = zeroed_counters(tiles, a.device)
        slots = plan.grid[0] * cfg.block_m * cfg.block_n  # a partial tile for each program
        ws = torch.empty(slots, device=a.device, dtype=torch.float32)
    calls.launch(
        key, plan.grid, (*plan.descriptors(a, b, c), ws, counts, m, n, k), plan.constexprs,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **({"launch_pdl": True} if overlapping else {}),
    )  # fmt: skip
    return c
