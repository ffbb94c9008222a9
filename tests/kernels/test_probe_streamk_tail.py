"""bench/probes/streamk_tail.py's stream-K kernel computes every tile once, whatever the programs' shares
cut: a tile whole in one program, split between two, or among four (its pieces summed by the last
arriver); and beside a main band through `persistent_tma`. Its timings mean something only then."""

import pytest
import torch

from bench.probes.streamk_tail import bands_streamk, streamk_tma_into
from kernels import MatmulConfig

TILE = MatmulConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=4, num_stages=2)


def _operands(m, n, k, device):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn((m, k), generator=gen).to(torch.float16).to(device)
    return a, torch.randn((k, n), generator=gen).to(torch.float16).to(device)


def _close(c, a, b) -> bool:
    # fp16 outputs of magnitude up to ~40: half an ulp there is 0.016; a tile missing (NaN), summed twice
    # or short of a piece is O(1) off
    return torch.allclose(c.float(), a.float() @ b.float(), atol=0.05, rtol=2e-3)


@pytest.mark.parametrize(
    ("m", "n", "k", "programs"),
    [
        pytest.param(40, 64, 96, 5, id="two-owners"),
        pytest.param(64, 64, 32, 9, id="more-programs-than-tiles"),
        pytest.param(16, 16, 160, 4, id="one-tile-four-owners"),
        pytest.param(32, 32, 64, 2, id="whole-tiles"),
    ],
)
def test_every_tile_is_summed_once(device, m, n, k, programs):
    a, b = _operands(m, n, k, device)
    c = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    assert _close(streamk_tma_into(a, b, c, TILE, programs), a, b)


@pytest.mark.parametrize("axis", ["m", "n"])
def test_the_tail_beside_a_main_band(device, axis):
    a, b = _operands(80, 96, 64, device)
    main = MatmulConfig(block_m=32, block_n=32, block_k=16, group_m=2, num_warps=4, num_stages=2)
    assert _close(bands_streamk(a, b, main, TILE, axis, 64, programs=3), a, b)
