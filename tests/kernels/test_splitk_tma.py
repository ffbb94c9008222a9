"""splitk_tma: split-K through TMA, the last program of each tile summing the partials in order;
splitk_tma_reduce: the same kernel's partials summed in order by a second kernel; splitk_tma_cluster:
that, each program a cluster of two CTAs (one program under the interpreter, which ignores num_ctas:
the clusters themselves are checked on the H200, docs/perf-notes.md visit 101).

Under the interpreter programs run one after another, so the last program of a tile is always its
highest split; on a GPU any may be. Either way the sum is over the slots in the order 0..SPLIT_K-1.
"""

import pytest
import torch

from kernels import MatmulConfig, check_accuracy, get_variant, reference_matmul
from kernels.config import ConfigError
from kernels.persistent_tma import TmaUnsupported
from kernels.scratch import scratch_is_zeroed
from kernels.space import SPACES, Problem

DTYPES = [
    pytest.param(dt, id=str(dt).removeprefix("torch."))
    for dt in (torch.float16, torch.bfloat16, torch.float32)
]
CFG = MatmulConfig(block_m=16, block_n=32, block_k=16, group_m=1, num_warps=4, num_stages=2)
VARIANTS = ["splitk_tma", "splitk_tma_reduce", "splitk_tma_cluster"]


def _random(shape, dtype, device, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen).to(dtype).to(device)


def _launch(a, b, cfg, variant="splitk_tma"):
    c = get_variant(variant).launch(a, b, cfg)
    acc = check_accuracy(c, reference_matmul(a, b), a.dtype, a.shape[1])
    assert c.shape == (a.shape[0], b.shape[1]) and c.dtype == a.dtype
    assert acc.ok, f"rel_err {acc.rel_err:.3g} > tolerance {acc.tolerance:.3g}"
    return c


# Ragged but TMA-legal sizes (N and K multiples of 8); K = 200 in 16-wide K tiles is 13 of them:
# split 3 gives chunks of 5, 5 and 3 tiles, the last clipped at K.
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("split_k", [1, 2, 3, 4])
@pytest.mark.parametrize(("m", "n", "k"), [(16, 56, 200), (37, 40, 104), (5, 72, 48)])
def test_splitk_tma_matches_fp64(device, m, n, k, dtype, split_k):
    a, b = _random((m, k), dtype, device, 1), _random((k, n), dtype, device, 2)
    _launch(a, b, CFG.replace(split_k=split_k))


# Ragged M and N (37 x 40 in 16x32 tiles: the reduce's slices are M x N, not whole tiles) and a
# split of 3 over 13 K tiles; bf16 and fp32 outputs.
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bfloat16", "float32"])
@pytest.mark.parametrize(
    ("variant", "split_k"), [("splitk_tma_reduce", 1), ("splitk_tma_reduce", 3), ("splitk_tma_cluster", 3)]
)
def test_splitk_tma_reduce_matches_fp64(device, dtype, variant, split_k):
    a, b = _random((37, 200), dtype, device, 1), _random((200, 40), dtype, device, 2)
    _launch(a, b, CFG.replace(split_k=split_k), variant)


def test_splitk_tma_cluster_refuses_an_unsplit_k_and_shares_its_stages_between_ctas():
    """Split 1 would store a whole tile through TMA from a cluster, which computed wrong (visit 101): the
    launcher refuses it and the space holds none. 6 stages of 128x256x64 bf16 fit two CTAs (196,608 B
    each), not one (294,912 with C staged); 8 stages did not fit two (Triton asked 262,208, visit 102)."""
    a, b = torch.ones((16, 32)), torch.ones((32, 32))
    with pytest.raises(ConfigError, match="split_k >= 2"):
        get_variant("splitk_tma_cluster").launch(a, b, CFG)
    problem = Problem(512, 512, 32768, "bfloat16")
    kept = SPACES["splitk_tma_cluster"].configs(problem)
    assert kept and min(c.split_k for c in kept) == 2
    deep = MatmulConfig(128, 256, 64, split_k=8, num_warps=8, num_stages=6)
    assert deep in kept
    assert "shared memory" in SPACES["splitk_tma"].prune(deep, problem)
    assert "shared memory" in SPACES["splitk_tma_cluster"].prune(deep.replace(num_stages=8), problem)


@pytest.mark.parametrize("variant", VARIANTS)
def test_splitk_tma_sums_every_split_of_every_tile(device, variant):
    """Each split's K chunk holds a different constant block of A: a partial lost, doubled, or
    added to another tile moves whole columns of C by exact integers."""
    m, n, k, split = 32, 64, 64, 4  # 2 x 2 tiles of 16x32, four 16-wide chunks each
    a = torch.zeros((m, k), dtype=torch.float32)
    for s in range(split):
        a[:, s * 16 : (s + 1) * 16] = 10.0**s  # chunk s adds 16 * 10^s * (column sums of its B rows)
    a[16:] *= 2  # the second tile row differs from the first
    b = torch.ones((k, n), dtype=torch.float32)
    c = get_variant(variant).launch(a.to(device), b.to(device), CFG.replace(split_k=split))
    expected = torch.full((m, n), 16.0 * 1111.0)
    expected[16:] *= 2
    assert torch.equal(c.cpu(), expected)


def test_splitk_tma_leaves_its_counters_zeroed_and_repeats_bit_for_bit(device):
    a, b = _random((48, 96), torch.bfloat16, device, 3), _random((96, 64), torch.bfloat16, device, 4)
    cfg = CFG.replace(split_k=3)
    first = _launch(a, b, cfg)
    assert scratch_is_zeroed()
    assert torch.equal(get_variant("splitk_tma").launch(a, b, cfg), first)


@pytest.mark.parametrize("variant", VARIANTS)
def test_splitk_tma_handles_an_empty_last_split(device, variant):
    """K = 40 in 16-wide tiles split 4: chunks of one tile start at 0, 16, 32 and 48 (past K). The
    rules keep such configs out of sweeps; the kernel must still count the empty split (summed
    apart, it writes zeros into its slice: the workspace comes uncleared from the allocator)."""
    a, b = _random((16, 40), torch.float16, device, 5), _random((40, 32), torch.float16, device, 6)
    _launch(a, b, CFG.replace(split_k=4), variant)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layout", ["a-column-major", "b-column-major"])
def test_splitk_tma_reads_either_orientation(device, layout, variant):
    if layout == "a-column-major":
        a, b = _random((48, 40), torch.bfloat16, device, 7).t(), _random((48, 56), torch.bfloat16, device, 8)
    else:
        a, b = _random((40, 48), torch.bfloat16, device, 7), _random((56, 48), torch.bfloat16, device, 8).t()
    if variant == "splitk_tma_cluster" and layout == "a-column-major":  # failed in clusters (visit 102)
        with pytest.raises(TmaUnsupported, match="row-major A"):
            get_variant(variant).launch(a, b, CFG.replace(split_k=2))
        return
    _launch(a, b, CFG.replace(split_k=2), variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_splitk_tma_refuses_unaligned_rows(device, variant):
    a, b = _random((16, 48), torch.bfloat16, device, 9), _random((48, 50), torch.bfloat16, device, 10)
    with pytest.raises(TmaUnsupported, match="leading stride of 50"):
        get_variant(variant).launch(a, b, CFG.replace(split_k=2))


def test_splitk_tma_space_serves_decode_rows_that_no_other_space_does():
    """At M = 16 every other Triton space's blocks are too tall (`blocks_fit_problem`)."""
    decode = Problem(16, 4096, 4096, "bfloat16")
    kept = SPACES["splitk_tma"].configs(decode)
    assert kept and {c.block_m for c in kept} == {16}
    assert {c.split_k for c in kept} == {1, 2, 4, 8, 16}
    for name in ("tiled", "grouped", "splitk", "persistent_tma"):
        assert not SPACES[name].configs(decode), name
    # a whole C tile is staged for the store: 128x256x128 in 3 stages needs 294,912 B with it
    big = MatmulConfig(128, 256, 128, num_warps=8, num_stages=3)
    assert "shared memory" in SPACES["splitk_tma"].prune(big, Problem(4096, 4096, 4096, "bfloat16"))
