"""The accuracy check rejects the faults it exists to catch: each is planted in a real launch.

Each case runs the fault and a control (the same launch done right) so the test shows the check
tells the two apart, not merely that something is large.
"""

import math

import pytest
import torch
import triton

from kernels import MatmulConfig, check_accuracy, reference_matmul
from kernels.splitk import launch_split
from kernels.tiled import _tiled_kernel

M, N, K = 37, 50, 200
CFG = MatmulConfig(block_m=16, block_n=16, block_k=32, num_warps=4, num_stages=2)
DTYPES = [
    pytest.param(dt, id=str(dt).removeprefix("torch."))
    for dt in (torch.float16, torch.bfloat16, torch.float32)
]


def _random(shape, dtype, device, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen).to(dtype).to(device)


def _launch_tiled(a, b, c, k, grid_m):
    _tiled_kernel[(grid_m, triton.cdiv(N, CFG.block_n))](
        a,
        b,
        c,
        M,
        N,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        BLOCK_M=CFG.block_m,
        BLOCK_N=CFG.block_n,
        BLOCK_K=CFG.block_k,
        INPUT_PRECISION="ieee",
    )


def _check(c, a, b):
    return check_accuracy(c, reference_matmul(a, b), a.dtype, a.shape[1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fill", [math.nan, 0.0], ids=["nan-poisoned", "zero-filled"])
def test_dropped_partial_tile_is_rejected(device, dtype, fill):
    a, b = _random((M, K), dtype, device, 1), _random((K, N), dtype, device, 2)
    rows = triton.cdiv(M, CFG.block_m)  # 3 tile rows; the last holds rows 32..36 only
    dropped = torch.full((M, N), fill, dtype=dtype, device=device)
    _launch_tiled(a, b, dropped, K, grid_m=rows - 1)
    control = torch.full((M, N), fill, dtype=dtype, device=device)
    _launch_tiled(a, b, control, K, grid_m=rows)
    assert _check(control, a, b).ok
    assert not _check(dropped, a, b).ok


@pytest.mark.parametrize("dtype", DTYPES)
def test_missing_k_mask_is_rejected(device, dtype):
    # A kernel without the K mask reads the whole last BLOCK_K tile: columns 200..223 of the rows'
    # memory. Plant it by telling the kernel K=224 over views whose next 24 columns hold other data.
    k_padded = triton.cdiv(K, CFG.block_k) * CFG.block_k
    a = _random((M, k_padded), dtype, device, 3)[:, :K]
    b = _random((k_padded, N), dtype, device, 4)[:K]
    b_padded = b.as_strided((k_padded, N), b.stride())
    unmasked = torch.empty((M, N), dtype=dtype, device=device)
    _launch_tiled(a, b_padded, unmasked, k_padded, grid_m=triton.cdiv(M, CFG.block_m))
    control = torch.empty((M, N), dtype=dtype, device=device)
    _launch_tiled(a, b, control, K, grid_m=triton.cdiv(M, CFG.block_m))
    assert _check(control, a, b).ok
    assert not _check(unmasked, a, b).ok


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("initial", ["nan", "stale"], ids=["nan-poisoned", "stale-result"])
def test_split_k_over_unzeroed_slots_is_rejected(device, dtype, initial):
    """split-K sums into slots its kernel leaves zeroed (`kernels.scratch`); slots a faulty launch left
    dirty hold NaN or a previous tile's sum, which the check must see in the result."""
    a, b = _random((M, K), dtype, device, 5), _random((K, N), dtype, device, 6)
    cfg = CFG.replace(split_k=4)
    tiles = triton.cdiv(M, cfg.block_m) * triton.cdiv(N, cfg.block_n)
    slots = tiles * cfg.block_m * cfg.block_n
    start = torch.full((slots,), math.nan) if initial == "nan" else _random((slots,), torch.float32, "cpu", 7)
    counters = torch.zeros(tiles, dtype=torch.int32, device=device)
    dirty = torch.empty((M, N), dtype=dtype, device=device)
    launch_split(a, b, dirty, cfg, atomic=True, scratch=(start.to(device), counters))
    assert not bool(counters.any())  # every tile's last chunk came, and reset its counter
    zeroed = torch.empty((M, N), dtype=dtype, device=device)
    launch_split(a, b, zeroed, cfg, atomic=True, scratch=(torch.zeros(slots, device=device), counters))
    assert _check(zeroed, a, b).ok
    assert not _check(dirty, a, b).ok


@pytest.mark.parametrize("stale", [False, True], ids=["zeroed-counters", "stale-counters"])
def test_split_k_over_stale_counters_is_rejected(device, stale):
    """A counter a launch did not reset holds SPLIT_K: no chunk of its tile sees itself last, the tile
    is never stored, and the NaN the output started with shows."""
    a, b = _random((M, K), torch.float16, device, 5), _random((K, N), torch.float16, device, 6)
    cfg = CFG.replace(split_k=4)
    tiles = triton.cdiv(M, cfg.block_m) * triton.cdiv(N, cfg.block_n)
    counters = torch.zeros(tiles, dtype=torch.int32, device=device)
    counters[tiles // 2] = cfg.split_k if stale else 0
    c = torch.full((M, N), math.nan, dtype=torch.float16, device=device)
    slots = torch.zeros(tiles * cfg.block_m * cfg.block_n, device=device)
    launch_split(a, b, c, cfg, atomic=True, scratch=(slots, counters))
    assert _check(c, a, b).ok != stale


def test_swapped_strides_are_rejected(device):
    # Square, non-symmetric A: swapping its strides computes A^T @ B, which only symmetric data hides.
    a, b = _random((K, K), torch.float32, device, 8), _random((K, N), torch.float32, device, 9)
    assert not torch.equal(a, a.t())
    swapped = torch.empty((K, N), device=device)
    _tiled_kernel[(triton.cdiv(K, CFG.block_m), triton.cdiv(N, CFG.block_n))](
        a,
        b,
        swapped,
        K,
        N,
        K,
        a.stride(1),
        a.stride(0),
        b.stride(0),
        b.stride(1),
        swapped.stride(0),
        swapped.stride(1),
        BLOCK_M=CFG.block_m,
        BLOCK_N=CFG.block_n,
        BLOCK_K=CFG.block_k,
        INPUT_PRECISION="ieee",
    )
    assert not _check(swapped, a, b).ok
    assert _check(swapped, a.t(), b).ok
