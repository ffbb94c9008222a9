"""The split-K reduce (`splitk_det.reduce_splits`): the slices summed in order 0..SPLIT_K-1, bit for bit,
on both of its grids (narrow programs up to REDUCE_NARROW_MAX_OUTPUTS outputs, wide ones past it)."""

import pytest
import torch

import kernels.splitk_det as kd


@pytest.mark.parametrize(
    ("splits", "m", "n"),
    [
        pytest.param(16, 256, 256, id="narrow"),  # 512 programs of 128
        pytest.param(3, 100, 100, id="narrow-ragged"),  # 10,000 outputs: 79 programs, the last masked
        pytest.param(2, 1025, 1024, id="wide"),  # 1,049,600 outputs: 1025 programs of 1024
    ],
)
def test_reduce_sums_the_slices_in_order_on_either_grid(device, monkeypatch, splits, m, n):
    grids = []
    real = kd._REDUCE.launch

    def record(key, grid, args, constexprs, **options):
        grids.append((grid, constexprs["BLOCK"], options["num_warps"]))
        return real(key, grid, args, constexprs, **options)

    monkeypatch.setattr(kd._REDUCE, "launch", record)
    gen = torch.Generator().manual_seed(splits)
    ws = torch.randn((splits, m, n), generator=gen).to(device)
    c = kd.reduce_splits(ws, torch.empty((m, n), dtype=torch.bfloat16, device=device))
    want = torch.zeros((m, n), device=device)
    for s in range(splits):  # the kernel's order: ((0 + s0) + s1) + ...
        want = want + ws[s]
    assert torch.equal(c, want.to(torch.bfloat16))
    block, warps = kd.REDUCE_NARROW if m * n <= kd.REDUCE_NARROW_MAX_OUTPUTS else kd.REDUCE_WIDE
    assert grids == [((-(-m * n // block),), block, warps)]
