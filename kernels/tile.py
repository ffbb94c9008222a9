"""The jit building blocks every tiled schedule shares: one tile's K loop, and its store.

Loads wrap rows and columns with `% M` / `% N`, so a partial edge tile reads valid (repeated)
rows instead of masking both operands; the store masks with the unwrapped offsets, so those
repeats are never written. The K tail is masked (`offs_k < k_end - k`), loading zeros.
"""

import triton
import triton.language as tl


@triton.jit
def tile_accumulate(
    a_ptr, b_ptr, M, N, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n, k_start, k_end,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):
    """fp32 sum over k in [k_start, k_end) of A[tile rows, k] * B[k, tile cols]."""
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + (k_start + offs_k)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_start + offs_k)[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(0, tl.cdiv(k_end - k_start, BLOCK_K)):
        k_left = k_end - k_start - i * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def tile_offsets(pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Unwrapped output offsets of a tile and the mask of its in-bounds elements."""
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offsets = offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    return offsets, (offs_cm[:, None] < M) & (offs_cn[None, :] < N)


@triton.jit
def store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offsets, mask = tile_offsets(pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)
    tl.store(c_ptr + offsets, acc.to(c_ptr.dtype.element_ty), mask=mask)
