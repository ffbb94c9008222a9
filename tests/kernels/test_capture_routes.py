"""A decided call whose objective is the default asks whether the stream captures a CUDA graph only where
the two defaults decide its product differently (kernels/op.py, `ByCapture`): the query is 0.9 us of a
decided cuBLAS call's host time on an H100 host.

This machine has no CUDA: the capture state is a flag the tests set, read where kernels.op reads it
(`_capturing`) and where the dispatcher resolves its default (`default_objective`), and CPU operands
are taken as a device's that captures (`_may_capture`)."""

import pytest
import torch

import kernels
from kernels import MatmulConfig, check_accuracy, op, reference_matmul
from kernels.dispatch import LIBRARY_CALLS, Dispatcher
from kernels.tuned import TunedConfigs, TunedEntry

GPU = "CPU (Triton interpreter)"
SMALL = MatmulConfig(block_m=16, block_n=16, block_k=16, group_m=2, num_warps=4, num_stages=2)
SHAPE = (48, 40, 64)
# 495x5333x71's H200 rows at a small shape: `grouped` is the faster kernel, cuBLAS the shorter eager
# wait, so the eager objective serves cuBLAS and the kernel objective (a capture's) `grouped`
SPLIT = [("grouped", SMALL, 0.0129, 0.0201), ("cublas", None, 0.0136, 0.0110)]
# a long call: both objectives serve `grouped`
AGREED = [("grouped", SMALL, 0.150, 0.200), ("cublas", None, 0.160, 0.010)]


@pytest.fixture
def capture(monkeypatch):
    """{"on": whether the stream captures, "queries": capture queries kernels.op made, "cublas": calls
    served by the library}."""
    state = {"on": False, "queries": 0, "cublas": 0}

    def capturing() -> bool:
        state["queries"] += 1
        return state["on"]

    def cublas(a, b):
        state["cublas"] += 1
        return torch.matmul(a, b)

    monkeypatch.setattr(op, "_capturing", capturing)
    monkeypatch.setattr(op, "_may_capture", lambda t: True)
    monkeypatch.setattr(
        Dispatcher, "default_objective", staticmethod(lambda d: "kernel" if state["on"] else "eager")
    )
    monkeypatch.setitem(LIBRARY_CALLS, "cublas", cublas)
    return state


def _dispatcher(rows, **kwargs) -> Dispatcher:
    entries = [
        TunedEntry(GPU, "float32", *SHAPE, variant, ms, cfg or kernels.LIBRARY_CONFIG, host_ms=host)
        for variant, cfg, ms, host in rows
    ]
    return Dispatcher(TunedConfigs(entries), gpu_name=GPU, **kwargs)


def _operands():
    m, n, k = SHAPE
    return torch.randn(m, k), torch.randn(k, n)


def _ok(c, a, b) -> bool:
    return check_accuracy(c, reference_matmul(a, b), a.dtype, a.shape[1]).ok


def test_where_the_defaults_differ_each_capture_state_keeps_its_own_route(capture):
    dispatch = _dispatcher(SPLIT)
    a, b = _operands()
    assert _ok(dispatch(a, b), a, b) and capture["cublas"] == 1  # eager: the library
    assert _ok(dispatch(a, b), a, b) and capture["cublas"] == 2
    (route,) = dispatch.routes.values()
    assert isinstance(route, op.ByCapture) and route.captured is None
    assert (dispatch.routes.served, dispatch.routes.decided) == (1, 1)

    capture["on"] = True  # a capture's first call decides its own route: `grouped`, not the library
    assert _ok(dispatch(a, b), a, b) and capture["cublas"] == 2
    assert (dispatch.routes.served, dispatch.routes.decided) == (2, 2)
    assert _ok(dispatch(a, b), a, b) and capture["cublas"] == 2
    assert (dispatch.routes.served, dispatch.routes.decided) == (3, 2)
    assert route.captured is not None and len(dispatch.routes) == 1

    capture["on"] = False  # and back: the eager route, decided once
    assert _ok(dispatch(a, b), a, b) and capture["cublas"] == 3
    assert (dispatch.routes.served, dispatch.routes.decided) == (4, 2)


@pytest.mark.parametrize(
    ("rows", "kwargs", "call_objective", "library_serves"),
    [(AGREED, {}, None, False), (SPLIT, {}, "eager", True), (SPLIT, {"objective": "kernel"}, None, False)],
    ids=["defaults-agree", "objective-given", "dispatchers-own-objective"],
)
def test_a_route_that_no_capture_state_changes_never_asks(
    capture, rows, kwargs, call_objective, library_serves
):
    """The defaults agree, or the objective is not a default (the call's, the dispatcher's own): one
    route for every state, and a decided call makes no capture query."""
    dispatch = _dispatcher(rows, **kwargs)
    a, b = _operands()
    dispatch(a, b, objective=call_objective)
    (route,) = dispatch.routes.values()
    assert not isinstance(route, op.ByCapture)
    before, cublas = capture["queries"], capture["cublas"]
    for on in (False, True, False):
        capture["on"] = on
        assert _ok(dispatch(a, b, objective=call_objective), a, b)
    assert capture["queries"] == before
    assert capture["cublas"] - cublas == (3 if library_serves else 0)  # the one route, in every state
    assert (dispatch.routes.served, dispatch.routes.decided) == (3, 1)
