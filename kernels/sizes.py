"""Integer arithmetic of tiles and splits, the element sizes of the dtypes a spec may name, and a
matmul's size: its work (2MNK FLOP) and its operand bytes.

No torch and no Triton: the config spaces' pruning rules, the farm's derived metrics (farm.metrics) and
the dashboard's use these, and a sweep's driver plans with them without importing either (3-5 s of
start-up on an H200 host; docs/design.md, "Start-up"). kernels/schedule.py re-exports `cdiv` and
`aligned_chunk` for the kernels.
"""

from __future__ import annotations

# Bytes per element of each dtype name a spec may use (torch's itemsize of the same dtype).
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def aligned_chunk(k: int, split_k: int, block_k: int) -> int:
    """K elements per split, rounded up to whole BLOCK_K tiles.

    Why: with chunk = cdiv(K, SPLIT_K) the chunk starts lose their alignment and the loads slow
    down; whole tiles raised the best bf16 split-K result 1.5-1.9x on an H200 (512x512x32768:
    187 -> 348 TFLOP/s; 256x256x65536: 141 -> 206; 128x128x131072: 62 -> 113).
    """
    return cdiv(cdiv(k, split_k), block_k) * block_k


def dtype_name(dtype) -> str:
    """The spec's name of a dtype: a name passes through, a torch.dtype gives its own (no torch import)."""
    name = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    if name not in DTYPE_BYTES:
        raise ValueError(f"unsupported dtype {dtype}; supported: {', '.join(DTYPE_BYTES)}")
    return name


def flop(m, n, k):
    """The work of one M x N x K matmul: 2MNK floating-point operations (a multiply and an add per term).
    Plain arithmetic, so numbers and pandas or numpy columns alike (pass floats where 2MNK may pass 2^63)."""
    return 2 * m * n * k


def tflops(m: int, n: int, k: int, ms: float) -> float:
    """Throughput of one matmul that took `ms` milliseconds, in TFLOP/s."""
    return flop(m, n, k) / (ms * 1e-3) / 1e12


def operand_bytes(m: int, n: int, k: int, dtype: str) -> int:
    """A + B + C once each: what the L2 study sets against the L2's size."""
    return (m * k + k * n + m * n) * DTYPE_BYTES[dtype]
