"""Every variant computes A @ B within the per-dtype tolerance on ragged shapes and layouts."""

import pytest
import torch

from kernels import LIBRARY_CONFIG, MatmulConfig, check_accuracy, get_variant, reference_matmul, tolerance
from kernels.scratch import scratch_is_zeroed

DTYPES = [
    pytest.param(dt, id=str(dt).removeprefix("torch."))
    for dt in (torch.float16, torch.bfloat16, torch.float32)
]

# One small config per variant: 16-32 element blocks keep the interpreter fast.
CONFIGS = {
    "tiled": MatmulConfig(block_m=16, block_n=32, block_k=16, num_warps=4, num_stages=2),
    "grouped": MatmulConfig(block_m=16, block_n=16, block_k=32, group_m=3, num_warps=4, num_stages=2),
    "grouped_pad": MatmulConfig(block_m=16, block_n=32, block_k=16, group_m=3, num_warps=4, num_stages=2),
    "splitk": MatmulConfig(
        block_m=32, block_n=16, block_k=16, group_m=2, split_k=3, num_warps=4, num_stages=2
    ),
    "splitk_det": MatmulConfig(block_m=16, block_n=32, block_k=16, split_k=4, num_warps=4, num_stages=2),
    "streamk": MatmulConfig(block_m=32, block_n=16, block_k=16, group_m=2, num_warps=4, num_stages=2),
    # 16x16 tiles: 12-72 tiles on the interpreter's 4 programs, so both the data-parallel waves and
    # the shared last wave run.
    "streamk_hybrid": MatmulConfig(block_m=16, block_n=16, block_k=16, group_m=2, num_warps=4, num_stages=2),
    "cublas": LIBRARY_CONFIG,
}
VARIANTS = list(CONFIGS)

# Ragged (M, N, K): nothing a multiple of the blocks, M != N, one K shorter than a block.
SHAPES = [
    pytest.param(37, 50, 200, id="37x50x200"),
    pytest.param(100, 70, 41, id="100x70x41"),
    pytest.param(17, 129, 10, id="17x129x10"),
    pytest.param(130, 33, 96, id="130x33x96"),
]


def _random(shape, dtype, device, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen).to(dtype).to(device)


def _assert_close(c, a, b, cfg):
    acc = check_accuracy(c, reference_matmul(a, b), a.dtype, a.shape[1], cfg.input_precision)
    assert c.shape == (a.shape[0], b.shape[1])
    assert c.dtype == a.dtype
    assert acc.ok, f"rel_err {acc.rel_err:.3g} > tolerance {acc.tolerance:.3g}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("m", "n", "k"), SHAPES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_matches_fp64_reference(device, variant, m, n, k, dtype):
    a, b = _random((m, k), dtype, device, 1), _random((k, n), dtype, device, 2)
    cfg = CONFIGS[variant]
    _assert_close(get_variant(variant).launch(a, b, cfg), a, b, cfg)
    assert scratch_is_zeroed()  # the summing variants leave their slots and counters for the next call


# The split-K edges: chunk 64 with a partial last tile; short and empty chunks; two iterations.
SPLIT_CASES = [
    pytest.param(200, 4, 32, id="K200-s4-bk32-partial-tile"),
    pytest.param(40, 4, 16, id="K40-s4-short-and-empty"),
    pytest.param(10, 4, 16, id="K10-s4-empty-chunks"),
    pytest.param(256, 4, 32, id="K256-s4-bk32-two-iterations"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("k", "split_k", "block_k"), SPLIT_CASES)
@pytest.mark.parametrize("variant", ["splitk", "splitk_det"])
def test_split_k_edges(device, variant, k, split_k, block_k, dtype):
    m, n = 37, 50
    a, b = _random((m, k), dtype, device, 3), _random((k, n), dtype, device, 4)
    cfg = MatmulConfig(block_m=16, block_n=32, block_k=block_k, split_k=split_k, num_warps=4, num_stages=2)
    _assert_close(get_variant(variant).launch(a, b, cfg), a, b, cfg)


LAYOUTS = {
    "a-transposed": lambda m, n, k, dt, dev: (_random((k, m), dt, dev, 5).t(), _random((k, n), dt, dev, 6)),
    "b-transposed": lambda m, n, k, dt, dev: (_random((m, k), dt, dev, 5), _random((n, k), dt, dev, 6).t()),
    "both-strided": lambda m, n, k, dt, dev: (
        _random((m, 2 * k), dt, dev, 5)[:, ::2],
        _random((k, 3 * n), dt, dev, 6)[:, 1::3],
    ),
}


@pytest.mark.parametrize("dtype", [DTYPES[1], DTYPES[2]])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("variant", VARIANTS)
def test_transposed_and_non_contiguous_inputs(device, variant, layout, dtype):
    a, b = LAYOUTS[layout](45, 38, 70, dtype, device)
    assert not (a.is_contiguous() and b.is_contiguous())
    cfg = CONFIGS[variant]
    _assert_close(get_variant(variant).launch(a, b, cfg), a, b, cfg)


@pytest.mark.parametrize("precision", ["ieee", "tf32"])
def test_fp32_input_precision_is_a_config_choice(device, precision):
    a, b = _random((40, 24), torch.float32, device, 7), _random((24, 33), torch.float32, device, 8)
    cfg = CONFIGS["grouped"].replace(input_precision=precision)
    _assert_close(get_variant("grouped").launch(a, b, cfg), a, b, cfg)
    assert tolerance(torch.float32, 24, precision) == pytest.approx(
        2 * 2.0**-11 * (precision == "tf32") + 16 * 24**0.5 * 2.0**-24
    )


def test_splitk_det_is_bitwise_reproducible(device):
    a, b = _random((37, 300), torch.bfloat16, device, 9), _random((300, 50), torch.bfloat16, device, 10)
    cfg = CONFIGS["splitk_det"]
    first = get_variant("splitk_det").launch(a, b, cfg)
    assert all(torch.equal(first, get_variant("splitk_det").launch(a, b, cfg)) for _ in range(2))
