"""`splitk`: each output tile's K range is cut into SPLIT_K chunks, one program per chunk,
their partial sums added with fp32 atomics into an output the launcher zeroes.

Grid: cdiv(M, BM) * cdiv(N, BN) * SPLIT_K programs, pid_k fastest (`splitk_tile`), tiles in
GROUP_M order. Chunks are whole BLOCK_K tiles (`aligned_chunk`), so each chunk start is aligned;
the last chunk is clipped to K and its tail masked. More programs than tiles is the point:
a 512x512 output in 128x128 tiles is 16 programs for 132 SMs; SPLIT_K = 8 fills 128 of them.

Cost of fp16/bf16 outputs: atomics need fp32, so the launcher zeroes an fp32 M x N buffer
(4 B per element written) and converts it to the input dtype afterwards (4 B read, 2 B written
per element): two extra launches of a few microseconds each at 512 x 512. The order of the
atomic adds varies from run to run, so results are not bitwise reproducible (see splitk_det).
"""

import torch
import triton
import triton.language as tl

from kernels.config import MatmulConfig
from kernels.launching import DirectCalls
from kernels.operands import check_operands
from kernels.registry import register_variant
from kernels.schedule import cdiv, split_range_jit, splitk_tile_jit
from kernels.tile import pointer_constexprs, pointer_key, pointer_layout, tile_accumulate, tile_offsets


@triton.jit
def _splitk_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_ck,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, ATOMIC: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    ALIGN: tl.constexpr = 1,
):
    """ATOMIC: add the partial tile into c. Otherwise store it to c + pid_k * stride_ck (a workspace)."""
    pid_m, pid_n, pid_k = splitk_tile_jit(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N),
                                          GROUP_M, SPLIT_K)
    k_start, k_end = split_range_jit(pid_k, K, SPLIT_K, BLOCK_K)
    acc = tile_accumulate(a_ptr, b_ptr, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                          pid_m, pid_n, k_start, k_end, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION, ALIGN)
    offsets, mask = tile_offsets(pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, ALIGN)
    if ATOMIC:
        tl.atomic_add(c_ptr + offsets, acc, mask=mask, sem="relaxed")
    else:
        tl.store(c_ptr + pid_k * stride_ck + offsets, acc, mask=mask)


# Called directly after a key's first launch, as `grouped`'s kernel is (Triton's JIT path: 11.6 us of
# host a call for a no-op kernel on an H200 host); splitk_det launches it too.
_CALLS = DirectCalls(_splitk_kernel)


def launch_split(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: MatmulConfig, *, atomic: bool):
    """Launch the split kernel into c: an (M, N) fp32 sum (atomic) or a (SPLIT_K, M, N) workspace."""
    m, k = a.shape
    n = b.shape[1]
    grid = (cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n) * cfg.split_k,)
    strides, align = pointer_layout(a, b, c)
    stride_ck = c.stride(0) if c.ndim == 3 else 0
    constexprs = pointer_constexprs(cfg, align, GROUP_M=cfg.group_m, SPLIT_K=cfg.split_k, ATOMIC=atomic)
    _CALLS.launch(
        pointer_key(a, b, c, strides, align, cfg, stride_ck, atomic), grid,
        (a, b, c, m, n, k, *strides, stride_ck), constexprs,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip


@register_variant("splitk", config_space="splitk", atomic=True)
def splitk(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Split-K with fp32 atomic adds into a zeroed output."""
    m, n, _ = check_operands(a, b, cfg)
    c = torch.zeros((m, n), device=a.device, dtype=torch.float32)
    launch_split(a, b, c, cfg, atomic=True)
    return c if a.dtype == torch.float32 else c.to(a.dtype)
