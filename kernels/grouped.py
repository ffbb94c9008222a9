"""`grouped`: a 1-D grid remapped in GROUP_SIZE_M groups (the L2-friendly order).

Program pid takes tile `grouped_tile(pid, ...)` (kernels/schedule.py): GROUP_M tile rows are
walked column by column, so while a group runs, its GROUP_M row blocks of A and the current
column block of B are reused from L2 instead of re-read from DRAM. group_m = 1 is row-major.

`grouped_pad` is the same kernel for N whose rows are not 16-byte aligned (N = 5333 in bf16),
where K is short and the product is mostly loading B and storing C. There `grouped` can load B
and store C only element by element: no run of 8 columns starts on 16 bytes. `grouped_pad` copies B
into rows 128 bytes apart (`pitched_copy`) and stores C into such rows (`aligned_rows`, returned as an
(M, N) view, not contiguous), and tells the kernel N is the pitch: a multiple of 64 columns, so the
wrap, the mask and the row strides keep 16-byte vectors. The padding columns of C take A times B's
padding and are never read. At 495x5333x71 on the H200 (L2 flushed, CUDA graphs): 8.1-8.2 us in
64x128x32 tiles, B's copy included, against `grouped`'s best 10.3 (128x128x32 in one masked K loop)
and cuBLAS's 10.5-11.2.
Its launcher's two launches and two allocations cost host time (35 us a call against `grouped`'s 18
on that host), so an eager caller of so short a product waits on the host either way.
"""

import torch
import triton
import triton.language as tl

from kernels.config import MatmulConfig
from kernels.launching import COMPILE_ONLY, BoundCall, DirectCalls, binds
from kernels.operands import check_operands
from kernels.pitched import aligned_rows, pitched_copy
from kernels.registry import register_variant
from kernels.schedule import cdiv, grouped_tile_jit
from kernels.tile import (
    bind_pointer,
    pointer_constexprs,
    pointer_key,
    pointer_layout,
    short_k,
    store_tile,
    tile_accumulate,
)


@triton.jit
def _grouped_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    A_ALIGN: tl.constexpr = 1, B_ALIGN: tl.constexpr = 1, C_ALIGN: tl.constexpr = 1,
    SHORT_K: tl.constexpr = False,
):
    pid_m, pid_n = grouped_tile_jit(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    acc = tile_accumulate(a_ptr, b_ptr, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                          pid_m, pid_n, 0, K, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION, A_ALIGN, B_ALIGN,
                          SHORT_K)
    store_tile(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, C_ALIGN)


# Called directly after a key's first launch: Triton's JIT path binds and specialises every argument
# on each call, 11.6 us of host for a no-op kernel on an H200 host, and below about 50 us
# of GPU an eager caller, and do_bench after an L2 flush of about 70 us, waits for the host.
_CALLS = DirectCalls(_grouped_kernel)


@register_variant("grouped", config_space="grouped")
def grouped(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """1-D grid in GROUP_SIZE_M program order."""
    m, n, k = check_operands(a, b, cfg)
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    _launch(_CALLS, a, b, c, n, cfg, short_k(k, cfg.block_k))
    return c


@binds("grouped")
def _bind(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback) -> BoundCall | None:
    """`grouped` at cfg for operands like a and b, its compiled kernel held (`bound_launch`)."""
    return bind_pointer(_CALLS, a, b, cfg, fallback)


def _launch(calls: DirectCalls, a, b, c, n: int, cfg: MatmulConfig, masked_k_loop: bool) -> None:
    """The kernel over a, b into c, told N = n (B's columns, or `grouped_pad`'s pitch)."""
    (m, k), bm, bn = a.shape, cfg.block_m, cfg.block_n
    strides, aligns = pointer_layout(a, b, c, n)
    constexprs = pointer_constexprs(cfg, aligns, GROUP_M=cfg.group_m, SHORT_K=masked_k_loop)
    calls.launch(
        pointer_key(a, b, c, strides, aligns, cfg), (cdiv(m, bm) * cdiv(n, bn),),
        (a, b, c, m, n, k, *strides),
        constexprs, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip


_PAD_CALLS = DirectCalls(_grouped_kernel)


def _in_rows(b: torch.Tensor, pitch: int) -> bool:
    """Whether b's rows already lie `pitch` elements apart, row-major, with its storage holding the last
    row's padding too (the kernel reads up to the pitch in every row): no copy needed."""
    if b.stride() != (pitch, 1):
        return False
    return b.untyped_storage().nbytes() >= (b.storage_offset() + b.shape[0] * pitch) * b.element_size()


@register_variant("grouped_pad", config_space="grouped_pad")
def grouped_pad(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """grouped for odd N: B copied into rows 128 bytes apart, C stored into such rows (an (M, N) view)."""
    m, n, _ = check_operands(a, b, cfg)
    c = aligned_rows(m, n, like=a)
    pitch = c.stride(0)  # a multiple of 64 columns (bf16), as `pitched_copy`'s rows of B
    b_rows = b if _in_rows(b, pitch) else pitched_copy(b)
    # the peeled K loop it was measured with (8.1-8.2 us above), not `grouped`'s one masked loop for short K
    _launch(_PAD_CALLS, a, b_rows, c, pitch, cfg, masked_k_loop=False)
    return c


class BoundGroupedPad:
    """`grouped_pad` bound to a problem (kernels.launching.bound_launch): each call makes C in pitched rows
    and copies B into such rows unless they already are (`_in_rows`), as its launcher does, then calls
    the compiled kernel with them. A call whose A starts off 16 bytes (Triton specialised on it), or one
    made while the farm compiles ahead, goes to `fallback` (the launcher)."""

    __slots__ = ("fallback", "pitch", "runner", "shape", "tail")

    def __init__(self, runner, tail: tuple, shape: tuple[int, int], pitch: int, fallback) -> None:
        self.runner, self.tail, self.shape, self.pitch, self.fallback = runner, tail, shape, pitch, fallback

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if COMPILE_ONLY.get():
            return self.fallback(a, b)
        c = aligned_rows(*self.shape, like=a)
        b_rows = b if _in_rows(b, self.pitch) else pitched_copy(b)
        if (a.data_ptr() | b_rows.data_ptr()) % 16:  # C and a copy start aligned
            return self.fallback(a, b)
        self.runner(a, b_rows, c, *self.tail)
        return c


@binds("grouped_pad")
def _bind_pad(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback) -> BoundGroupedPad | None:
    """`grouped_pad` at cfg for operands like a and b: C's and B's pitched layouts (nothing copied), the
    compiled kernel for them; None where not compiled yet, or A starts off 16 bytes."""
    (m, k), n = a.shape, b.shape[1]
    c = aligned_rows(m, n, like=a)
    pitch = c.stride(0)
    b_rows = b if _in_rows(b, pitch) else aligned_rows(k, n, like=b)
    strides, aligns = pointer_layout(a, b_rows, c, pitch)
    known = _PAD_CALLS.compiled(pointer_key(a, b_rows, c, strides, aligns, cfg))
    if known is None or (a.data_ptr() | b_rows.data_ptr()) % 16:
        return None
    runner, constexprs = known
    return BoundGroupedPad(runner, (m, pitch, k, *strides, *constexprs), (m, n), pitch, fallback)
