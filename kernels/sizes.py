"""Integer arithmetic of tiles and splits, and the element sizes of the dtypes a spec may name.

No torch and no Triton: the config spaces' pruning rules and the farm's derived metrics use these,
and a sweep's driver plans with them without importing either (3-5 s of start-up on an H200 host;
docs/design.md, "Start-up"). kernels/schedule.py re-exports `cdiv` and `aligned_chunk` for the kernels.
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
