"""persistent_tma's compiled calls (`kernels.launching.DirectCalls`, `kernels.persistent_tma._CALLS`):
which calls reuse the compiled kernel directly, with which arguments, and that the checks still run
before them.

Without a GPU nothing compiles, so the kernel is replaced by a stand-in (kernelkit.py). On a GPU,
benchmarks/launch_overhead.py checks persistent_tma's results through the direct path.
"""

import pytest
import torch
from kernelkit import StandInKernel

import kernels.persistent_tma as pt
from kernels import MatmulConfig
from kernels.launching import COMPILE_ONLY, DirectCalls

CFG = MatmulConfig(block_m=16, block_n=32, block_k=16, group_m=2, num_warps=4, num_stages=2)


@pytest.fixture
def kernel(monkeypatch):
    stand_in = StandInKernel(pt._persistent_tma_kernel.arg_names)
    monkeypatch.setattr(pt, "_CALLS", DirectCalls(stand_in))
    return stand_in


def _operands(m, n, k, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn((m, k), generator=gen).to(torch.bfloat16)
    return a, torch.randn((k, n), generator=gen).to(torch.bfloat16)


def test_the_second_call_of_a_key_goes_direct_with_the_constexprs_in_order(kernel):
    a, b = _operands(40, 48, 64)
    pt.persistent_tma(a, b, CFG)
    assert len(kernel.jit_calls) == 1 and kernel.compiled.calls == []
    (grid, _, kwargs) = kernel.jit_calls[0]
    a2, b2 = _operands(40, 48, 64, seed=1)  # new tensors, the same key
    c2 = pt.persistent_tma(a2, b2, CFG)
    assert len(kernel.jit_calls) == 1
    assert kernel.compiled.grids == [(grid[0], 1, 1)]
    (call,) = kernel.compiled.calls
    a_desc, b_desc, c_desc = call[:3]
    assert a_desc.base is a2 and b_desc.base is b2 and c_desc.base is c2  # this call's operands
    assert call[3:6] == (40, 48, 64)
    assert call[6:] == tuple(kwargs[name] for name in pt._persistent_tma_kernel.arg_names[6:])
    assert call[6:10] == (16, 32, 16, 2)  # BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(lambda: (*_operands(40, 48, 80), CFG), id="another-k"),
        pytest.param(lambda: (*_operands(40, 48, 64), CFG.replace(num_stages=3)), id="another-config"),
        pytest.param(
            lambda: (_operands(40, 48, 64)[0], _operands(40, 48, 64)[1].t().contiguous().t(), CFG),
            id="b-column-major",
        ),
    ],
)
def test_a_call_the_compiled_kernel_may_not_fit_takes_the_jit_path(kernel, second):
    pt.persistent_tma(*_operands(40, 48, 64), CFG)
    pt.persistent_tma(*second())
    assert len(kernel.jit_calls) == 2 and kernel.compiled.calls == []


def test_the_checks_run_before_a_direct_call(kernel):
    base = torch.zeros((40, 72), dtype=torch.bfloat16)
    b = _operands(40, 48, 64)[1]
    pt.persistent_tma(base[:, :64], b, CFG)  # rows 144 B apart, 16-byte aligned start
    with pytest.raises(pt.TmaUnsupported, match="not aligned to 16 B"):
        pt.persistent_tma(base[:, 1:65], b, CFG)  # the same key, its start 2 bytes in
    assert len(kernel.jit_calls) == 1 and kernel.compiled.calls == []


def test_the_table_keeps_the_newest_keys_only(kernel):
    pt._CALLS.max_keys = 2
    for m in (40, 41, 42):  # three keys: the first is dropped when the third comes
        pt.persistent_tma(*_operands(m, 48, 64), CFG)
    assert [key[3] for key in pt._CALLS.table] == [41, 42]
    pt.persistent_tma(*_operands(40, 48, 64), CFG)  # compiled again: its key was dropped
    assert len(kernel.jit_calls) == 4 and len(pt._CALLS.table) == 2


def test_compiling_ahead_never_calls_the_compiled_kernel(kernel):
    # the farm's compile-ahead: Triton's launches only compile, so a direct call would run the kernel
    a, b = _operands(40, 48, 64)
    pt.persistent_tma(a, b, CFG)
    token = COMPILE_ONLY.set(True)
    try:
        pt.persistent_tma(a, b, CFG)
    finally:
        COMPILE_ONLY.reset(token)
    assert len(kernel.jit_calls) == 2 and kernel.compiled.calls == []
    assert len(kernel.compiled.grids) == 1  # the key's runner was kept once, not made again
    pt.persistent_tma(a, b, CFG)  # control: running again, the same key goes direct
    assert len(kernel.compiled.calls) == 1


def test_a_known_key_reuses_its_plan_over_the_new_operands_and_holds_no_tensor(kernel, monkeypatch):
    """The checks and descriptors are made once per key (`TmaPlan`); each call rebases the templates
    on its own operands (a column-major one as its .T), and the kept plan holds none of them."""
    a, b = _operands(40, 48, 64)
    b_cols = b.t().contiguous().t()  # column-major B: described as B.T
    pt.persistent_tma(a, b_cols, CFG)
    checks = []
    monkeypatch.setattr(pt, "check_tma", lambda *args: checks.append(args))
    a2, b2 = _operands(40, 48, 64, seed=1)
    b2_cols = b2.t().contiguous().t()
    c2 = pt.persistent_tma(a2, b2_cols, CFG)
    assert checks == []  # a known key with aligned operands: nothing checked again
    (call,) = kernel.compiled.calls
    a_desc, b_desc, c_desc = call[:3]
    assert a_desc.base is a2 and c_desc.base is c2
    assert b_desc.base.data_ptr() == b2_cols.data_ptr() and b_desc.base.shape == (48, 64)
    assert b_desc.block_shape == [CFG.block_n, CFG.block_k] and call[3:6] == (40, 48, 64)
    (plan,) = pt._CALLS.plans.values()
    assert plan.a_desc.base is None and plan.b_desc.base is None and plan.c_desc.base is None
    assert plan.b_transposed and not plan.a_transposed


@pytest.fixture
def split_kernel(monkeypatch):
    import kernels.splitk_tma as st

    stand_in = StandInKernel(st._splitk_tma_kernel.arg_names)
    monkeypatch.setattr(st, "_CALLS", DirectCalls(stand_in))
    return stand_in


@pytest.mark.parametrize("split_k", [1, 2])
def test_splitk_tma_bound_passes_fresh_partials_and_the_kept_counters(split_kernel, split_k):
    """`splitk_tma` bound to its problem (kernels.launching.KeptBindings): the runner gets descriptors
    over this call's A, B and C, a fresh fp32 slot for each program's partial tile and the counters its
    launcher passed (C for both at split_k 1), then what Triton was given first."""
    from kernels import get_variant
    from kernels.scratch import zeroed_counters

    cfg = CFG.replace(split_k=split_k)
    launch = get_variant("splitk_tma").launch
    launch(*_operands(40, 48, 64), cfg)
    (grid, jit_args, kwargs) = split_kernel.jit_calls[0]
    a2, b2 = _operands(40, 48, 64, seed=1)
    c2 = launch(a2, b2, cfg)
    assert len(split_kernel.jit_calls) == 1 and split_kernel.compiled.grids == [(grid[0], 1, 1)]
    (call,) = split_kernel.compiled.calls
    assert [d.base for d in call[:3]] == [a2, b2, c2]
    ws, counts = call[3:5]
    if split_k == 1:
        assert ws is c2 and counts is c2
    else:
        assert ws.dtype == torch.float32 and ws.numel() == grid[0] * 16 * 32 and ws is not jit_args[3]
        assert counts is zeroed_counters(grid[0] // split_k, a2.device) and counts is jit_args[4]
    names = split_kernel.arg_names[len(jit_args) :]
    assert call[5:] == (*jit_args[5:], *(kwargs[name] for name in names))


@pytest.mark.parametrize(
    ("variant", "calls"), [("splitk_tma_reduce", "_APART_CALLS"), ("splitk_tma_cluster", "_CLUSTER_CALLS")]
)
def test_summed_apart_bound_passes_one_fresh_workspace_to_both_kernels(monkeypatch, variant, calls):
    """`splitk_tma_reduce` and `_cluster` bound (kernels.launching.KeptBindings): the split kernel gets
    descriptors over this call's A, B and C and a fresh (split_k, M, N) fp32 workspace, the reduce
    that workspace and C, each then what Triton was given first."""
    import kernels.splitk_det as sd
    import kernels.splitk_tma as st
    from kernels import get_variant

    split = StandInKernel(st._splitk_tma_kernel.arg_names)
    reduce = StandInKernel(sd._reduce_splits_kernel.arg_names)
    monkeypatch.setattr(st, calls, DirectCalls(split))
    monkeypatch.setattr(sd, "_REDUCE", DirectCalls(reduce))
    cfg = CFG.replace(split_k=2)
    launch = get_variant(variant).launch
    launch(*_operands(40, 48, 64), cfg)
    a2, b2 = _operands(40, 48, 64, seed=1)
    c2 = launch(a2, b2, cfg)
    assert len(split.jit_calls) == len(reduce.jit_calls) == 1
    (split_call,), (reduce_call,) = split.compiled.calls, reduce.compiled.calls
    ws = split_call[3]
    assert [d.base for d in split_call[:3]] == [a2, b2, c2] and split_call[4] is ws
    assert ws.dtype == torch.float32 and ws.shape == (2, 40, 48)
    assert reduce_call[:2] == (ws, c2)
    for kernel, call, leading in ((split, split_call, 5), (reduce, reduce_call, 2)):
        (_, jit_args, kwargs) = kernel.jit_calls[0]
        names = kernel.arg_names[len(jit_args) :]
        assert call[leading:] == (*jit_args[leading:], *(kwargs[name] for name in names))


@pytest.mark.parametrize(("k", "n"), [(33, 48), (64, 36), (33, 36)], ids=["copy-a", "copy-b", "both"])
def test_persistent_tma_pad_bound_copies_what_its_launcher_copies(kernel, monkeypatch, k, n):
    """`persistent_tma_pad` bound (kernels.launching.KeptBindings): each call copies an operand whose rows
    TMA cannot describe (K = 33: A's rows 66 bytes; N = 36: B's 72) into rows 128 bytes apart and
    makes C as the launcher does (N = 36: a pitched view), and the kernel gets descriptors over those,
    then what Triton was given first."""
    import kernels.pitched as pitched
    from kernels import get_variant

    copies = StandInKernel(pitched._copy_rows_kernel.arg_names)
    monkeypatch.setattr(pitched, "_COPIES", DirectCalls(copies))
    launch = get_variant("persistent_tma_pad").launch
    launch(*_operands(40, n, k), CFG)
    (grid, jit_args, kwargs) = kernel.jit_calls[0]
    a2, b2 = _operands(40, n, k, seed=1)
    c2 = launch(a2, b2, CFG)
    assert len(kernel.jit_calls) == 1 and kernel.compiled.grids == [(grid[0], 1, 1)]
    (call,) = kernel.compiled.calls
    a_in, b_in, c_in = (d.base for d in call[:3])
    copied = [t for t, odd in ((a2, k == 33), (b2, n == 36)) if odd]
    assert [copy[0] for copy in copies.compiled.calls] == copied  # this call's operands, copied
    for given, used in ((a2, a_in), (b2, b_in)):
        if any(given is t for t in copied):
            assert used is not given and used.shape == given.shape and used.stride() == (64, 1)
        else:
            assert used is given
    assert c_in is c2 and c2.shape == (40, n) and c2.stride(0) == (64 if n == 36 else n)
    assert call[3:] == (*jit_args[3:], *(kwargs[name] for name in pt._persistent_tma_kernel.arg_names[6:]))
