"""A variant's launcher keeps its launch bound per call layout (`kernels.launching.KeptBindings`): a
call like one it served (sizes, strides, dtypes, devices, config) runs the bound launch, which
passes this call's tensors and what the first call gave Triton, and makes no key of its own; a
new layout or config, an operand off 16 bytes, a compile ahead, or the interpreter takes the
launcher itself.

Without a GPU nothing compiles, so `tiled`'s kernel is a stand-in (kernelkit.py). On a GPU,
benchmarks/launch_overhead.py times the launchers beside their kernels called alone.
"""

import pytest
import torch
from kernelkit import StandInKernel

import kernels.tiled as tiled_module
from kernels import MatmulConfig, get_variant
from kernels.launching import COMPILE_ONLY, BoundCall, DirectCalls, KeptBindings

CFG = MatmulConfig(block_m=16, block_n=32, block_k=16, num_warps=4, num_stages=2)


def _t(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture
def kernel(monkeypatch) -> StandInKernel:
    stand_in = StandInKernel(tiled_module._tiled_kernel.arg_names)
    monkeypatch.setattr(tiled_module, "_CALLS", DirectCalls(stand_in))
    return stand_in


@pytest.fixture
def keys(monkeypatch) -> list:
    """Each key the launcher itself makes (`pointer_key`): a bound call makes none."""
    made, pointer_key = [], tiled_module.pointer_key
    monkeypatch.setattr(tiled_module, "pointer_key", lambda *args: made.append(args) or pointer_key(*args))
    return made


def test_a_call_like_one_served_runs_the_bound_launch_with_its_own_tensors(kernel, keys):
    launch = get_variant("tiled").launch
    assert isinstance(launch, KeptBindings)
    launch(_t(40, 64), _t(64, 48), CFG)
    (bound,) = launch.bound.values()
    assert isinstance(bound, BoundCall) and len(keys) == 1 and len(kernel.jit_calls) == 1
    a2, b2 = _t(40, 64, seed=1), _t(64, 48, seed=1)
    c2 = launch(a2, b2, CFG)
    assert len(keys) == 1 and len(kernel.jit_calls) == 1  # no key made, nothing through Triton's path
    (call,) = kernel.compiled.calls
    (_, jit_args, kwargs) = kernel.jit_calls[0]
    names = kernel.arg_names[len(jit_args) :]
    assert call[:3] == (a2, b2, c2) and c2.shape == (40, 48)
    assert call[3:] == (*jit_args[3:], *(kwargs[name] for name in names))


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(lambda: (_t(40, 64), _t(64, 48), CFG.replace(block_n=16)), id="another-config"),
        pytest.param(lambda: (_t(40, 64), _t(48, 64).t(), CFG), id="another-stride"),
        pytest.param(lambda: (_t(40, 80), _t(80, 48), CFG), id="another-k"),
        pytest.param(lambda: (_t(40, 64).half(), _t(64, 48).half(), CFG), id="another-dtype"),
    ],
)
def test_another_layout_or_config_is_its_own_binding(kernel, keys, second):
    launch = get_variant("tiled").launch
    launch(_t(40, 64), _t(64, 48), CFG)
    a, b, cfg = second()
    launch(a, b, cfg)
    assert len(keys) == 2 and len(kernel.jit_calls) == 2 and kernel.compiled.calls == []
    assert len(launch.bound) == 2


def test_an_unaligned_start_or_a_compile_ahead_takes_the_launcher(kernel, keys):
    launch = get_variant("tiled").launch
    a, b = _t(40, 64), _t(64, 48)
    launch(a, b, CFG)
    shifted = torch.empty(40 * 64 + 1)[1:].view(40, 64)  # the same layout, its start 4 bytes off 16
    shifted.copy_(a)
    launch(shifted, b, CFG)
    assert len(keys) == 2 and len(kernel.jit_calls) == 2  # its own key, through Triton's path
    token = COMPILE_ONLY.set(True)
    try:
        launch(_t(40, 64), _t(64, 48), CFG)  # a kept layout: compiled through Triton, not run
        launch(_t(8, 64), _t(64, 48), CFG)  # a new one: nothing kept while compiling ahead
    finally:
        COMPILE_ONLY.reset(token)
    assert len(kernel.jit_calls) == 4 and kernel.compiled.calls == []
    assert len(launch.bound) == 1
    launch(_t(8, 64), _t(64, 48), CFG)  # run after the compile: bound now
    assert len(launch.bound) == 2


def test_the_interpreter_keeps_the_launcher_and_its_result():
    """Nothing compiles under the interpreter: the layout keeps the launcher, whose result is right."""
    launch = get_variant("tiled").launch
    a, b = _t(24, 32), _t(32, 16)
    for _ in range(2):
        assert torch.allclose(launch(a, b, CFG), a @ b, atol=1e-4)
    assert list(launch.bound.values()) == [False]


def test_a_launcher_pickles_without_its_bindings(kernel):
    """A variant sent to another process (a Ray worker) takes its launcher, not the runners bound here."""
    import pickle

    launch = get_variant("tiled").launch
    launch(_t(40, 64), _t(64, 48), CFG)
    copy = pickle.loads(pickle.dumps(launch))
    assert isinstance(copy, KeptBindings) and copy.__wrapped__ is tiled_module.tiled and copy.bound == {}
    assert len(launch.bound) == 1
