"""The check's guard on the summing variants' kept scratch (farm.measure.check, kernels.scratch): every
launch must leave its slots and counters zeroed; a point whose launches do not is `wrong`, and the
scratch is zeroed so the next point starts clean; scratch found dirty before a check is zeroed first,
with a warning. Under the interpreter, with `splitk` (split_k 2) itself and with a planted launcher that
adds to a kept slot after its product, as a summing kernel that skipped its clean-up would."""

import warnings

import pytest
import torch

from farm.measure import check
from kernels import MatmulConfig, get_variant, reference_matmul
from kernels.scratch import _KEPT, scratch_is_zeroed, zeroed_scratch

CFG = MatmulConfig(block_m=16, block_n=16, block_k=16, split_k=2, num_warps=4, num_stages=2)
CPU = torch.device("cpu")


def _operands():
    gen = torch.Generator().manual_seed(3)
    return torch.randn((24, 40), generator=gen), torch.randn((40, 32), generator=gen)


def _check(launch, a, b):
    return check(launch, reference_matmul(a, b), torch.float32, 40, "ieee", device=CPU, m=24, n=32,
                 split_k=2, repeats=3)  # fmt: skip


@pytest.fixture(autouse=True)
def clean_scratch():
    for kept in _KEPT.values():
        kept.zero_()
    yield
    for kept in _KEPT.values():
        kept.zero_()


def test_a_summing_variant_that_cleans_up_passes():
    a, b = _operands()
    result = _check(lambda: get_variant("splitk").launch(a, b, CFG), a, b)
    assert result.ok and not result.scratch_left and scratch_is_zeroed()


def test_a_launch_that_leaves_its_slot_dirty_is_wrong_and_the_next_point_starts_clean():
    a, b = _operands()

    def dirty():  # the right product, then a leftover in the first kept slot
        c = get_variant("splitk").launch(a, b, CFG)
        slots, _ = zeroed_scratch(4, 16, 16, CPU)
        slots[0] += 1.0
        return c

    result = _check(dirty, a, b)
    assert result.rel_err <= result.tolerance and result.scratch_left and not result.ok
    assert scratch_is_zeroed()  # zeroed for the next point
    after = _check(lambda: get_variant("splitk").launch(a, b, CFG), a, b)
    assert after.ok


def test_scratch_found_dirty_before_a_check_is_zeroed_first_with_a_warning():
    a, b = _operands()
    slots, counters = zeroed_scratch(4, 16, 16, CPU)
    slots[3] = 7.0  # left by an earlier point: this point's sums would carry it
    counters[1] = 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _check(lambda: get_variant("splitk").launch(a, b, CFG), a, b)
    assert result.ok and any("not zeroed before this check" in str(w.message) for w in caught)
