"""Matrices whose rows start 128 bytes apart, and the copy that fills them: TMA's answer to odd sizes.

A TMA descriptor needs each row to start at a 16-byte boundary; a bf16 matrix with 4097 or 32001
columns has rows 8194 or 64002 bytes apart. `persistent_tma_pad` copies such an operand into
`aligned_rows` (`pitched_copy`: the same shape and values, rows `PAD_PITCH_BYTES` apart) and
describes the copy.

The copy is a Triton kernel, one program per BLOCK columns of a row, that writes every column of
the destination's pitch, zeros past the source's last: its loads from the odd rows cannot be vector
loads, but its stores, all in bounds of a pitch that is a multiple of 64 elements, are (Inductor's
generated pad does the same). On the H200 (bf16, CUDA graphs) it copies 4097x4097 in
21.6 us and 4096x32001 in 155 us, 3.1-3.4 TB/s, where torch's `copy_` into the padded view took 40
and 294 us; copies that stored only the source's columns, masked at an odd column count and so
element by element, reached 0.9-1.55 TB/s.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launching import DirectCalls
from kernels.sizes import cdiv

# Rows of padded operands start 128 B apart, not TMA's minimum of 16: a whole cache line, so a
# box row of 64 bf16 never straddles two. Kernel time at 128x256x64 on the H200, CUDA graphs
# (docs/design.md, "Rows 128 bytes apart"): 4097^3 0.288 -> 0.237 ms, 4096x32001x4096 1.706 ->
# 1.635, 2048x50257x768 0.301 -> 0.284; 4096^3, whose rows are 128 B apart either way, 0.200 -> 0.202.
PAD_PITCH_BYTES = 128

# Columns a program copies: 1024 bf16 are 2 KiB, eight elements (one 16-byte store) a thread of 4 warps.
COPY_BLOCK = 1024
COPY_WARPS = 4


def aligned_rows(
    rows: int, cols: int, like: torch.Tensor, pitch_bytes: int = PAD_PITCH_BYTES
) -> torch.Tensor:
    """An uninitialised (rows, cols) tensor whose rows start pitch_bytes apart, over whole rows.

    Its storage holds every row's padding, the last row's too (`empty_strided` would end at the
    last row's last column), so `pitched_copy` may write whole rows. A flat buffer viewed with
    `as_strided`, not a wider one sliced: the slice cost 6 us of host time on this VM.
    """
    per_row = pitch_bytes // like.element_size()
    pitch = cdiv(cols, per_row) * per_row
    flat = torch.empty(rows * pitch, device=like.device, dtype=like.dtype)
    return flat.as_strided((rows, cols), (pitch, 1))


@triton.jit
def _copy_rows_kernel(src, dst, rows, cols, src_row_stride, src_col_stride, pitch, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    # src_col_stride is 1 for a row-major source, which Triton specialises on: contiguous loads. In
    # int64: a column-major source's col * stride passes 2**31 from 2**31 elements on.
    src_at = src + row * src_row_stride + col.to(tl.int64) * src_col_stride
    read = tl.where(row < rows, cols, 0)  # a row past the source's reads nothing: zeros
    values = tl.load(src_at, mask=col < read, other=0)
    tl.store(dst + row * pitch + col, values, mask=col < pitch)


_COPIES = DirectCalls(_copy_rows_kernel)


def pitched_copy(src: torch.Tensor, rows: int | None = None) -> torch.Tensor:
    """A copy of src (2-D, any strides) in `aligned_rows`: the same values, padding zeroed; `rows` rows
    where more than src's (zeros past its last: kernels.cublas.padded_matmul's B, whose K is padded)."""
    src_rows, cols = src.shape
    rows = src_rows if rows is None else rows
    dst = aligned_rows(rows, cols, like=src)  # whole rows: the kernel writes every row's padding
    if src.numel() == 0:
        return dst
    pitch = dst.stride(0)
    grid = (rows, cdiv(pitch, COPY_BLOCK))
    args = (src, dst, src_rows, cols, *src.stride(), pitch)
    # The key holds what Triton specialised on: the int arguments by value (grid included), and the
    # source's 16-byte alignment (the destination, fresh from the allocator, is always aligned).
    key = (src.device, src.dtype, rows, src_rows, cols, *src.stride(), src.data_ptr() % 16)
    _COPIES.launch(key, grid, args, {"BLOCK": COPY_BLOCK}, num_warps=COPY_WARPS)
    return dst
