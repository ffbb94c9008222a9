"""persistent_tma (TMA descriptors; Triton 3.9's interpreter emulates host descriptors),
streamk_hybrid's shared-tile fixup, and the strides and row-alignment hint the pointer kernels
rely on (`pointer_layout`)."""

import math

import pytest
import torch
import triton

from kernels import MatmulConfig, check_accuracy, get_variant, reference_matmul
from kernels.persistent_tma import TmaUnsupported, tma_device_error
from kernels.space import Problem, tma_box_fits, tma_needs_padding, tma_strides_aligned
from kernels.streamk_hybrid import _streamk_hybrid_kernel, hybrid_split
from kernels.tile import pointer_layout

DTYPES = [
    pytest.param(dt, id=str(dt).removeprefix("torch."))
    for dt in (torch.float16, torch.bfloat16, torch.float32)
]
TMA_CFG = MatmulConfig(block_m=16, block_n=32, block_k=16, group_m=2, num_warps=4, num_stages=2)
# Ragged but TMA-legal: N and K multiples of 8 (16 bytes in fp16/bf16), none a multiple of the
# blocks; 2-14 tiles on the interpreter's 4 programs, so programs walk several tiles.
TMA_SHAPES = [
    pytest.param(37, 56, 200, id="37x56x200"),
    pytest.param(100, 40, 24, id="100x40x24"),
    pytest.param(17, 136, 40, id="17x136x40"),
    pytest.param(1, 64, 8, id="1x64x8-k-under-block"),
    pytest.param(112, 32, 8, id="112x32x8"),
]


def _random(shape, dtype, device, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen).to(dtype).to(device)


def _assert_close(c, a, b):
    acc = check_accuracy(c, reference_matmul(a, b), a.dtype, a.shape[1])
    assert c.shape == (a.shape[0], b.shape[1]) and c.dtype == a.dtype
    assert acc.ok, f"rel_err {acc.rel_err:.3g} > tolerance {acc.tolerance:.3g}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("m", "n", "k"), TMA_SHAPES)
def test_persistent_tma_matches_fp64(device, m, n, k, dtype):
    a, b = _random((m, k), dtype, device, 1), _random((k, n), dtype, device, 2)
    _assert_close(get_variant("persistent_tma").launch(a, b, TMA_CFG), a, b)


TMA_LAYOUTS = {
    "a-column-major": lambda dt, dev: (_random((48, 40), dt, dev, 3).t(), _random((48, 56), dt, dev, 4)),
    "b-column-major": lambda dt, dev: (_random((40, 48), dt, dev, 3), _random((56, 48), dt, dev, 4).t()),
    "both-column-major": lambda dt, dev: (
        _random((48, 40), dt, dev, 3).t(),
        _random((56, 48), dt, dev, 4).t(),
    ),
    "padded-rows": lambda dt, dev: (
        _random((40, 64), dt, dev, 3)[:, :48],
        _random((48, 64), dt, dev, 4)[:, :56],
    ),
}


@pytest.mark.parametrize("layout", list(TMA_LAYOUTS))
def test_persistent_tma_reads_either_orientation(device, layout):
    a, b = TMA_LAYOUTS[layout](torch.bfloat16, device)
    _assert_close(get_variant("persistent_tma").launch(a, b, TMA_CFG), a, b)


ODD = [
    pytest.param((40, 33), (33, 56), "A (40, 33) has a leading stride of 33 elements", id="k-odd"),
    pytest.param((40, 48), (48, 50), "B (48, 50) has a leading stride of 50 elements", id="n-unaligned"),
    pytest.param((40, 48), (48, 48), "block_n=512 > 256", id="box-too-large"),
]


@pytest.mark.parametrize(("a_shape", "b_shape", "message"), ODD)
def test_persistent_tma_refuses_what_tma_cannot_describe(device, a_shape, b_shape, message):
    a, b = _random(a_shape, torch.bfloat16, device, 5), _random(b_shape, torch.bfloat16, device, 6)
    cfg = TMA_CFG.replace(block_n=512) if message.startswith("block_n") else TMA_CFG
    with pytest.raises(TmaUnsupported, match=message.replace("(", r"\(").replace(")", r"\)")):
        get_variant("persistent_tma").launch(a, b, cfg)


# Odd sizes: N = 50 (100 B rows), K = 41, M = 45 with A column-major; fp32 too.
PAD_CASES = [
    pytest.param(37, 50, 200, torch.bfloat16, False, id="n50-bf16"),
    pytest.param(100, 70, 41, torch.float16, False, id="k41-fp16"),
    pytest.param(45, 33, 70, torch.float32, True, id="a-column-major-fp32"),
    pytest.param(37, 56, 200, torch.bfloat16, False, id="aligned-control"),
]


@pytest.mark.parametrize(("m", "n", "k", "dtype", "a_column_major"), PAD_CASES)
def test_persistent_tma_pad_serves_odd_sizes(device, m, n, k, dtype, a_column_major):
    a = _random((k, m), dtype, device, 11).t() if a_column_major else _random((m, k), dtype, device, 11)
    b = _random((k, n), dtype, device, 12)
    c = get_variant("persistent_tma_pad").launch(a, b, TMA_CFG)
    _assert_close(c, a, b)
    if (n * c.element_size()) % 16:  # C's rows start 128 B apart (PAD_PITCH_BYTES), at most one pitch wider
        assert (c.stride(0) * c.element_size()) % 128 == 0 and c.stride(0) - n < 128 // c.element_size()
    else:  # rows TMA can store as they are: C is contiguous
        assert c.is_contiguous()


def test_padding_variant_stays_off_aligned_shapes():
    cfg = MatmulConfig(128, 128, 64)
    assert tma_needs_padding(cfg, Problem(4096, 32001, 4096, torch.bfloat16)) is None
    assert tma_needs_padding(cfg, Problem(3000, 5000, 1000, torch.bfloat16)) == (
        "N and K rows are 16-byte aligned: persistent_tma needs no padding"
    )


def test_bands_are_planned_on_odd_and_aligned_shapes():
    """`persistent_tma_bands` pads what TMA cannot describe, so its space keeps 4097^3, which
    `persistent_tma`'s refuses; on aligned shapes both keep the config."""
    from kernels.space import SPACES

    cfg = MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)
    odd, aligned = Problem(4097, 4097, 4097, "bfloat16"), Problem(4096, 4096, 4096, "bfloat16")
    assert SPACES["persistent_tma_bands"].prune(cfg, odd) is None
    assert "16 B" in SPACES["persistent_tma"].prune(cfg, odd)
    for name in ("persistent_tma_bands", "persistent_tma"):
        assert SPACES[name].prune(cfg, aligned) is None, name


def test_persistent_tma_says_which_gpus_lack_tma(monkeypatch):
    class Ampere:
        get_device_capability = staticmethod(lambda device: (8, 0))
        get_device_name = staticmethod(lambda device: "NVIDIA A100")

    monkeypatch.setattr(torch, "get_device_module", lambda device: Ampere)
    assert tma_device_error(torch.device("meta")) == (
        "persistent_tma needs TMA (compute capability >= 9.0); NVIDIA A100 is 8.0"
    )
    monkeypatch.setattr(Ampere, "get_device_capability", staticmethod(lambda device: (9, 0)))
    assert tma_device_error(torch.device("meta")) is None  # Hopper: control


@pytest.mark.parametrize(
    ("m", "n", "k", "dtype", "reason"),
    [
        pytest.param(3000, 5000, 1000, torch.bfloat16, None, id="3000x5000x1000-bf16-aligned"),
        pytest.param(64, 32001, 4096, torch.bfloat16, "N=32001 x 2 B", id="vocab-32001"),
        pytest.param(64, 4096, 4099, torch.float16, "K=4099 x 2 B", id="k-4099"),
        pytest.param(64, 4100, 4096, torch.float32, None, id="fp32-n-4100-aligned"),
        pytest.param(64, 4100, 4096, torch.bfloat16, "N=4100 x 2 B", id="bf16-n-4100"),
    ],
)
def test_tma_pruning_rule_names_the_unaligned_size(m, n, k, dtype, reason):
    got = tma_strides_aligned(MatmulConfig(128, 128, 64), Problem(m, n, k, dtype))
    assert (got is None) if reason is None else got.startswith(reason)


def test_tma_box_rule():
    p = Problem(4096, 4096, 4096, torch.bfloat16)
    assert tma_box_fits(MatmulConfig(128, 256, 64), p) is None
    assert tma_box_fits(MatmulConfig(512, 128, 64), p) == "block_m=512 > 256 (TMA box)"


# The shared-tile fixup: a planted fault (stale tile counters, as if the launcher forgot to zero
# them) against its control. With stale counts no contributor sees itself last, the shared tiles
# are never stored, and the NaN the output started with shows.
@pytest.mark.parametrize("stale", [False, True], ids=["zeroed-counters", "stale-counters"])
def test_hybrid_fixup_needs_zeroed_counters(device, stale):
    m, n, k, programs = 37, 50, 200, 5
    a, b = _random((m, k), torch.float16, device, 7), _random((k, n), torch.float16, device, 8)
    tiles = triton.cdiv(m, 16) * triton.cdiv(n, 16)  # 12 tiles on 5 programs: 2 whole waves, 2 shared
    _, shared = hybrid_split(tiles, programs)
    assert shared == 2
    ws = torch.zeros((shared, 16, 16), device=device)
    counts = torch.full((shared,), 1 if stale else 0, dtype=torch.int32, device=device)
    c = torch.full((m, n), math.nan, dtype=torch.float16, device=device)
    _streamk_hybrid_kernel[(programs,)](
        a, b, c, ws, counts, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), programs,
        BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2, INPUT_PRECISION="ieee",
    )  # fmt: skip
    ok = check_accuracy(c, reference_matmul(a, b), a.dtype, k).ok
    assert ok != stale


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "transpose_b", "expected"),
    [
        pytest.param((3000, 1000), (1000, 5000), False, (8, 8, 8), id="3000x5000x1000"),
        # A's rows (8,192 bytes) keep 16-byte loads where B's and C's (64,002) allow none
        pytest.param((64, 4096), (4096, 32001), False, (16, 1, 1), id="vocab-32001"),
        pytest.param((64, 4096), (4096, 4096), False, (16, 16, 16), id="square"),
        # 6,000-byte rows of A against 2,468-byte ones of B and C
        pytest.param((5000, 3000), (3000, 1234), False, (8, 2, 2), id="5000x1234x3000"),
        pytest.param((64, 1000), (5000, 1000), True, (8, 1, 8), id="b-column-major"),
    ],
)
def test_row_alignment_hint(a_shape, b_shape, transpose_b, expected):
    a, b = torch.empty(a_shape, device="meta"), torch.empty(b_shape, device="meta")
    b = b.t() if transpose_b else b
    c = torch.empty((a.shape[0], b.shape[1]), device="meta")
    assert pointer_layout(a, b, c)[1] == expected


def test_pointer_layout_gives_the_kernels_strides_in_their_order():
    a = torch.empty((48, 80), device="meta")[:, :40]  # rows 80 apart
    ws = torch.empty((4, 48, 64), device="meta")[:, :, :56]  # a split-K workspace: a stack of C tiles
    b_column_major = torch.empty((56, 40), device="meta").t()  # (40, 56), strides (1, 40)
    # gcd(80, 16); B not row-major; gcd(64, N = 56, 16)
    assert pointer_layout(a, b_column_major, ws) == ((80, 1, 1, 40, 64, 1), (16, 1, 8))
    b = torch.empty((40, 64), device="meta")[:, :56]
    assert pointer_layout(a, b, ws) == ((80, 1, 64, 1, 64, 1), (16, 8, 8))


@pytest.mark.parametrize("claimed", ["launcher", "overclaimed"])
def test_alignment_hint_must_be_true(device, claimed):
    # N = 50 is a multiple of 2, not of 8: a kernel told B_ALIGN and C_ALIGN = 8 rounds N down to 48
    # and drops two columns of every row. The launcher's own hints (A's 200 elements 8, N's 2) are
    # the control.
    from kernels.grouped import _grouped_kernel

    m, n, k = 37, 50, 200
    a, b = _random((m, k), torch.float16, device, 9), _random((k, n), torch.float16, device, 10)
    c = torch.full((m, n), math.nan, dtype=torch.float16, device=device)
    aligns = pointer_layout(a, b, c)[1] if claimed == "launcher" else (8, 8, 8)
    assert pointer_layout(a, b, c)[1] == (8, 2, 2)
    _grouped_kernel[(triton.cdiv(m, 16) * triton.cdiv(n, 16),)](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2, INPUT_PRECISION="ieee",
        **dict(zip(("A_ALIGN", "B_ALIGN", "C_ALIGN"), aligns, strict=True)),
    )  # fmt: skip
    assert check_accuracy(c, reference_matmul(a, b), a.dtype, k).ok == (claimed == "launcher")


def _layouts():
    """(name, tensor) pairs TMA can and cannot describe: row- and column-major, aligned and odd leading
    strides, a start off 16 bytes, neither stride a unit, a non-contiguous row slice."""
    base = torch.zeros(4096, dtype=torch.bfloat16)
    return [
        ("row-major aligned", torch.zeros(24, 40, dtype=torch.bfloat16)),
        ("row-major odd", torch.zeros(24, 41, dtype=torch.bfloat16)),
        ("column-major aligned", torch.zeros(40, 24, dtype=torch.bfloat16).t()),
        ("column-major odd", torch.zeros(41, 24, dtype=torch.bfloat16).t()),
        ("start off 16 B", base[1:961].view(24, 40)),
        ("no unit stride", torch.zeros(24, 80, dtype=torch.bfloat16)[:, ::2]),
        ("row slice of a wider tensor", torch.zeros(24, 64, dtype=torch.bfloat16)[:, :40]),
        ("fp32 odd", torch.zeros(8, 5, dtype=torch.float32)),
    ]


@pytest.mark.parametrize(("name", "t"), _layouts(), ids=[name for name, _ in _layouts()])
def test_the_quick_tma_check_agrees_with_the_explained_one(name, t):
    """`padded` asks `tma_describable` on every call; `tma_layout_error` explains a refusal: one answer."""
    from kernels.persistent_tma import padded, tma_describable, tma_layout_error

    assert tma_describable(t) == (tma_layout_error(t, "t") is None)
    assert (padded(t) is t) == tma_describable(t)
