"""`splitk_det`: deterministic split-K. Each chunk stores its partial tile to its own slice of
an fp32 workspace (SPLIT_K x M x N, no zeroing: every program writes its whole slice, an empty
chunk writes zeros); a second kernel sums the slices in the fixed order 0..SPLIT_K-1 and writes
the output dtype directly. Bitwise reproducible, any output dtype.

Cost against `splitk`: the workspace is SPLIT_K times the fp32 output (8 x 512 x 512 x 4 B =
8 MiB, written once and read once, about 4 us of HBM traffic on an H200), and one more launch;
no memset and no dtype conversion pass.
"""

import torch
import triton
import triton.language as tl

from kernels.config import MatmulConfig
from kernels.launching import DirectCalls
from kernels.operands import check_operands
from kernels.registry import register_variant
from kernels.schedule import cdiv
from kernels.splitk import launch_split

# 1024 outputs per program, 4 warps: 8 fp32 loads per thread per slice, enough in flight to
# stream the workspace at memory speed.
REDUCE_BLOCK = 1024


@triton.jit
def _reduce_splits_kernel(ws_ptr, c_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):  # fixed order: the same sum, bit for bit, every run
        acc += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


# Called directly after a key's first launch, as every kernel here is (`kernels.grouped`). Its key: the
# sizes and dtypes; the workspace and C come fresh from PyTorch's allocator, their starts aligned.
_REDUCE = DirectCalls(_reduce_splits_kernel)


@register_variant("splitk_det", config_space="splitk")
def splitk_det(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Split-K into an fp32 workspace, reduced in a fixed order: deterministic."""
    m, n, _ = check_operands(a, b, cfg)
    workspace = torch.empty((cfg.split_k, m, n), device=a.device, dtype=torch.float32)
    launch_split(a, b, workspace, cfg, atomic=False)
    return reduce_splits(workspace, torch.empty((m, n), device=a.device, dtype=a.dtype))


def reduce_splits(workspace: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """c = the (SPLIT_K, M, N) fp32 workspace summed over its splits in order, in c's dtype."""
    split_k, m, n = workspace.shape
    _REDUCE.launch(
        (c.device, c.dtype, m * n, split_k), (cdiv(m * n, REDUCE_BLOCK),), (workspace, c, m * n),
        {"SPLIT_K": split_k, "BLOCK": REDUCE_BLOCK}, num_warps=4,
    )  # fmt: skip
    return c
