"""`cublas`: torch.matmul, the library baseline every variant is compared with; and `padded_matmul`,
torch.matmul on copies of rows cuBLAS reads at full speed, what kernels.matmul serves where the
library's win is carried to a problem whose rows are not 16-byte aligned (kernels/dispatch.py).

fp32 inputs follow the config's input_precision ("ieee" -> full fp32, "tf32" -> TF32 tensor
cores) through torch's float32 matmul precision, restored afterwards.
"""

import contextlib

import torch

from kernels.config import MatmulConfig
from kernels.operands import check_operands
from kernels.pitched import pitched_copy
from kernels.registry import register_variant
from kernels.sizes import cdiv
from kernels.space import TMA_ALIGN_BYTES

_TORCH_PRECISION = {"ieee": "highest", "tf32": "high", "tf32x3": "highest"}


@contextlib.contextmanager
def _float32_precision(input_precision: str):
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(_TORCH_PRECISION[input_precision])
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@register_variant("cublas", config_space="library", baseline=True)
def cublas(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """torch.matmul (cuBLAS on NVIDIA GPUs): the baseline."""
    check_operands(a, b, cfg)
    if a.dtype != torch.float32:
        return torch.matmul(a, b)
    with _float32_precision(cfg.input_precision):
        return torch.matmul(a, b)


def _rows_aligned(t: torch.Tensor) -> bool:
    """Whether cuBLAS reads t in place at full speed: row-major, rows and start on 16 bytes (as TMA:
    kernels.space.unaligned_rows)."""
    return (
        t.stride(1) == 1
        and (t.stride(0) * t.element_size()) % TMA_ALIGN_BYTES == 0
        and t.data_ptr() % TMA_ALIGN_BYTES == 0
    )


def padded_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.matmul(a, b) for 2-D a and b on copies whose rows start 128 bytes apart (kernels/pitched.py)
    and whose K is a whole number of 16-byte vectors, where theirs are not: A's padding columns and B's
    padding rows are zeros, and add nothing. The (M, N) product, a view of rows as far apart where N
    was padded (B's zero columns are multiplied too, and dropped).

    Why: cuBLAS's fast kernels need 16-byte rows, and a K that fills whole vectors. Inductor's
    max-autotune pads the same way, to multiples of 8 elements, and then picks cuBLAS: at
    3333x1111x4444 bf16 it ran cuBLAS on 3336x4448 @ 4448x1112 in 52.3 us where its best Triton GEMM
    took 92.4 and this project's `persistent_tma_pad` 104-133 with the copies (Inductor 84.9 with
    them); at 5000x1234x3000 (N padded to 1240) 56.9 against 127.6 and 80.4 (H100). Copies of aligned
    rows with K left at 4444, 2500 or 1537 ran no faster than cuBLAS on the unaligned rows themselves
    (189, 186 and 228 us against 315, 193 and 193), while with only N padded (5000x1234x3000,
    1000x3001x2000) they ran 64.6 and 34.9 against 224.6 and 126.6."""
    (m, k), n = a.shape, b.shape[1]
    per_vector = TMA_ALIGN_BYTES // a.element_size()
    k_in = cdiv(k, per_vector) * per_vector
    if k_in == k and _rows_aligned(a):
        a_in = a
    else:
        a_rows = pitched_copy(a)
        a_in = a_rows.as_strided((m, k_in), (a_rows.stride(0), 1))
    if k_in == k and _rows_aligned(b):
        return torch.matmul(a_in, b)
    b_rows = pitched_copy(b, rows=k_in)
    pitch = b_rows.stride(0)
    if (n * b.element_size()) % TMA_ALIGN_BYTES == 0:
        return torch.matmul(a_in, b_rows.as_strided((k_in, n), (pitch, 1)))
    return torch.matmul(a_in, b_rows.as_strided((k_in, pitch), (pitch, 1)))[:, :n]
