"""bench/probes/tile192.py's 128x192 kernel (three 64-wide accumulators, or a 128- and a 64-wide one)
computes every tile, a partial last column of tiles included: its timings mean something only then."""

import pytest
import torch

from bench.probes.tile192 import tile192


@pytest.mark.parametrize("wide", [False, True], ids=["3x16", "32+16"])
@pytest.mark.parametrize(("m", "n", "k"), [(64, 96, 64), (40, 104, 48)], ids=["whole-tiles", "ragged"])
def test_every_tile_is_computed(device, m, n, k, wide):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn((m, k), generator=gen).to(torch.float16).to(device)
    b = torch.randn((k, n), generator=gen).to(torch.float16).to(device)
    c = torch.full(
        (m, n), float("nan"), dtype=torch.float16, device=device
    )  # a tile left unwritten stays NaN
    tile192(a, b, c, bm=16, sub=16, bk=16, warps=4, stages=2, group=2, wide=wide, programs=3)
    ref = a.float() @ b.float()
    # fp16 outputs of magnitude up to ~30: half an ulp there is 0.008; a wrong or missing tile is O(1) off
    assert torch.allclose(c.float(), ref, atol=0.02, rtol=2e-3)
