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
from triton.language.extra.cuda import gdc_wait

from kernels.config import MatmulConfig
from kernels.launching import COMPILE_ONLY, DirectCalls, binds
from kernels.operands import check_operands
from kernels.registry import register_variant
from kernels.schedule import cdiv
from kernels.splitk import compiled_split, launch_split

# (outputs a program, warps) of the reduce: 1024 on 4 warps (8 fp32 loads a thread a slice) streams a
# large workspace at memory speed, but at small M x N leaves most SMs idle (64 programs at 256x256), where
# 128 on one warp (a 16-byte load a thread a slice) spreads over all. L2 warm, us, 1024/4 against 128/1:
# (16, 256, 256) 3.6 / 2.1, (8, 512, 512) 3.2 / 2.6, (16, 1024, 1024) 21.6 / 18.6; (4, 4096, 4096) 70.9 /
# 80.9, (2, 8192, 8192) 153.6 / 318.1. After `splitk_tma_cluster`'s product at 256x256x65536, 30.5 us
# against 32.3 (fp16; bf16 29.9 against 31.9; cuBLAS 29.5, 28.9; CUDA graphs, L2 flushed, H200).
REDUCE_WIDE = (1024, 4)
REDUCE_NARROW = (128, 1)
REDUCE_NARROW_MAX_OUTPUTS = 1024 * 1024


@triton.jit
def _reduce_splits_kernel(ws_ptr, c_ptr, MN, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr, WAIT: tl.constexpr):
    if WAIT:  # launched overlapping the product: its workspace is complete and visible past this
        gdc_wait()
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


def reduce_splits(workspace: torch.Tensor, c: torch.Tensor, overlap: bool = False) -> torch.Tensor:
    """c = the (SPLIT_K, M, N) fp32 workspace summed over its splits in order, in c's dtype.

    overlap: launched with programmatic dependent launch (Hopper), its programs resident while the
    product that wrote the workspace ends, each waiting for it before it reads: for a product that
    lets its dependents launch early (`kernels.splitk_tma`). After one that does not, it saved nothing
    (30.4 against 30.5 us, H200), so `splitk_det` launches it plainly."""
    split_k, m, n = workspace.shape
    block, warps = REDUCE_NARROW if m * n <= REDUCE_NARROW_MAX_OUTPUTS else REDUCE_WIDE
    _REDUCE.launch(
        (c.device, c.dtype, m * n, split_k, overlap), (cdiv(m * n, block),), (workspace, c, m * n),
        {"SPLIT_K": split_k, "BLOCK": block, "WAIT": overlap}, num_warps=warps,
        **({"launch_pdl": True} if overlap else {}),
    )  # fmt: skip
    return c


class BoundDeterministic:
    """A split-K into a workspace and its in-order reduce, bound to a problem (`kernels.launching.
    bound_launch`): `splitk_det`'s kernels, or `kernels.splitk_tma`'s summed apart. Each call makes a
    fresh workspace and C and calls the split kernel's and the reduce's compiled runners directly with
    what their launcher passes them (`leading(a, b, c, workspace)` the split kernel's leading
    arguments: pointers, or descriptors), no operand checks or keys. A call whose A or B starts off 16
    bytes (Triton specialised on the starts; TMA needs them), or one made while the farm compiles
    ahead, goes to `fallback` (the launcher). Unbound, `splitk_det` read 1.09-1.12x its launcher's host
    time through kernels.matmul on an H100 host; the bound summing variants 0.61-1.01x."""

    __slots__ = ("device", "dtype", "fallback", "leading", "reduce", "shape", "split", "workspace_shape")

    def __init__(self, split, leading, reduce, workspace_shape, device, dtype, fallback) -> None:
        self.split, self.leading, self.reduce = split, leading, reduce
        self.workspace_shape, self.shape = workspace_shape, workspace_shape[1:]
        self.device, self.dtype, self.fallback = device, dtype, fallback

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if (a.data_ptr() | b.data_ptr()) % 16 or COMPILE_ONLY.get():
            return self.fallback(a, b)
        workspace = torch.empty(self.workspace_shape, device=self.device, dtype=torch.float32)
        c = torch.empty(self.shape, device=self.device, dtype=self.dtype)  # fresh: 16-byte starts
        (split, split_tail), (reduce, reduce_tail) = self.split, self.reduce
        split(*self.leading(a, b, c, workspace), *split_tail)
        reduce(workspace, c, *reduce_tail)
        return c


def compiled_reduce(c_like: torch.Tensor, m: int, n: int, split_k: int, overlap: bool = False):
    """(the reduce's compiled runner, its arguments after the workspace and C) for `reduce_splits` of a
    (split_k, m, n) workspace into C like c_like, or None where not compiled yet."""
    known = _REDUCE.compiled((c_like.device, c_like.dtype, m * n, split_k, overlap))
    return None if known is None else (known[0], (m * n, *known[1]))


def _pointer_split(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, workspace: torch.Tensor) -> tuple:
    """The pointer split kernel's leading arguments here: the workspace as its C, slots and counters."""
    return a, b, workspace, workspace, workspace


@binds("splitk_det")
def _bind(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback) -> BoundDeterministic | None:
    """`splitk_det` at cfg for operands like a and b, its two compiled kernels held: None where either
    was not compiled for these operands yet, or A or B starts off 16 bytes."""
    m, n = a.shape[0], b.shape[1]
    workspace_shape = (cfg.split_k, m, n)
    # its strides and a 16-byte start, as every fresh workspace has, with nothing allocated: a real one
    # is split_k times C in fp32 (512 MiB at 4096^2, split 8)
    workspace = torch.empty(workspace_shape, device="meta", dtype=torch.float32)
    split = compiled_split(a, b, workspace, cfg)
    reduce = compiled_reduce(a, m, n, cfg.split_k)
    if split is None or reduce is None or (a.data_ptr() | b.data_ptr()) % 16:
        return None
    return BoundDeterministic(split, _pointer_split, reduce, workspace_shape, a.device, a.dtype, fallback)
