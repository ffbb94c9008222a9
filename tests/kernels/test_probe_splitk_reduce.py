"""bench/probes/splitk_reduce.py's split-K (partials into a workspace, then splitk_det's fixed-order
reduce): every tile and every K chunk counted once, ragged edges and an empty last chunk included."""

import pytest
import torch

from bench.probes.splitk_reduce import split_then_reduce
from kernels import MatmulConfig


@pytest.mark.parametrize(
    ("m", "n", "k", "split"),
    [
        (32, 48, 128, 2),
        (40, 56, 96, 3),
        (16, 16, 80, 4),
    ],  # whole tiles; ragged M and N; K = 80 in 4 chunks of 32: the last empty
    ids=["whole", "ragged", "empty-chunk"],
)
def test_every_tile_and_chunk_counted_once(device, m, n, k, split):
    gen = torch.Generator().manual_seed(1)
    a = torch.randn((m, k), generator=gen).to(torch.float16).to(device)
    b = torch.randn((k, n), generator=gen).to(torch.float16).to(device)
    cfg = MatmulConfig(16, 16, 16, split_k=split, num_warps=4, num_stages=2)
    c = split_then_reduce(a, b, cfg)
    ref = a.float() @ b.float()
    # fp16 outputs up to ~40: half an ulp there is 0.016; a chunk counted twice or missed is O(1) off
    assert c.dtype == torch.float16 and torch.allclose(c.float(), ref, atol=0.04, rtol=2e-3)
