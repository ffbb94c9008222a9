"""bench/probes/splitk_clusters.py's launch: `splitk_tma_reduce`'s kernel through Triton's JIT path with
num_ctas (the interpreter runs one CTA a program; on a GPU Triton splits the tile over the cluster).
Checked here so a visit does not spend device time on an argument out of place."""

import torch

from bench.probes.splitk_clusters import reduce_in_clusters
from kernels import MatmulConfig


def test_the_cluster_launch_sums_every_split_of_every_tile(device):
    gen = torch.Generator().manual_seed(3)
    a = torch.randn((40, 96), generator=gen).to(torch.bfloat16).to(device)  # ragged M: 3 tile rows
    b = torch.randn((96, 48), generator=gen).to(torch.bfloat16).to(device)
    cfg = MatmulConfig(16, 32, 16, split_k=3, num_warps=4, num_stages=2)
    c = reduce_in_clusters(a, b, cfg, ctas=2)
    ref = a.float() @ b.float()
    # bf16 outputs up to ~30: half an ulp there is 0.06; a chunk of 32 K missed or doubled is O(5) off
    assert c.dtype == torch.bfloat16 and torch.allclose(c.float(), ref, atol=0.12, rtol=8e-3)
