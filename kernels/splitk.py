"""`splitk`: each output tile's K range is cut into SPLIT_K chunks, one program per chunk,
their partial sums added with fp32 atomics into the tile's slot; the chunk that arrives last
stores the tile in the output dtype (`kernels.scratch`).

Grid: cdiv(M, BM) * cdiv(N, BN) * SPLIT_K programs, pid_k fastest (`splitk_tile`), tiles in
GROUP_M order. Chunks are whole BLOCK_K tiles (`aligned_chunk`), so each chunk start is aligned;
the last chunk is clipped to K and its tail masked. More programs than tiles is the point:
a 512x512 output in 128x128 tiles is 16 programs for 132 SMs; SPLIT_K = 8 fills 128 of them.

Cost: the fp32 slots are written by SPLIT_K atomic adds, read and zeroed by the last chunk (4 B
read, 4 B written per element), in the one kernel: no memset before it and no conversion after
it, which were two more launches a call (the launcher's host time 48.3-62.0 us a call with them,
23.4-40.5 without, H100 hosts). The order of the atomic adds varies from run to run, so results are not
bitwise reproducible (see splitk_det).
"""

from collections.abc import Callable

import torch
import triton
import triton.language as tl

from kernels.config import MatmulConfig
from kernels.launching import BoundCall, DirectCalls, binds
from kernels.operands import check_operands
from kernels.registry import register_variant
from kernels.schedule import cdiv, split_range_jit, splitk_tile_jit
from kernels.scratch import contribute, take_sum, zeroed_scratch
from kernels.tile import (
    bind_pointer,
    pointer_constexprs,
    pointer_key,
    pointer_layout,
    store_tile,
    tile_accumulate,
    tile_offsets,
)


@triton.jit
def _splitk_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr, counts_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_ck,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, ATOMIC: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    A_ALIGN: tl.constexpr = 1, B_ALIGN: tl.constexpr = 1, C_ALIGN: tl.constexpr = 1,
):
    """ATOMIC: sum the partial tiles in the tile's slot of ws and counter of counts, the last chunk
    storing the tile into c (`kernels.scratch`). Otherwise store each partial tile to
    c + pid_k * stride_ck (a workspace, summed by `splitk_det`'s reduce; ws and counts unused)."""
    pid = tl.program_id(0)
    pid_m, pid_n, pid_k = splitk_tile_jit(pid, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M, SPLIT_K)
    k_start, k_end = split_range_jit(pid_k, K, SPLIT_K, BLOCK_K)
    acc = tile_accumulate(a_ptr, b_ptr, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                          pid_m, pid_n, k_start, k_end, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION,
                          A_ALIGN, B_ALIGN)
    if not ATOMIC:
        offsets, mask = tile_offsets(pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_ALIGN)
        tl.store(c_ptr + pid_k * stride_ck + offsets, acc, mask=mask)
    elif SPLIT_K == 1:  # the tile is this program's alone
        store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_ALIGN)
    else:
        tile = pid // SPLIT_K
        slot, last = contribute(ws_ptr, counts_ptr, tile, acc, 1, SPLIT_K, BLOCK_M, BLOCK_N)
        if last:  # the chunk that arrived last stores the sum
            total = take_sum(slot, counts_ptr, tile)
            store_tile(c_ptr, total, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_ALIGN)


# Called directly after a key's first launch, as `grouped`'s kernel is (Triton's JIT path: 11.6 us of
# host a call for a no-op kernel on an H200 host); splitk_det launches it too.
_CALLS = DirectCalls(_splitk_kernel)


def launch_split(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: MatmulConfig, *, atomic: bool,
    scratch: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> None:
    """Launch the split kernel into c: the (M, N) output in its dtype (atomic), or a (SPLIT_K, M, N)
    fp32 workspace. `scratch`: the atomic sum's (slots, counters); the kept zeroed ones by default."""
    m, k = a.shape
    n = b.shape[1]
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    if not atomic:
        scratch = (c, c)  # unused: the kernel stores into the workspace c
    elif scratch is None:
        scratch = zeroed_scratch(tiles, cfg.block_m, cfg.block_n, a.device)
    strides, aligns = pointer_layout(a, b, c)
    stride_ck = c.stride(0) if c.ndim == 3 else 0
    constexprs = pointer_constexprs(cfg, aligns, GROUP_M=cfg.group_m, SPLIT_K=cfg.split_k, ATOMIC=atomic)
    _CALLS.launch(
        pointer_key(a, b, c, strides, aligns, cfg, stride_ck, atomic), (tiles * cfg.split_k,),
        (a, b, c, *scratch, m, n, k, *strides, stride_ck), constexprs,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip


def compiled_split(
    a: torch.Tensor, b: torch.Tensor, workspace: torch.Tensor, cfg: MatmulConfig
) -> tuple[Callable, tuple] | None:
    """The split kernel compiled for `launch_split(a, b, workspace, cfg, atomic=False)`'s key and what
    that launch passes after its leading tensors (a, b, the workspace, and the workspace again twice for
    the atomic sum's unused slots and counters): (runner, tail), or None before such a launch."""
    (m, k), n = a.shape, b.shape[1]
    strides, aligns = pointer_layout(a, b, workspace)
    stride_ck = workspace.stride(0)
    known = _CALLS.compiled(pointer_key(a, b, workspace, strides, aligns, cfg, stride_ck, False))
    if known is None:
        return None
    runner, constexprs = known
    return runner, (m, n, k, *strides, stride_ck, *constexprs)


@register_variant("splitk", config_space="splitk", atomic=True)
def splitk(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Split-K with fp32 atomic adds into kept slots, the last chunk of a tile storing it."""
    m, n, _ = check_operands(a, b, cfg)
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    launch_split(a, b, c, cfg, atomic=True)
    return c


@binds("splitk")
def _bind(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback) -> BoundCall | None:
    """`splitk` at cfg for operands like a and b, its compiled kernel held (`bound_launch`): the launch
    `launch_split(atomic=True)` keys (stride_ck 0), its kept slots and counters looked up per call."""
    tiles = cdiv(a.shape[0], cfg.block_m) * cdiv(b.shape[1], cfg.block_n)
    return bind_pointer(
        _CALLS, a, b, cfg, fallback, key_extra=(0, True), args_extra=(0,), scratch_tiles=tiles
    )
