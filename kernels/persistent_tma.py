"""`persistent_tma`: about one program per SM, each walking output tiles pid, pid + P, ... in
GROUP_SIZE_M order, A and B tiles loaded and C tiles stored through TMA tensor descriptors.

Why: the tensor memory accelerator (Hopper, compute capability 9.0) copies a whole tile with
one instruction and fills out-of-bounds rows and columns with zeros in hardware, so ragged
M, N and K need no `% N` wraps or K masks, the loss that cost pointer kernels 2.4-6x on
3000x5000x1000 (bf16, H200: 0.12 of cuBLAS). A persistent grid also lets the compiler overlap
the next tile's loads with this tile's epilogue (`tl.range(..., flatten=True)`, Triton's
tutorial 09). The epilogue stores C in two BLOCK_N/2 halves, which halves its shared-memory
staging buffer (64 KiB for a 128x256 bf16 tile) and leaves room for a fourth pipeline stage.

Constraints (`tma_layout_error`): each operand needs a unit stride in one dimension, its other
stride a multiple of 16 bytes, and a 16-byte aligned start; C is allocated (M, N) contiguous,
so N * itemsize must be a multiple of 16 too. Odd sizes (N = 32001 in bf16, say) do not
qualify: `persistent_tma` raises `TmaUnsupported` and the config-space rule `tma_strides_aligned`
prunes such points before they are queued. Their answer is `persistent_tma_pad`, the same kernel
after copying each unaligned operand into rows 128 bytes apart (kernels/pitched.py; one extra read
and write of that operand: for 4096x32001x4096 in bf16, 262 MB of B, 0.155 ms on the H200 against
a 1.56 ms product) and storing C into a padded buffer where N * itemsize is not a
multiple of 16 bytes, returned as an (M, N) view with a row stride of N rounded up to 128 bytes (no
copy; not contiguous). Its rule `tma_needs_padding` keeps it off shapes that need no padding; where
the last wave is short, `persistent_tma_bands` pads the same way and cuts C in two. The pointer
variants serve the rest, with their vector width kept wherever N and K allow (kernels/tile.py).
Off Hopper (no TMA) the launcher raises the same error; the farm's compile-ahead step calls the
launcher first, so such a point is stored with the error text as `compile_error`.

Works with Triton 3.6 (the GPU image) and 3.9 (whose interpreter emulates host descriptors):
only `triton.tools.tensor_descriptor.TensorDescriptor`, `desc.load/store` and `tl.range`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents
from triton.tools.tensor_descriptor import TensorDescriptor

from kernels.config import MatmulConfig
from kernels.launching import COMPILE_ONLY, BoundCall, DirectCalls, binds, dependent_launch
from kernels.operands import check_operands
from kernels.pitched import aligned_rows, pitched_copy
from kernels.registry import register_variant
from kernels.schedule import cdiv, grouped_tile_jit, multiprocessor_count
from kernels.space import TMA_ALIGN_BYTES, TMA_MAX_BOX


class TmaUnsupported(ValueError):
    """The operands or the device cannot use TMA descriptors: another variant must serve them."""


def tma_layout_error(t: torch.Tensor, name: str) -> str | None:
    """Why `t` cannot back a TMA descriptor, or None."""
    if t.stride(1) != 1 and t.stride(0) != 1:
        return f"{name} has strides {tuple(t.stride())}: TMA needs a unit stride in one dimension"
    lead = t.stride(0) if t.stride(1) == 1 else t.stride(1)
    if (lead * t.element_size()) % TMA_ALIGN_BYTES:
        return (
            f"{name} {tuple(t.shape)} has a leading stride of {lead} elements ({lead * t.element_size()} B):"
            f" TMA needs a multiple of {TMA_ALIGN_BYTES} B (pad it, or use a pointer variant)"
        )
    if t.data_ptr() % TMA_ALIGN_BYTES:
        return f"{name} starts at an address not aligned to {TMA_ALIGN_BYTES} B"
    return None


def tma_describable(t: torch.Tensor) -> bool:
    """`tma_layout_error(t) is None` in three reads and no message: `padded` asks it for A and B on every
    call of the padding launchers, where the message-building check took 3.7-8.4 us of profiled host
    time a call for the two (H200 host)."""
    (rows, cols), size = t.stride(), t.element_size()
    lead = rows if cols == 1 else cols if rows == 1 else None
    return lead is not None and (lead * size) % TMA_ALIGN_BYTES == 0 and t.data_ptr() % TMA_ALIGN_BYTES == 0


def tma_device_error(device: torch.device) -> str | None:
    """Why this device has no TMA, or None. The interpreter (a CPU) emulates descriptors."""
    if device.type == "cpu":
        return None
    if torch.version.hip is not None:
        return "persistent_tma needs NVIDIA TMA (Hopper or newer); this is a ROCm device"
    module = torch.get_device_module(device)
    major, minor = module.get_device_capability(device)
    if major < 9:
        name = module.get_device_name(device)
        return f"persistent_tma needs TMA (compute capability >= 9.0); {name} is {major}.{minor}"
    return None


def rebased(template: TensorDescriptor, base: torch.Tensor) -> TensorDescriptor:
    """template over base, a tensor of the same dtype, shape and strides, without validating again:
    TensorDescriptor's checks cost about 5 us a descriptor in Python, three a launch."""
    desc = object.__new__(TensorDescriptor)
    desc.__dict__.update(template.__dict__)
    desc.base = base
    return desc


@dataclass(frozen=True)
class TmaPlan:
    """A TMA launch's key-dependent parts, made once per key after `check_tma` passed: descriptor
    templates (their base cleared, so the plan holds no tensor), the grid and the constexprs."""

    a_desc: TensorDescriptor
    b_desc: TensorDescriptor
    c_desc: TensorDescriptor
    a_transposed: bool
    b_transposed: bool
    grid: tuple[int, ...]
    constexprs: dict

    @classmethod
    def make(cls, a, b, c, c_desc: TensorDescriptor, cfg: MatmulConfig, grid: tuple[int, ...], **constexprs):
        a_desc, a_transposed = operand_descriptor(a, cfg.block_m, cfg.block_k)
        b_desc, b_transposed = operand_descriptor(b, cfg.block_k, cfg.block_n)
        for desc in (a_desc, b_desc, c_desc):
            desc.base = None
        constexprs = {
            "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m,
            **constexprs, "A_TRANSPOSED": a_transposed, "B_TRANSPOSED": b_transposed,
            "INPUT_PRECISION": cfg.input_precision, "PDL": dependent_launch(a.device),
        }  # fmt: skip
        return cls(a_desc, b_desc, c_desc, a_transposed, b_transposed, grid, constexprs)

    def descriptors(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[TensorDescriptor, ...]:
        """This call's descriptors: the templates over a, b and c (a column-major one as its .T)."""
        return (
            rebased(self.a_desc, a.t() if self.a_transposed else a),
            rebased(self.b_desc, b.t() if self.b_transposed else b),
            rebased(self.c_desc, c),
        )


def tma_key(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: MatmulConfig) -> tuple:
    """All a TMA kernel is specialised on, and all `check_tma` looks at, but the operands' addresses
    (`misaligned`): the device, dtypes, sizes, strides and the config."""
    (m, k), n = a.shape, b.shape[1]
    return (a.device, a.dtype, c.dtype, m, n, k, a.stride(), b.stride(), c.stride(), cfg)


def misaligned(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> bool:
    """Whether an operand starts off TMA's 16-byte alignment: the one check a known key leaves."""
    return bool((a.data_ptr() | b.data_ptr() | c.data_ptr()) % TMA_ALIGN_BYTES)


def checked_plan(calls: DirectCalls, a, b, c, cfg: MatmulConfig, build) -> tuple[tuple, TmaPlan]:
    """This launch's key and plan. `check_tma` runs before a key's plan is built (a plan exists only
    for what passed it); for a known key only the operands' aligned starts are checked again."""
    key = tma_key(a, b, c, cfg)
    if misaligned(a, b, c):
        check_tma(a, b, c, cfg)  # says which operand

    def build_checked() -> TmaPlan:
        check_tma(a, b, c, cfg)
        return build(a, b, c, cfg)

    return key, calls.plan(key, build_checked)


def operand_descriptor(t: torch.Tensor, rows: int, cols: int) -> tuple[TensorDescriptor, bool]:
    """A descriptor over t's contiguous orientation, and whether the kernel must transpose its tiles.

    A row-major t (stride(1) == 1) is described as it is, with a [rows, cols] box; a column-major
    one as t.T with a [cols, rows] box, whose tiles the kernel transposes in registers.
    """
    if t.stride(1) == 1:
        return TensorDescriptor(t, list(t.shape), [t.stride(0), 1], [rows, cols]), False
    tt = t.t()
    return TensorDescriptor(tt, list(tt.shape), [tt.stride(0), 1], [cols, rows]), True


@triton.jit
def _persistent_tma_kernel(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,
    A_TRANSPOSED: tl.constexpr,
    B_TRANSPOSED: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    PDL: tl.constexpr,
):
    if PDL:  # a kernel queued next with programmatic dependent launch may take SMs as they free
        gdc_launch_dependents()
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    # The epilogue recomputes its tile from its own counter, as tutorial 09 does: one value used in
    # both the flattened loop's prologue and epilogue trips the pipeliner.
    tile_c = start - NUM_PROGRAMS
    for tile in tl.range(start, num_tiles, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = grouped_tile_jit(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BLOCK_K
            # A transposed descriptor holds the tile as [cols, rows]: load that box, transpose in registers.
            a = a_desc.load([off_k, off_m]).T if A_TRANSPOSED else a_desc.load([off_m, off_k])
            b = b_desc.load([off_n, off_k]).T if B_TRANSPOSED else b_desc.load([off_k, off_n])
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        tile_c += NUM_PROGRAMS
        pid_m, pid_n = grouped_tile_jit(tile_c, num_pid_m, num_pid_n, GROUP_M)
        # Two BLOCK_N/2 halves: the descriptor's box is [BLOCK_M, BLOCK_N // 2]; rows and columns
        # past M and N are clipped by the hardware.
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], left.to(c_desc.dtype))
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], right.to(c_desc.dtype))


def persistent_programs(device: torch.device, m: int, n: int, cfg: MatmulConfig) -> int:
    """One program per SM, never more than there are tiles."""
    return min(multiprocessor_count(device), cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n))


def output_descriptor(c: torch.Tensor, cfg: MatmulConfig) -> TensorDescriptor:
    """C's descriptor, its box half a tile wide: the epilogue stores a tile in two halves."""
    return TensorDescriptor(c, list(c.shape), [c.stride(0), 1], [cfg.block_m, cfg.block_n // 2])


# A device's answer once per device: asking costs about 6 us a call on an H200 host.
_device_error = functools.cache(tma_device_error)


def check_tma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: MatmulConfig) -> None:
    """Raise `TmaUnsupported` unless TMA can describe a, b and c with cfg's boxes on their device."""
    errors = [_device_error(a.device)]
    errors += [tma_layout_error(t, name) for t, name in ((a, "A"), (b, "B"), (c, "C"))]
    errors += [
        f"{name}={block} > {TMA_MAX_BOX}: a TMA box is at most {TMA_MAX_BOX} elements a side"
        for name, block in (("block_m", cfg.block_m), ("block_n", cfg.block_n), ("block_k", cfg.block_k))
        if block > TMA_MAX_BOX
    ]
    errors = [e for e in errors if e]
    if errors:
        raise TmaUnsupported("; ".join(errors))


# Called directly after a key's first launch (kernels.launching.DirectCalls: 37 -> 19.5 us of host
# time a call at 2000x3000x1500, H200 host), its checks and descriptors made once per key (`TmaPlan`).
# The key (`tma_key`) holds all the kernel was specialised on: the descriptors' dtypes and boxes
# follow from the dtypes, cfg and the strides; sizes go in by value; the 16-byte aligned starts
# Triton also asks about are checked on every call (`misaligned`).
_CALLS = DirectCalls(_persistent_tma_kernel)


def _plan(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: MatmulConfig) -> TmaPlan:
    programs = persistent_programs(a.device, a.shape[0], b.shape[1], cfg)
    return TmaPlan.make(a, b, c, output_descriptor(c, cfg), cfg, (programs,), NUM_PROGRAMS=programs)


def launch_into(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Check what TMA needs (`check_tma`: once per key, an operand's aligned start on every call),
    then launch into c (any of these may be views)."""
    m, k = a.shape
    key, plan = checked_plan(_CALLS, a, b, c, cfg, _plan)
    _CALLS.launch(
        key, plan.grid, (*plan.descriptors(a, b, c), m, b.shape[1], k), plan.constexprs,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return c


@register_variant("persistent_tma", config_space="persistent_tma")
def persistent_tma(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Persistent grid (one program per SM) in GROUP_SIZE_M order, TMA loads and stores (Hopper)."""
    m, n, _ = check_operands(a, b, cfg)
    return launch_into(a, b, torch.empty((m, n), device=a.device, dtype=a.dtype), cfg)


@binds("persistent_tma")
def _bind(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback) -> BoundCall | None:
    """`persistent_tma` at cfg for operands like a and b (kernels.launching.bound_launch)."""
    return bind_tma(_CALLS, a, b, cfg, fallback)


def bind_tma(calls: DirectCalls, a, b, cfg: MatmulConfig, fallback, operands=None) -> BoundCall | None:
    """A TMA kernel launched by `calls` into a fresh (M, N) C, bound to operands like a and b: its compiled
    kernel and plan held (`compiled_tma`), each call's descriptors its plan's templates over the call's
    tensors, then what `operands(plan)` adds after them (a workspace: `kernels.splitk_tma`), M, N, K
    and the constexprs. None where `compiled_tma` finds none."""
    shape = (a.shape[0], b.shape[1])
    compiled = compiled_tma(calls, a, b, torch.empty(shape, device=a.device, dtype=a.dtype), cfg)
    if compiled is None:
        return None
    (runner, tail), plan = compiled
    leading = plan.descriptors if operands is None else operands(plan)
    return BoundCall(runner, leading, tail, shape, a.device, a.dtype, fallback)


def compiled_tma(calls: DirectCalls, a, b, c, cfg: MatmulConfig) -> tuple[tuple, TmaPlan] | None:
    """((the compiled runner, its arguments after the leading ones: M, N, K, constexprs), the plan) that
    `calls` keeps for a launch over operands like a and b into a C like c; None where the key was never
    compiled or an operand starts off TMA's 16 bytes."""
    key = tma_key(a, b, c, cfg)
    known, plan = calls.compiled(key), calls.plans.get(key)
    if known is None or plan is None or misaligned(a, b, c):
        return None
    runner, constexprs = known
    (m, k), n = a.shape, b.shape[1]
    return (runner, (m, n, k, *constexprs)), plan


def padded(t: torch.Tensor) -> torch.Tensor:
    """t itself if TMA can describe it, else a copy with rows 128 bytes apart (same shape and values).

    The padding columns are never read: the descriptor's shape is the logical one, and the
    hardware fills what lies past it with zeros.
    """
    return t if tma_describable(t) else pitched_copy(t)


def tma_output(m: int, n: int, like: torch.Tensor) -> torch.Tensor:
    """C for TMA stores: contiguous where its rows are 16-byte aligned (no view to hand back), else
    `aligned_rows` (an (M, N) view of rows 128 bytes apart)."""
    if (n * like.element_size()) % TMA_ALIGN_BYTES == 0:
        return torch.empty((m, n), device=like.device, dtype=like.dtype)
    return aligned_rows(m, n, like=like)


@register_variant("persistent_tma_pad", config_space="persistent_tma_pad")
def persistent_tma_pad(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """persistent_tma for odd sizes: unaligned operands copied to aligned rows, C padded where N is odd."""
    m, n, _ = check_operands(a, b, cfg)
    return launch_into(padded(a), padded(b), tma_output(m, n, like=a), cfg)


class BoundPadded:
    """A padding TMA launcher bound to a problem (kernels.launching.bound_launch): each call makes the
    copies its launcher makes (`pitched_copy` of an operand TMA cannot describe, as found at binding)
    and C as its launcher does (`tma_output`), then calls each of `launches`, (compiled runner, its
    leading arguments from operands, the rest as Triton was first given them), over its part of them:
    `parts(a, b, c)`, the whole for `persistent_tma_pad` (`whole`), both bands' views for
    `persistent_tma_bands`. A call whose uncopied operand starts off 16 bytes, or one made while the
    farm compiles ahead, goes to `fallback` (the launcher)."""

    __slots__ = ("copy_a", "copy_b", "fallback", "launches", "parts", "shape")

    def __init__(self, launches, parts, copy_a: bool, copy_b: bool, shape, fallback) -> None:
        self.launches, self.parts, self.copy_a, self.copy_b = launches, parts, copy_a, copy_b
        self.shape, self.fallback = shape, fallback

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if COMPILE_ONLY.get():
            return self.fallback(a, b)
        a_in = pitched_copy(a) if self.copy_a else a
        b_in = pitched_copy(b) if self.copy_b else b
        c = tma_output(*self.shape, like=a)
        if misaligned(a_in, b_in, c):  # an uncopied operand off 16 bytes (copies and C start aligned)
            return self.fallback(a, b)
        for (runner, leading, tail), operands in zip(self.launches, self.parts(a_in, b_in, c)):
            runner(*leading(*operands), *tail)
        return c


def whole(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[tuple, ...]:
    """One launch's operands: all of them (`BoundPadded.parts`)."""
    return ((a, b, c),)


@binds("persistent_tma_pad")
def bind_padded(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback) -> BoundPadded | None:
    """`persistent_tma_pad` at cfg for operands like a and b: the copies' layouts (`aligned_rows`, nothing
    copied) and C's, its compiled kernel and plan for them (`compiled_tma`); None where not compiled."""
    m, n = a.shape[0], b.shape[1]
    a_in, b_in = padded_layout(a), padded_layout(b)
    compiled = compiled_tma(_CALLS, a_in, b_in, tma_output(m, n, like=a), cfg)
    if compiled is None:
        return None
    (runner, tail), plan = compiled
    launches = ((runner, plan.descriptors, tail),)
    return BoundPadded(launches, whole, a_in is not a, b_in is not b, (m, n), fallback)


def compiled_persistent(a, b, c, cfg: MatmulConfig) -> tuple[tuple, TmaPlan] | None:
    """`compiled_tma` of the kernel `launch_into` launches, for operands like a, b and c."""
    return compiled_tma(_CALLS, a, b, c, cfg)


def padded_layout(t: torch.Tensor) -> torch.Tensor:
    """t itself where TMA can describe it, else an uninitialised tensor laid out as `padded`'s copy (a
    binding's key needs the copy's strides, not its values)."""
    return t if tma_describable(t) else aligned_rows(*t.shape, like=t)
