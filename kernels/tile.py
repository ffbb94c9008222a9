"""The jit building blocks every tiled schedule shares: one tile's K loop, and its store.

Loads wrap rows and columns with `% M` / `% N`, so a partial edge tile reads valid (repeated)
rows instead of masking both operands; the store masks with the unwrapped offsets, so those
repeats are never written. The K loop runs over whole BLOCK_K tiles unmasked and peels the
partial last tile off into one masked step, loading zeros past k_end.

Vector width on ragged sizes: Triton knows an integer argument is a multiple of 16 when it is,
and nothing otherwise. With N = 5000 or K = 1000 (multiples of 8, not 16) it could prove neither
the `% N` columns contiguous nor the row starts 16-byte aligned, and loaded element by element:
3000x5000x1000 in bf16 ran at 0.12 of cuBLAS on an H200 (N = 5000 alone 0.14, K = 1000 alone
0.28). `pointer_layout` finds, for each row-major operand, the power of two (up to 16) dividing its
row stride (and N, for B's wrapped columns and C's masked ones) on the host; the kernels pass them as
A_ALIGN, B_ALIGN and C_ALIGN and `_aligned` rewrites those values as `x // ALIGN * ALIGN` (the same
number, now with a divisibility the compiler can see). One value per operand, not one for all three:
at 5000x1234x3000 A's rows (6,000 bytes) allow 16-byte loads where B's and C's (2,468) allow 4, and
one shared value held A to B's. The wrapped
offsets are also declared contiguous (`tl.max_contiguous`, as Inductor's mm template does): where N is
odd that is what keeps B's scalar loads coalesced (4097^3 in 128x256 tiles 7.18 -> 2.17 ms,
H200), and a wrap at N, a multiple of any vector width the address allows, never splits a vector.
"""

import math

import torch
import triton
import triton.language as tl

from kernels.launching import BoundCall, pointer_operands
from kernels.scratch import ScratchOperands
from kernels.sizes import cdiv

# Past 16 elements Triton's own specialisation already knows the divisibility.
MAX_ALIGN = 16


def pointer_layout(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, n: int | None = None
) -> tuple[tuple[int, ...], tuple[int, int, int]]:
    """The strides the pointer kernels take, in their order (am, ak, bk, bn, cm, cn), and the alignments
    (A_ALIGN, B_ALIGN, C_ALIGN): for each row-major operand the largest power of two <= 16 dividing its
    row stride, and N too for B and C (B's columns wrap at N, C's are masked at N); 1 for an operand
    that is not row-major. N is `n` where the kernel is told another than B's (`grouped_pad`: the pitch).

    c may be a stack of outputs (a split-K workspace): its last two dimensions are the tile's.
    Each tensor's strides are read once: a `stride(i)` call costs about 0.5 us of Python, and a
    launcher's host time is what an eager caller of a short kernel waits for (18-38 us a call for
    the pointer variants, their kernels called directly, on an H200 host; docs/design.md,
    "Launching: compiled kernels called directly").
    """
    (am, ak), (bk, bn), c_strides = a.stride(), b.stride(), c.stride()
    cm, cn = c_strides[-2:]
    n = b.shape[1] if n is None else n
    aligns = (
        math.gcd(am, MAX_ALIGN) if ak == 1 else 1,
        math.gcd(bk, n, MAX_ALIGN) if bn == 1 else 1,
        math.gcd(cm, n, MAX_ALIGN) if cn == 1 else 1,
    )
    return (am, ak, bk, bn, cm, cn), aligns


def pointer_key(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, strides: tuple, aligns: tuple, *extra):
    """All Triton specialised a pointer kernel's launch on, for `kernels.launching.DirectCalls`: the
    device, dtypes, sizes and strides by value (their ==1 and %16), the alignments, each operand's start
    modulo 16 (Triton's pointer alignment), and `extra`: the config (its constexprs, warps and stages;
    the grid follows from it and the sizes) and whatever else the launcher passes."""
    return (
        a.device, a.dtype, c.dtype, tuple(a.shape), b.shape[1], strides, aligns,
        a.data_ptr() % 16, b.data_ptr() % 16, c.data_ptr() % 16, *extra,
    )  # fmt: skip


def bind_pointer(
    calls, a: torch.Tensor, b: torch.Tensor, cfg, fallback, *, key_extra=(), args_extra=(), scratch_tiles=None
):
    """A pointer kernel launched by `calls` (kernels.launching.DirectCalls) into a fresh (M, N) C, bound
    to operands like a and b (`kernels.launching.bound_launch`): the key the launcher made, looked up
    once. None where that key was never compiled, or an operand or C starts off 16 bytes (the bound
    call keeps only 16-byte starts, Triton's pointer specialisation). The kernel takes (a, b, c, M, N, K,
    six strides, `args_extra`, constexprs), as `tiled` and `grouped` do, and the launcher's key ends with
    the config and `key_extra`; a summing kernel (`scratch_tiles`: split-K, stream-K) takes its kept
    slots and counters for that many tiles after C (`kernels.scratch.ScratchOperands`)."""
    (m, k), n = a.shape, b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    strides, aligns = pointer_layout(a, b, c)
    known = calls.compiled(pointer_key(a, b, c, strides, aligns, cfg, *key_extra))
    if known is None or (a.data_ptr() | b.data_ptr() | c.data_ptr()) % 16:
        return None
    runner, constexprs = known
    tail = (m, n, k, *strides, *args_extra, *constexprs)
    if scratch_tiles is None:
        operands = pointer_operands
    else:
        operands = ScratchOperands(scratch_tiles, cfg.block_m, cfg.block_n)
    return BoundCall(runner, operands, tail, (m, n), a.device, a.dtype, fallback)


# A K loop of at most this many BLOCK_K steps runs as one masked loop (`grouped`): at 495x5333x71 (three
# steps of 32) it ran 9.9-12.6 us of GPU time that way against 12.6-16.7 peeled (cuBLAS 9.8-10.5); at seven
# steps (333x4444x200) 9.4-12.7 against 6.4-9.2, at four (5000x5000x200, BLOCK_K 64) 81 against 56
# (H200). We think the pipeline overlaps masked steps in its loop and
# not a peeled tail after it, which matters only where the tail is a third of the loop.
SHORT_K_STEPS = 3


def short_k(k: int, block_k: int) -> bool:
    """Whether a K loop of k is short enough to run as one masked loop (`SHORT_K_STEPS`)."""
    return cdiv(k, block_k) <= SHORT_K_STEPS


def pointer_constexprs(cfg, aligns: tuple[int, int, int], **more) -> dict:
    """The constexprs every pointer kernel takes (the blocks, INPUT_PRECISION, the alignments of
    `pointer_layout`) and `more`."""
    a_align, b_align, c_align = aligns
    return {
        "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k,
        "INPUT_PRECISION": cfg.input_precision, "A_ALIGN": a_align, "B_ALIGN": b_align, "C_ALIGN": c_align,
        **more,
    }  # fmt: skip


@triton.jit
def _aligned(x, ALIGN: tl.constexpr):
    """x itself, written so the compiler sees it is a multiple of ALIGN (the launcher checked it is)."""
    if ALIGN > 1:
        return x // ALIGN * ALIGN
    return x


@triton.jit
def tile_accumulate(
    a_ptr, b_ptr, M, N, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n, k_start, k_end,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    A_ALIGN: tl.constexpr, B_ALIGN: tl.constexpr, MASKED_LOOP: tl.constexpr = False,
):
    """fp32 sum over k in [k_start, k_end) of A[tile rows, k] * B[k, tile cols]; MASKED_LOOP: every step
    masked in one loop (`short_k`), not whole tiles then a peeled partial one."""
    N = _aligned(N, B_ALIGN)
    stride_am = _aligned(stride_am, A_ALIGN)
    stride_bk = _aligned(stride_bk, B_ALIGN)
    # Contiguous runs, said after the wrap (as Inductor's mm template says them): with an odd N Triton
    # knew no contiguity along B's rows, and (we think) laid B's loads out across rows, uncoalesced:
    # `grouped` ran 14.7 us of GPU time at 495x5333x71 bf16 against Inductor's 7.2 in the same tile,
    # 12.9 with this (H200). Vectors stay no wider than what Triton knows divides N
    # (B_ALIGN, or its own multiple of 16), so a wrap at N never splits one: where that is 1, scalar loads.
    offs_am = tl.max_contiguous((pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M, BLOCK_M)
    offs_bn = tl.max_contiguous((pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + (k_start + offs_k)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_start + offs_k)[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_len = tl.maximum(k_end - k_start, 0)  # an empty split-K chunk has k_end < k_start
    if MASKED_LOOP:
        for k in range(0, k_len, BLOCK_K):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_len - k, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_len - k, other=0.0)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        return acc
    full_tiles = k_len // BLOCK_K
    for _ in range(0, full_tiles):  # whole BLOCK_K tiles: no mask
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    k_left = k_len - full_tiles * BLOCK_K
    if k_left > 0:  # the partial last tile, masked
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    return acc


@triton.jit
def tile_offsets(pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 C_ALIGN: tl.constexpr):
    """Unwrapped output offsets of a tile and the mask of its in-bounds elements."""
    N = _aligned(N, C_ALIGN)
    stride_cm = _aligned(stride_cm, C_ALIGN)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offsets = offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
    return offsets, (offs_cm[:, None] < M) & (offs_cn[None, :] < N)


@triton.jit
def store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, C_ALIGN: tl.constexpr):
    offsets, mask = tile_offsets(pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_ALIGN)
    tl.store(c_ptr + offsets, acc.to(c_ptr.dtype.element_ty), mask=mask)
