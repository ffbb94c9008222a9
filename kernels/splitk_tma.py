"""`splitk_tma` and `splitk_tma_det`: split-K with TMA loads, its reduction inside the one kernel.

Why another split-K: on the H200 the pointer split-K variants reached 0.77-0.83 of cuBLAS on the
skinny shapes (512x512x32768, 256x256x65536, 1024x1024x16384; docs/bench/h200.csv), and at
512x512x32768 (cuBLAS 37 us) they pay two extra launches around the product: a memset of the fp32
sum before it and a cast to bf16 after it (`splitk`), or a separate reduce kernel (`splitk_det`).
Here each program loads its K chunk through TMA descriptors (no `% N` wraps, no K masks: the
hardware zero-fills past K), and the last program to finish a tile stores it, in the output
dtype; nothing runs before or after the kernel.

Grid: cdiv(M, BM) * cdiv(N, BN) * SPLIT_K programs, the SPLIT_K programs of a tile side by side
(`splitk_tile`), chunks of whole BLOCK_K tiles (`split_range`). Each program then
- `splitk_tma`: adds its fp32 partial tile into the tile's slot of a workspace with atomics;
- `splitk_tma_det`: stores its partial into its own slot (SPLIT_K slots per tile);
then bumps the tile's counter (release, after a CTA barrier so every thread's part is written).
The program that brings the count to SPLIT_K is the last: it reads the sum (acquire; loads that
bypass L1), `splitk_tma_det` summing the slots in the fixed order 0..SPLIT_K-1 (bitwise
reproducible), and stores the tile through C's descriptor. No program waits on another, so no
schedule deadlocks, the interpreter's sequential one included.

The counters, and `splitk_tma`'s workspace, are zeroed once and left zeroed by the kernel (the
last program resets its tile's counter and slot), so no launch needs a memset: they are kept per
device and stream (`zeroed_scratch`); two launches on different streams never share them.
`splitk_tma_det`'s workspace is written whole before it is read: a plain allocation per call
(SPLIT_K x tiles x BM x BN x 4 B: 8 MiB at 512x512, 128x128 tiles, SPLIT_K 8).

SPLIT_K = 1 is a plain (non-persistent) TMA kernel: one program per tile, no workspace.
Layout constraints are persistent_tma's (`tma_operands`, and the rule `tma_strides_aligned`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.config import MatmulConfig
from kernels.operands import check_operands
from kernels.persistent_tma import check_tma, leading_stride
from kernels.registry import register_variant
from kernels.schedule import cdiv, split_range_jit, splitk_tile_jit


@triton.jit
def _splitk_tma_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr, counts_ptr, M, N, K, stride_a, stride_b, stride_cm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, DETERMINISTIC: tl.constexpr,
    A_TRANSPOSED: tl.constexpr, B_TRANSPOSED: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):  # fmt: skip
    """stride_a, stride_b: A's and B's non-unit strides (of rows, or of columns when transposed)."""
    # Descriptors made here, not on the host: the host's cost 15-20 us a launch in Triton's
    # launcher (a cuTensorMapEncode each), as long as the whole kernel at 512x512x32768 (visit 42).
    if A_TRANSPOSED:  # a column-major A is described as A.T, its tiles transposed in registers
        a_desc = tl.make_tensor_descriptor(a_ptr, [K, M], [stride_a, 1], [BLOCK_K, BLOCK_M])
    else:
        a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [stride_a, 1], [BLOCK_M, BLOCK_K])
    if B_TRANSPOSED:
        b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [stride_b, 1], [BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [stride_b, 1], [BLOCK_K, BLOCK_N])
    pid = tl.program_id(0)
    tile = pid // SPLIT_K
    pid_m, pid_n, pid_k = splitk_tile_jit(pid, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M, SPLIT_K)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    k_start, k_end = split_range_jit(pid_k, K, SPLIT_K, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for ki in range(k_start // BLOCK_K, tl.cdiv(k_end, BLOCK_K)):
        off_k = ki * BLOCK_K
        a = a_desc.load([off_k, off_m]).T if A_TRANSPOSED else a_desc.load([off_m, off_k])
        b = b_desc.load([off_n, off_k]).T if B_TRANSPOSED else b_desc.load([off_k, off_n])
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [stride_cm, 1], [BLOCK_M, BLOCK_N])
    if SPLIT_K == 1:
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
    else:
        slot = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        tile_size = BLOCK_M * BLOCK_N
        if DETERMINISTIC:
            tl.store(ws_ptr + (tile * SPLIT_K + pid_k) * tile_size + slot, acc)
        else:
            tl.atomic_add(ws_ptr + tile * tile_size + slot, acc, sem="relaxed")
        tl.debug_barrier()  # every thread's part precedes the release below
        before = tl.atomic_add(counts_ptr + tile, 1, sem="acq_rel")
        if before == SPLIT_K - 1:  # the last program of this tile stores it
            if DETERMINISTIC:
                total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for s in range(SPLIT_K):  # fixed order: the same sum, bit for bit, every run
                    total += tl.load(ws_ptr + (tile * SPLIT_K + s) * tile_size + slot, cache_modifier=".cg")
            else:
                total = tl.load(ws_ptr + tile * tile_size + slot, cache_modifier=".cg")
                tl.store(ws_ptr + tile * tile_size + slot, tl.zeros_like(total))  # zeroed for the next launch
            tl.store(counts_ptr + tile, 0)
            c_desc.store([off_m, off_n], total.to(c_desc.dtype))


# (kind, device, stream) -> a zeroed buffer the kernel leaves zeroed
_SCRATCH: dict[tuple, torch.Tensor] = {}


def zeroed_scratch(kind: str, numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The first `numel` elements of a zeroed buffer kept for this device and current stream."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (kind, device, stream)
    buffer = _SCRATCH.get(key)
    if buffer is None or buffer.numel() < numel or buffer.dtype != dtype:
        buffer = _SCRATCH[key] = torch.zeros(numel, dtype=dtype, device=device)
    return buffer[:numel]


def _device_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """Global memory for the descriptors the kernel makes (128 B each), from PyTorch's allocator."""
    return torch.empty(size, device="cuda", dtype=torch.int8)


def _launch(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, *, deterministic: bool) -> torch.Tensor:
    m, n, k = check_operands(a, b, cfg)
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    check_tma(a, b, c, cfg)
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    tile_size = cfg.block_m * cfg.block_n
    if cfg.split_k == 1:  # the kernel touches neither
        ws = counts = torch.empty(1, device=a.device, dtype=torch.int32)
    else:
        counts = zeroed_scratch("counts", tiles, torch.int32, a.device)
        if deterministic:
            ws = torch.empty(cfg.split_k * tiles * tile_size, device=a.device, dtype=torch.float32)
        else:
            ws = zeroed_scratch("sums", tiles * tile_size, torch.float32, a.device)
    a_transposed, b_transposed = a.stride(1) != 1, b.stride(1) != 1
    triton.set_allocator(_device_scratch)
    _splitk_tma_kernel[(tiles * cfg.split_k,)](
        a, b, c, ws, counts, m, n, k, leading_stride(a), leading_stride(b), c.stride(0),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
        SPLIT_K=cfg.split_k, DETERMINISTIC=deterministic,
        A_TRANSPOSED=a_transposed, B_TRANSPOSED=b_transposed,
        INPUT_PRECISION=cfg.input_precision, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return c


@register_variant("splitk_tma", config_space="splitk_tma", atomic=True)
def splitk_tma(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Split-K through TMA (Hopper); fp32 atomics into a kept workspace, the last program stores."""
    return _launch(a, b, cfg, deterministic=False)


@register_variant("splitk_tma_det", config_space="splitk_tma")
def splitk_tma_det(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Split-K through TMA (Hopper); partials in their own slots, the last program sums them in order."""
    return _launch(a, b, cfg, deterministic=True)
