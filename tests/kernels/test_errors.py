"""Bad input is refused with a clear error before anything launches."""

import pytest
import torch

import kernels
import kernels.grouped
from kernels import ConfigError, MatmulConfig, UnknownVariantError, get_variant, variant_names

BUILT_INS = [
    "cublas",
    "grouped",
    "persistent_tma",
    "splitk",
    "splitk_det",
    "streamk",
    "streamk_hybrid",
    "tiled",
]


def test_unknown_variant_names_the_known_ones():
    with pytest.raises(UnknownVariantError) as err:
        get_variant("strassen")
    assert str(err.value) == f"unknown variant 'strassen'; known: {', '.join(variant_names())}"
    assert set(BUILT_INS) <= set(variant_names())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"block_m": 48}, "block_m=48: block sizes must be powers of two", id="block-not-pow2"),
        pytest.param(
            {"block_k": 8}, "block_k=8: block sizes must be powers of two in [16, 512]", id="block-too-small"
        ),
        pytest.param({"split_k": 0}, "split_k=0: must be >= 1", id="split-k-zero"),
        pytest.param({"group_m": -1}, "group_m=-1: must be >= 1", id="group-negative"),
        pytest.param({"num_warps": 3}, "num_warps=3: must be a power of two", id="warps-not-pow2"),
        pytest.param({"num_stages": 0}, "num_stages=0: must be >= 1", id="stages-zero"),
        pytest.param({"input_precision": "fp8"}, "input_precision='fp8'", id="unknown-precision"),
        pytest.param({"block_n": 64.0}, "block_n must be an integer", id="float-block"),
    ],
)
def test_impossible_configs_are_refused(fields, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        MatmulConfig(**fields)


def _operands(device):
    return torch.randn(10, 20, device=device), torch.randn(20, 6, device=device)


BAD_OPERANDS = [
    pytest.param(
        lambda a, b: (a, torch.randn(30, 6)),
        ValueError,
        "inner dimensions differ: a is 10x20, b is 30x6",
        id="inner-dims",
    ),
    pytest.param(lambda a, b: (a.half(), b), TypeError, "must share a dtype", id="dtypes-differ"),
    pytest.param(
        lambda a, b: (a.double(), b.double()), TypeError, "unsupported dtype torch.float64", id="float64"
    ),
    pytest.param(
        lambda a, b: (a, b.to("meta")), ValueError, "different devices: cpu and meta", id="devices-differ"
    ),
    pytest.param(lambda a, b: (a[None], b), ValueError, "must be 2-D", id="3d"),
    pytest.param(lambda a, b: (a[:0], b), ValueError, "empty matmul", id="empty"),
    pytest.param(lambda a, b: (a.numpy(), b), TypeError, "must be tensors", id="numpy"),
]


@pytest.mark.parametrize(("make", "error", "message"), BAD_OPERANDS)
@pytest.mark.parametrize("variant", BUILT_INS)
def test_bad_operands_are_refused(variant, make, error, message):
    a, b = make(*_operands("cpu"))
    cfg = MatmulConfig() if variant != "cublas" else kernels.LIBRARY_CONFIG
    with pytest.raises(error, match=message):
        get_variant(variant).launch(a, b, cfg)


def test_tf32_on_bf16_inputs_is_refused():
    a, b = (t.bfloat16() for t in _operands("cpu"))
    with pytest.raises(ValueError, match="applies to float32 inputs"):
        get_variant("tiled").launch(a, b, MatmulConfig(input_precision="tf32"))


def test_errors_come_before_the_launch(monkeypatch):
    class NoLaunch:
        def __getitem__(self, grid):
            raise AssertionError("launched despite bad operands")

    monkeypatch.setattr(kernels.grouped, "_grouped_kernel", NoLaunch())
    a, b = _operands("cpu")
    with pytest.raises(ValueError, match="inner dimensions differ"):
        get_variant("grouped").launch(a, b.t(), MatmulConfig())
