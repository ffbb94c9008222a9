"""Programmatic dependent launch (`kernels.launching.dependent_launch`): which launches ask for it, and
which kernels trigger or wait. A kernel launched overlapping the one before it reads nothing that one
is still writing: split-K's reduce waits before it reads the product's workspace; the bands' split tail
reads only operands and ends after the main band.

Without a GPU nothing compiles and the interpreter cannot run griddepcontrol, so the kernels are
stand-ins (kernelkit.py) and the device is said to be CUDA through `dependent_launch`; on the H200 the
kernel tests run these launchers for real (tests/kernels/test_splitk_tma.py, test_persistent_bands.py).
"""

import pytest
import torch
from kernelkit import StandInKernel

import kernels.persistent_bands as pb
import kernels.persistent_tma as pt
import kernels.splitk_det as sd
import kernels.splitk_tma as st
from kernels import MatmulConfig
from kernels.launching import DirectCalls, dependent_launch

SPLIT = MatmulConfig(block_m=16, block_n=32, block_k=16, group_m=1, split_k=2, num_warps=4, num_stages=2)
BANDS = MatmulConfig(block_m=32, block_n=32, block_k=16, group_m=2, num_warps=4, num_stages=2)


def _operands(m, n, k):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn((m, k), generator=gen).to(torch.bfloat16)
    return a, torch.randn((k, n), generator=gen).to(torch.bfloat16)


def _stand_in(monkeypatch, module, calls_name: str, kernel) -> StandInKernel:
    stand_in = StandInKernel(kernel.arg_names)
    monkeypatch.setattr(module, calls_name, DirectCalls(stand_in))
    return stand_in


@pytest.fixture(params=[True, False], ids=["hopper", "interpreter"])
def pdl(request, monkeypatch) -> bool:
    """Whether the launchers see a device with dependent launch (a CUDA one) or not."""
    for module in (pt, st):
        monkeypatch.setattr(module, "dependent_launch", lambda device, on=request.param: on)
    return request.param


def test_only_cuda_devices_launch_dependently():
    assert dependent_launch(torch.device("cuda", 0)) and not dependent_launch(torch.device("cpu"))


def test_split_k_s_reduce_waits_for_the_product_that_let_it_launch(monkeypatch, pdl):
    product = _stand_in(monkeypatch, st, "_APART_CALLS", st._splitk_tma_kernel)
    reduce = _stand_in(monkeypatch, sd, "_REDUCE", sd._reduce_splits_kernel)
    st.splitk_tma_reduce(*_operands(40, 64, 96), SPLIT)
    ((_, _, product_kwargs),) = product.jit_calls
    ((_, _, reduce_kwargs),) = reduce.jit_calls
    assert product_kwargs["PDL"] is pdl and "launch_pdl" not in product_kwargs  # queued plainly
    assert reduce_kwargs["WAIT"] is pdl and reduce_kwargs.get("launch_pdl", False) is pdl


def test_deterministic_split_k_s_reduce_is_queued_plainly(monkeypatch):
    """`splitk_det`'s pointer product does not let its dependents launch early: nothing to overlap."""
    reduce = _stand_in(monkeypatch, sd, "_REDUCE", sd._reduce_splits_kernel)
    sd.reduce_splits(torch.zeros((2, 8, 8)), torch.empty((8, 8), dtype=torch.bfloat16))
    ((_, _, kwargs),) = reduce.jit_calls
    assert kwargs["WAIT"] is False and "launch_pdl" not in kwargs


def test_the_bands_split_tail_overlaps_the_main_band(monkeypatch, pdl):
    """129 rows on 4 SMs: the main band's 128 rows through `persistent_tma`, which lets its dependent
    launch; the one-row tail through `splitk_tma`, launched overlapping where the device can. (K 160:
    rows whose bytes are a multiple of 16 need no padding copy, a real kernel on a GPU machine.)"""
    monkeypatch.setattr(pb, "multiprocessor_count", lambda device: 4)
    main = _stand_in(monkeypatch, pt, "_CALLS", pt._persistent_tma_kernel)
    plain = _stand_in(monkeypatch, st, "_CALLS", st._splitk_tma_kernel)
    overlapping = _stand_in(monkeypatch, st, "_OVERLAP_CALLS", st._splitk_tma_kernel)
    pb.persistent_tma_bands(*_operands(129, 64, 160), BANDS)
    ((_, _, main_kwargs),) = main.jit_calls
    assert main_kwargs["PDL"] is pdl and "launch_pdl" not in main_kwargs
    tail = overlapping if pdl else plain
    ((_, _, tail_kwargs),) = tail.jit_calls
    assert (overlapping if not pdl else plain).jit_calls == []
    assert tail_kwargs["SPLIT_K"] == 2 and tail_kwargs["PDL"] is pdl  # waits at its end for the main band
    assert tail_kwargs.get("launch_pdl", False) is pdl
