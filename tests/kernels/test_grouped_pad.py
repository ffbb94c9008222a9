"""`grouped_pad`: C comes back as an (M, N) view of rows 128 bytes apart, B is copied into such rows
only when its rows are not already, the padding's contents never reach the result, and its space
plans it only for odd N with a short K. Results on many shapes and layouts: test_variants.py."""

import pytest
import torch

import kernels.grouped as grouped_module
from kernels import MatmulConfig, Problem, check_accuracy, get_variant, reference_matmul
from kernels.pitched import PAD_PITCH_BYTES, aligned_rows

CFG = MatmulConfig(block_m=16, block_n=32, block_k=16, group_m=2, num_warps=4, num_stages=2)
ROW = PAD_PITCH_BYTES // 2  # fp16 elements in 128 bytes


def _operands(m, n, k, device, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a, b = torch.randn((m, k), generator=gen), torch.randn((k, n), generator=gen)
    return a.half().to(device), b.half().to(device)


@pytest.fixture
def copies(monkeypatch) -> list[torch.Tensor]:
    """The tensors `grouped_pad` copied into aligned rows (the copy itself still made)."""
    copied, copy = [], grouped_module.pitched_copy
    monkeypatch.setattr(grouped_module, "pitched_copy", lambda t: copied.append(t) or copy(t))
    return copied


def _assert_close(c, a, b):
    acc = check_accuracy(c, reference_matmul(a, b), a.dtype, a.shape[1])
    assert acc.ok, f"rel_err {acc.rel_err:.3g} > tolerance {acc.tolerance:.3g}"


def test_odd_n_copies_b_and_returns_c_in_rows_128_bytes_apart(device, copies):
    a, b = _operands(37, 50, 41, device)
    c = get_variant("grouped_pad").launch(a, b, CFG)
    assert copies == [b]
    assert c.shape == (37, 50) and c.stride() == (ROW, 1) and not c.is_contiguous()
    _assert_close(c, a, b)


def test_b_already_in_aligned_rows_is_read_as_it_is_and_its_padding_never_reaches_c(device, copies):
    a, b = _operands(37, 50, 41, device)
    rows = aligned_rows(41, 50, like=b)
    whole = rows.as_strided((41, ROW), (ROW, 1))  # the same storage, padding columns included
    whole.fill_(float("nan"))
    rows.copy_(b)
    c = get_variant("grouped_pad").launch(a, rows, CFG)
    assert copies == []
    assert not c.isnan().any()
    _assert_close(c, a, b)


def test_a_view_of_aligned_rows_whose_storage_ends_early_is_copied(device, copies):
    a, b = _operands(37, 50, 41, device)
    storage = torch.empty(40 * ROW + 50, dtype=b.dtype, device=device)  # no padding after the last row
    short = storage.as_strided((41, 50), (ROW, 1))
    short.copy_(b)
    _assert_close(get_variant("grouped_pad").launch(a, short, CFG), a, b)
    assert copies == [short]


def test_n_a_multiple_of_64_needs_no_copy_and_c_is_contiguous(device, copies):
    a, b = _operands(37, 64, 41, device)
    c = get_variant("grouped_pad").launch(a, b, CFG)
    assert copies == [] and c.is_contiguous()
    _assert_close(c, a, b)


@pytest.mark.parametrize(
    ("shape", "kept"),
    [
        pytest.param((495, 5333, 71), True, id="odd-N-short-K"),
        pytest.param((495, 5333, 512), True, id="odd-N-K-at-the-limit"),
        pytest.param((495, 5333, 513), False, id="odd-N-long-K"),
        pytest.param((495, 5000, 71), False, id="N-rows-16-byte-aligned"),
    ],
)
def test_its_space_plans_odd_n_with_a_short_k_only(shape, kept):
    space = get_variant("grouped_pad").space
    problem = Problem(*shape, "bfloat16")
    cfg = MatmulConfig(128, 64, 32, group_m=4, num_warps=4, num_stages=2)  # 495 rows: 4 tile rows
    assert (space.prune(cfg, problem) is None) is kept
    assert bool(space.configs(problem)) is kept
