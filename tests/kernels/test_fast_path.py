"""Decided calls of kernels.matmul take their route: the next call of a (shapes, strides, dtypes,
devices, objective) goes straight to what served the first (torch.matmul, or the chosen launcher bound
to its compiled kernel), and any change of those decides again (kernels/op.py, `Routes`).

Which path a call took is counted (`Routes.served`, `Routes.decided`), not timed; the host time a
route saves is measured on a GPU by benchmarks/launch_overhead.py and benchmarks/dropin_check.py.
The best-configs file serves `grouped` for float32 and float16 (test_matmul_dropin.py's), so 2-D
products launch a Triton kernel under the interpreter."""

import json

import pytest
import torch
from kernelkit import StandInKernel
from test_matmul_dropin import CASES, GPU, SMALL, _outcome, _pair, _t, write_best

import kernels.dispatch
import kernels.grouped as grouped_module
from kernels import check_accuracy, reference_matmul
from kernels.dispatch import ConfiguredLaunch, Dispatcher
from kernels.launching import COMPILE_ONLY, BoundCall, DirectCalls


@pytest.fixture
def dispatch(tmp_path):
    return Dispatcher.load(write_best(tmp_path), gpu_name=GPU)


@pytest.fixture
def decisions(monkeypatch):
    """Each Dispatcher.choose call: a route taken makes none."""
    calls, real = [], Dispatcher.choose

    def choose(self, *args, **kwargs):
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Dispatcher, "choose", choose)
    return calls


def _served_decided(dispatch):
    return dispatch.routes.served, dispatch.routes.decided


def test_a_decided_call_takes_its_route(dispatch, decisions):
    a, b = _t(20, 24), _t(24, 18)
    first = dispatch(a, b)
    assert _served_decided(dispatch) == (0, 1)
    chosen = len(decisions)  # run's and the route's (one decision, remembered)
    a2, b2 = _t(20, 24, seed=1), _t(24, 18, seed=1)  # new tensors, the same key
    second = dispatch(a2, b2)
    assert _served_decided(dispatch) == (1, 1) and len(decisions) == chosen
    # under the interpreter nothing compiles: the route is the launcher at the chosen config
    (route,) = dispatch.routes.values()
    assert isinstance(route, ConfiguredLaunch) and route.config == SMALL
    assert check_accuracy(first, reference_matmul(a, b), a.dtype, 24).ok
    assert check_accuracy(second, reference_matmul(a2, b2), a.dtype, 24).ok


def test_kernels_matmul_takes_its_dispatchers_routes(dispatch, monkeypatch):
    monkeypatch.setattr(kernels.dispatch.matmul, "_dispatcher", dispatch)
    monkeypatch.setattr(kernels.dispatch.matmul, "routes", dispatch.routes)  # what `load` sets beside it
    a, b = _t(3, 8, 24), _t(24, 18)
    kernels.matmul(a, b)
    got = kernels.matmul(a, b)
    assert _served_decided(dispatch) == (1, 1)
    assert check_accuracy(got, reference_matmul(a, b), a.dtype, 24).ok


@pytest.mark.parametrize("loaded_by", ["load", "environment"])
def test_a_matmul_keeps_the_routes_of_the_dispatcher_it_loaded(tmp_path, monkeypatch, loaded_by):
    """`Matmul.routes` is an attribute, not a property (a decided call reads it): each load, by `load`
    or from $FARM_BEST_CONFIGS on first use, points it at the new dispatcher's routes."""
    matmul = kernels.dispatch.Matmul()
    first = matmul.routes
    path = write_best(tmp_path)
    if loaded_by == "load":
        matmul.load(path, gpu_name=GPU)
    else:
        monkeypatch.setenv(kernels.dispatch.BEST_CONFIGS_ENV, str(path))
    a, b = _t(20, 24), _t(24, 18)
    matmul(a, b)
    matmul(a, b)
    assert matmul.routes is matmul.dispatcher.routes and matmul.routes is not first
    assert (matmul.routes.served, matmul.routes.decided) == (1, 1)
    (tmp_path / "again").mkdir()
    matmul.load(write_best(tmp_path / "again"), gpu_name=GPU)
    assert matmul.routes is matmul.dispatcher.routes and not matmul.routes  # a new file decides anew


# (first call, a call that must decide again): each differs from the first in one of the key's parts
CHANGES = {
    "dtype": (lambda: (_t(20, 24), _t(24, 18)), lambda: _pair(torch.float16), {}),
    "strides": (lambda: (_t(20, 24), _t(24, 18)), lambda: (_t(24, 20).T, _t(24, 18)), {}),
    "shape": (lambda: (_t(20, 24), _t(24, 18)), lambda: (_t(21, 24), _t(24, 18)), {}),
    "rank": (lambda: (_t(24, 24), _t(24, 18)), lambda: (_t(3, 8, 24), _t(24, 18)), {}),
    "device": (lambda: (_t(20, 24, dtype=torch.float64), _t(24, 18, dtype=torch.float64)),
               lambda: (torch.empty(20, 24, dtype=torch.float64, device="meta"),
                        torch.empty(24, 18, dtype=torch.float64, device="meta")), {}),
    "objective": (lambda: _pair(torch.float32), lambda: _pair(torch.float32), {"objective": "kernel"}),
}  # fmt: skip


@pytest.mark.parametrize(("first", "changed", "kwargs"), CHANGES.values(), ids=CHANGES.keys())
def test_a_change_decides_again(dispatch, first, changed, kwargs):
    dispatch(*first())
    a, b = changed()
    got = dispatch(a, b, **kwargs)
    assert _served_decided(dispatch) == (0, 2)
    again = dispatch(a, b, **kwargs)
    assert _served_decided(dispatch) == (1, 2)
    assert (again.shape, again.dtype, again.device) == (got.shape, got.dtype, got.device)


@pytest.mark.parametrize(("make", "products"), CASES.values(), ids=CASES.keys())
def test_every_drop_in_case_agrees_with_torch_on_its_route(dispatch, make, products):
    """The second call of each drop-in case (test_matmul_dropin.py) takes its route where the first
    succeeded, and returns what torch.matmul returns, or raises what it raises."""
    a, b = make()
    expected, expected_error = _outcome(torch.matmul, a, b)
    _outcome(dispatch, a, b)
    got, error = _outcome(dispatch, a, b)
    assert error is expected_error
    routable = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and expected_error is None
    assert _served_decided(dispatch) == ((1, 1) if routable else (0, 0))
    if expected is None:
        return
    assert (got.shape, got.dtype, got.device, got.stride()) == (
        expected.shape, expected.dtype, expected.device, expected.stride(),
    )  # fmt: skip
    if not products:
        assert torch.equal(got, expected)  # torch.matmul itself ran
    else:
        assert check_accuracy(got, reference_matmul(a, b), a.dtype, a.shape[-1]).ok


def test_the_librarys_route_is_torch_matmul(dispatch):
    a, b = _t(20, 24, dtype=torch.float64), _t(24, 18, dtype=torch.float64)
    dispatch(a, b)
    assert list(dispatch.routes.values()) == [torch.matmul]


@pytest.mark.parametrize(
    "shapes", [((3, 8, 24), (24, 18)), ((24,), (24, 18)), ((20, 24), (24,))], ids=["3-D A", "1-D A", "1-D B"]
)
def test_a_batched_or_1d_call_the_library_serves_routes_to_torch_matmul_itself(shapes):
    """torch.matmul folds a batched A and a 1-D operand itself: the route is torch.matmul on the call's own
    operands, not torch.matmul behind the fold's reshapes (three more Python calls: 9.3 against 2.3 us
    over torch.matmul's own on a 2-core CPU host). No file: the library serves every product."""
    dispatch = Dispatcher(None, gpu_name=GPU)
    a, b = _t(*shapes[0]), _t(*shapes[1])
    with pytest.warns(UserWarning, match="no tuned configs"):
        dispatch(a, b)
    got = dispatch(a, b)
    assert list(dispatch.routes.values()) == [torch.matmul] and dispatch.routes.served == 1
    assert torch.equal(got, torch.matmul(a, b))


def test_gradients_out_and_subclasses_never_take_a_route(dispatch):
    a, b = _t(20, 24), _t(24, 18)
    dispatch(a, b)
    x = a.clone().requires_grad_()
    dispatch(x, b).sum().backward()  # the op with its autograd, not the route
    assert x.grad is not None and x.grad.shape == a.shape
    dispatch(a, b, out=torch.empty(20, 18))

    class Sub(torch.Tensor):
        pass

    dispatch(a.as_subclass(Sub), b)
    assert _served_decided(dispatch) == (0, 1)
    with torch.no_grad():  # no gradient recorded: a tensor that requires one may take the route
        dispatch(x, b)
    assert _served_decided(dispatch) == (1, 1)


@pytest.fixture
def compiled_grouped(monkeypatch):
    """`grouped`'s kernel replaced by a stand-in that "compiles" (kernelkit.py): its first launch keeps
    a runner, which records each direct call."""
    stand_in = StandInKernel(grouped_module._grouped_kernel.arg_names)
    monkeypatch.setattr(grouped_module, "_CALLS", DirectCalls(stand_in))
    return stand_in


def test_a_compiled_kernels_route_calls_its_runner_with_this_calls_tensors(dispatch, compiled_grouped):
    a, b = _t(40, 64), _t(64, 48)
    dispatch(a, b)
    (route,) = dispatch.routes.values()
    assert isinstance(route, BoundCall)
    grid, jit_args, kwargs = compiled_grouped.jit_calls[0]
    a2, b2 = _t(40, 64, seed=1), _t(64, 48, seed=1)
    c2 = dispatch(a2, b2)
    assert len(compiled_grouped.jit_calls) == 1 and compiled_grouped.compiled.grids == [(*grid, 1, 1)[:3]]
    (call,) = compiled_grouped.compiled.calls
    assert call[0] is a2 and call[1] is b2 and call[2] is c2 and c2.shape == (40, 48)
    names = compiled_grouped.arg_names[len(jit_args) :]
    assert call[3:] == (*jit_args[3:], *(kwargs[name] for name in names))  # sizes, strides, constexprs


def test_an_unaligned_start_or_a_compile_ahead_takes_the_launcher(dispatch, compiled_grouped):
    a, b = _t(40, 64), _t(64, 48)
    dispatch(a, b)
    shifted = torch.empty(40 * 64 + 1)[1:].view(40, 64)  # the same key but its start 4 bytes off 16
    shifted.copy_(a)
    dispatch(shifted, b)
    token = COMPILE_ONLY.set(True)
    try:
        dispatch(a, b)
    finally:
        COMPILE_ONLY.reset(token)
    assert _served_decided(dispatch) == (2, 1)
    assert compiled_grouped.compiled.calls == []  # both through the launcher: Triton's path
    assert len(compiled_grouped.jit_calls) == 3


def test_a_tma_kernels_route_passes_its_plans_descriptors_over_this_calls_tensors(monkeypatch, tmp_path):
    """`persistent_tma` bound (its kernel a stand-in that "compiles"): the runner gets descriptors of this
    call's A, B and C, then M, N, K and the constexprs Triton was given first."""
    import kernels.persistent_tma as pt

    stand_in = StandInKernel(pt._persistent_tma_kernel.arg_names)
    monkeypatch.setattr(pt, "_CALLS", DirectCalls(stand_in))
    cfg = SMALL.replace(block_n=32)
    entry = {"gpu_name": GPU, "dtype": "float16", "m": 32, "n": 64, "k": 48, "variant": "persistent_tma",
             "ms": 0.01, "config": cfg.as_dict()}  # fmt: skip
    path = tmp_path / "best.json"
    document = {"format": "triton-matmul-farm/best-configs", "version": 1, "entries": [entry]}
    path.write_text(json.dumps(document))
    dispatch = Dispatcher.load(path, gpu_name=GPU)
    a, b = _t(32, 48, dtype=torch.float16), _t(48, 64, dtype=torch.float16)
    dispatch(a, b)
    (route,) = dispatch.routes.values()
    assert isinstance(route, BoundCall)
    _, jit_args, kwargs = stand_in.jit_calls[0]
    a2, b2 = _t(32, 48, dtype=torch.float16, seed=1), _t(48, 64, dtype=torch.float16, seed=1)
    c2 = dispatch(a2, b2)
    (call,) = stand_in.compiled.calls
    assert all(desc.base is t for desc, t in zip(call[:3], (a2, b2, c2), strict=True))
    names = stand_in.arg_names[len(jit_args) :]
    assert call[3:] == (32, 64, 48, *(kwargs[name] for name in names))
