"""The pointer launchers' compiled calls (`tiled`, `grouped`, `grouped_pad`, `streamk`, `streamk_hybrid`,
`splitk`, `splitk_det`): a key's second launch calls the compiled kernel directly with this call's tensors and
what the first call gave Triton, constexprs in the kernel's order; anything Triton specialised on
that differs (a size, a stride, an operand's start modulo 16, the config, atomic or workspace)
takes Triton's path under a new key. The summing variants' launches bound to a problem (the
dispatcher's routes) pass their kept scratch too; `splitk_det`'s gives both its kernels a fresh workspace.

Without a GPU nothing compiles, so the kernel is replaced by a stand-in (kernelkit.py); the
variants' results through the interpreter are test_variants.py's. On a GPU, benchmarks/launch_overhead.py
times both paths.
"""

import pytest
import torch
from kernelkit import StandInKernel

import kernels.grouped as grouped_module
import kernels.splitk as splitk_module
import kernels.splitk_det as splitk_det_module
import kernels.streamk as streamk_module
import kernels.streamk_hybrid as streamk_hybrid_module
import kernels.tiled as tiled_module
from kernels import MatmulConfig, get_variant
from kernels.launching import DirectCalls
from kernels.scratch import _KEPT as _KEPT_SCRATCH

CFG = MatmulConfig(block_m=16, block_n=32, block_k=16, group_m=2, num_warps=4, num_stages=2)
SPLIT = CFG.replace(split_k=2)


def _operands(m, n, k, seed=0, dtype=torch.float16):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((m, k), generator=gen).to(dtype), torch.randn((k, n), generator=gen).to(dtype)


# (module, its DirectCalls, the kernel they call) for every pointer kernel
DIRECT_CALLS = {
    "tiled": (tiled_module, "_CALLS", "_tiled_kernel"),
    "grouped": (grouped_module, "_CALLS", "_grouped_kernel"),
    "grouped_pad": (grouped_module, "_PAD_CALLS", "_grouped_kernel"),
    "streamk": (streamk_module, "_CALLS", "_streamk_kernel"),
    "streamk_hybrid": (streamk_hybrid_module, "_CALLS", "_streamk_hybrid_kernel"),
    "split": (splitk_module, "_CALLS", "_splitk_kernel"),
    "reduce": (splitk_det_module, "_REDUCE", "_reduce_splits_kernel"),
}
# variant -> (its config, the kernels it launches)
VARIANTS = {
    "tiled": (CFG, ["tiled"]),
    "grouped": (CFG, ["grouped"]),
    "grouped_pad": (CFG, ["grouped_pad"]),
    "streamk": (CFG, ["streamk"]),
    "streamk_hybrid": (CFG, ["streamk_hybrid"]),
    "splitk": (SPLIT, ["split"]),
    "splitk_det": (SPLIT, ["split", "reduce"]),
}


@pytest.fixture
def stand_ins(monkeypatch) -> dict[str, StandInKernel]:
    """Every pointer kernel replaced by a stand-in: no variant launches a real kernel."""
    kernels = {}
    for name, (module, calls, kernel) in DIRECT_CALLS.items():
        kernels[name] = StandInKernel(getattr(module, kernel).arg_names)
        monkeypatch.setattr(module, calls, DirectCalls(kernels[name]))
    return kernels


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_keys_second_launch_passes_what_triton_was_given_first(stand_ins, variant):
    cfg, launched = VARIANTS[variant]
    launch = get_variant(variant).launch
    # N = 64: B's fp16 rows are already 128 bytes apart, so `grouped_pad` too passes B as it is
    launch(*_operands(40, 64, 48), cfg)
    a2, b2 = _operands(40, 64, 48, seed=1)  # new tensors, the same key
    launch(a2, b2, cfg)
    for name in launched:
        kernel = stand_ins[name]
        (grid, jit_args, kwargs) = kernel.jit_calls[0]
        assert len(kernel.jit_calls) == 1 and kernel.compiled.grids == [(*grid, 1, 1)[:3]]
        (call,) = kernel.compiled.calls
        names = kernel.arg_names[len(jit_args) :]
        values = (*jit_args, *(kwargs[n] for n in names))
        assert len(call) == len(values) == len(kernel.arg_names)
        for now, first in zip(call, values, strict=True):
            if isinstance(first, torch.Tensor):  # this call's own operands and outputs, alike in shape,
                assert isinstance(now, torch.Tensor) and now.shape == first.shape
                # or the scratch kept zeroed between calls (kernels.scratch)
                assert now is not first or any(now is kept for kept in _KEPT_SCRATCH.values())
            else:
                assert now == first
        if name != "reduce":
            assert call[0] is a2 and call[1] is b2


@pytest.fixture
def grouped_kernel(monkeypatch):
    stand_in = StandInKernel(grouped_module._grouped_kernel.arg_names)
    monkeypatch.setattr(grouped_module, "_CALLS", DirectCalls(stand_in))
    return stand_in


@pytest.fixture
def split_kernel(monkeypatch):
    stand_in = StandInKernel(splitk_module._splitk_kernel.arg_names)
    monkeypatch.setattr(splitk_module, "_CALLS", DirectCalls(stand_in))
    return stand_in


def test_grouped_goes_direct_for_a_known_key_with_this_calls_tensors(grouped_kernel):
    a, b = _operands(40, 48, 64)
    grouped_module.grouped(a, b, CFG)
    assert len(grouped_kernel.jit_calls) == 1 and grouped_kernel.compiled.calls == []
    grid, jit_args, kwargs = grouped_kernel.jit_calls[0]
    assert grid == (3 * 2,) and jit_args[3:] == (40, 48, 64, 64, 1, 48, 1, 48, 1)  # sizes, strides
    a2, b2 = _operands(40, 48, 64, seed=1)
    c2 = grouped_module.grouped(a2, b2, CFG)
    assert len(grouped_kernel.jit_calls) == 1 and grouped_kernel.compiled.grids == [(6, 1, 1)]
    (call,) = grouped_kernel.compiled.calls
    assert call[0] is a2 and call[1] is b2 and call[2] is c2  # this call's operands
    assert call[3:12] == jit_args[3:]
    names = grouped_module._grouped_kernel.arg_names[12:]
    assert call[12:] == tuple(kwargs[name] for name in names)
    assert dict(zip(names, call[12:], strict=True)) == {
        "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 2, "INPUT_PRECISION": "ieee",
        "A_ALIGN": 16, "B_ALIGN": 16, "C_ALIGN": 16,
        "SHORT_K": False,  # four K steps of 16
    }  # fmt: skip


@pytest.mark.parametrize(("k", "masked"), [(48, True), (49, False), (64, False), (10, True)])
def test_grouped_runs_k_in_one_masked_loop_only_where_it_takes_at_most_three_steps(grouped_kernel, k, masked):
    grouped_module.grouped(*_operands(40, 48, k), CFG)  # BLOCK_K 16: 48 and 10 take 3 and 1 steps, 49 four
    (_, _, kwargs) = grouped_kernel.jit_calls[0]
    assert kwargs["SHORT_K"] is masked


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(lambda: (*_operands(40, 48, 80), CFG), id="another-k"),
        pytest.param(lambda: (*_operands(40, 48, 64), CFG.replace(num_stages=3)), id="another-config"),
        # the same sizes, A's rows 2 elements further apart: another stride, another ALIGN (2)
        pytest.param(
            lambda: (torch.zeros(40, 66, dtype=torch.float16)[:, :64], _operands(40, 48, 64)[1], CFG),
            id="a-strided",
        ),
        # the same sizes and strides, A starting 2 B into its storage: Triton's pointer alignment differs
        pytest.param(
            lambda: (
                torch.zeros(40 * 64 + 1, dtype=torch.float16)[1:].view(40, 64),
                _operands(40, 48, 64)[1],
                CFG,
            ),
            id="a-off-16-bytes",
        ),
        pytest.param(lambda: (*_operands(40, 48, 64, dtype=torch.bfloat16), CFG), id="another-dtype"),
    ],
)
def test_grouped_takes_tritons_path_when_a_specialised_value_differs(grouped_kernel, second):
    a, b = _operands(40, 48, 64)
    grouped_module.grouped(a, b, CFG)
    grouped_module.grouped(*second())
    assert len(grouped_kernel.jit_calls) == 2 and grouped_kernel.compiled.calls == []


def test_split_kernel_keeps_atomic_and_workspace_launches_apart(split_kernel):
    """`splitk` sums in kept slots and stores an (M, N) output, `splitk_det` stores into a (SPLIT_K, M, N)
    workspace: one kernel, two keys, each going direct on its own second call with its own output's
    stride."""
    a, b = _operands(40, 48, 64)
    out = torch.empty((40, 48), dtype=torch.float32)
    workspace = torch.empty((2, 40, 48), dtype=torch.float32)
    for _ in range(2):
        splitk_module.launch_split(a, b, out, SPLIT, atomic=True)
        splitk_module.launch_split(a, b, workspace, SPLIT, atomic=False)
    names = splitk_module._splitk_kernel.arg_names
    stride_ck = names.index("stride_ck")
    assert [kwargs["ATOMIC"] for _, _, kwargs in split_kernel.jit_calls] == [True, False]
    assert [args[stride_ck] for _, args, _ in split_kernel.jit_calls] == [0, 40 * 48]
    calls = split_kernel.compiled.calls
    assert calls[0][2] is out and calls[1][2] is workspace  # this call's output
    assert calls[0][3] is not out and calls[1][3] is workspace  # the atomic sum's slots; unused apart
    assert [call[stride_ck] for call in calls] == [0, 40 * 48]
    values = [dict(zip(names[stride_ck + 1 :], call[stride_ck + 1 :], strict=True)) for call in calls]
    assert [v["ATOMIC"] for v in values] == [True, False] and all(v["SPLIT_K"] == 2 for v in values)


@pytest.mark.parametrize(("variant", "kernel"), [("splitk", "split"), ("streamk", "streamk"),
                                                 ("streamk_hybrid", "streamk_hybrid")])  # fmt: skip
def test_a_summing_kernel_bound_to_a_problem_passes_this_calls_tensors_and_the_kept_scratch(
    stand_ins, variant, kernel
):
    """`bound_launch` of the summing variants (kernels.dispatch's route of a decided call): after the
    first launch through the launcher, the bound call gives the runner this call's A, B and a fresh C,
    the scratch kept for the stream (the same slots and counters the launcher passed), and what Triton
    was given first. Before any launch there is nothing to bind."""
    from kernels.launching import BoundCall, bound_launch

    cfg, _ = VARIANTS[variant]
    a, b = _operands(40, 64, 48)
    fallback = lambda a, b: None
    assert bound_launch(variant, a, b, cfg, fallback) is None  # not compiled yet
    get_variant(variant).launch(a, b, cfg)
    bound = bound_launch(variant, a, b, cfg, fallback)
    assert isinstance(bound, BoundCall)
    a2, b2 = _operands(40, 64, 48, seed=1)
    c2 = bound(a2, b2)
    stand_in = stand_ins[kernel]
    (_, jit_args, kwargs) = stand_in.jit_calls[0]
    (call,) = stand_in.compiled.calls
    assert call[0] is a2 and call[1] is b2 and call[2] is c2 and c2.shape == (40, 64)
    assert call[3] is jit_args[3] and call[4] is jit_args[4]  # the kept slots and counters
    assert any(call[3] is kept for kept in _KEPT_SCRATCH.values())
    names = stand_in.arg_names[len(jit_args) :]
    assert call[5:] == (*jit_args[5:], *(kwargs[name] for name in names))  # sizes, strides, extra, constexprs


def test_splitk_det_bound_to_a_problem_calls_both_kernels_with_what_its_launcher_passed(stand_ins):
    """`bound_launch("splitk_det")` (a decided kernels.matmul's route): after the launcher's first call,
    the bound call gives the split kernel this call's A and B and a fresh workspace (also as the atomic
    sum's unused slots and counters), and the reduce that workspace and the C it returns, each with what
    Triton was given first. Before any launch, or for an A starting off 16 bytes, nothing is bound."""
    from kernels.launching import bound_launch
    from kernels.splitk_det import BoundDeterministic

    a, b = _operands(40, 64, 48)
    launched = []
    fallback = lambda a, b: launched.append((a, b))
    assert bound_launch("splitk_det", a, b, SPLIT, fallback) is None  # not compiled yet
    get_variant("splitk_det").launch(a, b, SPLIT)
    bound = bound_launch("splitk_det", a, b, SPLIT, fallback)
    assert isinstance(bound, BoundDeterministic)
    a2, b2 = _operands(40, 64, 48, seed=1)
    c2 = bound(a2, b2)
    assert c2.shape == (40, 64) and c2.dtype == a2.dtype and not launched
    split, reduce = stand_ins["split"], stand_ins["reduce"]
    ((_, split_args, split_kwargs),) = split.jit_calls
    ((_, reduce_args, reduce_kwargs),) = reduce.jit_calls
    (split_call,) = split.compiled.calls
    (reduce_call,) = reduce.compiled.calls
    workspace = split_call[2]
    assert split_call[0] is a2 and split_call[1] is b2
    assert workspace.shape == (2, 40, 64) and workspace.dtype == torch.float32
    assert split_call[3] is workspace and split_call[4] is workspace
    names = split.arg_names[len(split_args) :]
    assert split_call[5:] == (*split_args[5:], *(split_kwargs[name] for name in names))
    assert reduce_call[0] is workspace and reduce_call[1] is c2
    names = reduce.arg_names[len(reduce_args) :]
    assert reduce_call[2:] == (*reduce_args[2:], *(reduce_kwargs[name] for name in names))

    shifted = torch.zeros(40 * 48 + 1, dtype=torch.float16)[1:].view(40, 48)  # A 2 bytes into its storage
    bound(shifted, b2)
    (sent,) = launched  # to the launcher: no kernel called
    assert sent[0] is shifted and sent[1] is b2 and len(split.compiled.calls) == 1


def test_grouped_pad_bound_copies_b_and_pitches_c_as_its_launcher_does(stand_ins, monkeypatch):
    """`grouped_pad` bound (kernels.launching.KeptBindings) at N = 36 (fp16 rows of 72 bytes): each call
    copies this call's B into rows 64 elements apart, makes C in such rows, and the kernel gets them
    with N told as the pitch, then what Triton was given first."""
    import kernels.pitched as pitched

    copies = StandInKernel(pitched._copy_rows_kernel.arg_names)
    monkeypatch.setattr(pitched, "_COPIES", DirectCalls(copies))
    launch = get_variant("grouped_pad").launch
    launch(*_operands(40, 36, 48), CFG)
    a2, b2 = _operands(40, 36, 48, seed=1)
    c2 = launch(a2, b2, CFG)
    kernel = stand_ins["grouped_pad"]
    (_, jit_args, kwargs) = kernel.jit_calls[0]
    assert len(kernel.jit_calls) == 1
    (call,) = kernel.compiled.calls
    (copy,) = copies.compiled.calls  # this call's B, copied
    assert copy[0] is b2 and call[1] is copy[1] and call[1].stride() == (64, 1)
    assert call[0] is a2 and call[2] is c2 and c2.shape == (40, 36) and c2.stride() == (64, 1)
    assert call[3:6] == (40, 64, 48)  # N told as the pitch
    names = kernel.arg_names[len(jit_args) :]
    assert call[3:] == (*jit_args[3:], *(kwargs[name] for name in names))
