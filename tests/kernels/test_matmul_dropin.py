"""kernels.matmul as a drop-in for torch.matmul: shapes, dtypes, errors, out=, autograd, torch.compile.

A best-configs file whose only entries are `grouped` (float32, float16) makes every product the
dispatcher may take run a Triton kernel, so each case says which 2-D products launched (none: the
case ran torch.matmul)."""

import json
import types
import warnings

import pytest
import torch
import triton

import kernels.dispatch
from kernels import MatmulConfig, check_accuracy, reference_matmul, relative_error, tolerance
from kernels.dispatch import Dispatcher
from kernels.op import farm_matmul

GPU = "CPU (Triton interpreter)"
SMALL = MatmulConfig(block_m=16, block_n=16, block_k=16, group_m=2, num_warps=4, num_stages=2)


@pytest.fixture
def best(tmp_path):
    return write_best(tmp_path)


def write_best(tmp_path):
    """A best-configs file serving `grouped` at SMALL for float32 and float16 (interpreter rows)."""
    entries = [
        {"gpu_name": GPU, "dtype": dtype, "m": 32, "n": 32, "k": 32, "variant": "grouped", "ms": 0.01,
         "config": SMALL.as_dict()}
        for dtype in ("float32", "float16")
    ]  # fmt: skip
    path = tmp_path / "best.json"
    path.write_text(
        json.dumps({"format": "triton-matmul-farm/best-configs", "version": 1, "entries": entries})
    )
    return path


@pytest.fixture
def dispatch(best):
    return Dispatcher.load(best, gpu_name=GPU)


@pytest.fixture
def launched(monkeypatch):
    """(variant, A's shape, B's shape, objective) of each kernel the dispatchers launch."""
    calls, real = [], kernels.dispatch.get_variant
    run = Dispatcher.run

    def spy(name):
        variant = real(name)

        def launch(a, b, cfg):
            calls.append((name, tuple(a.shape), tuple(b.shape), objectives[-1]))
            return variant.launch(a, b, cfg)

        return types.SimpleNamespace(space=variant.space, launch=launch)

    objectives = []

    def run_spy(self, a, b, objective):
        objectives.append(objective)
        return run(self, a, b, objective)

    monkeypatch.setattr(kernels.dispatch, "get_variant", spy)
    monkeypatch.setattr(Dispatcher, "run", run_spy)
    return calls


def _t(*shape, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed + sum(shape))
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    return torch.randint(-5, 5, shape, generator=gen, dtype=dtype)


def _pair(dtype):
    return _t(20, 24, dtype=dtype), _t(24, 18, dtype=dtype)


def _noncontiguous_3d():
    return _t(5, 3, 24).transpose(0, 1)  # [3, 5, 24], rows 72 elements apart


# (a, b, the 2-D products launched as (A's shape, B's shape)); dtype float32 unless made otherwise
CASES = {
    "2d-2d": (lambda: (_t(20, 24), _t(24, 18)), [((20, 24), (24, 18))]),
    "1d-2d": (lambda: (_t(24), _t(24, 18)), [((1, 24), (24, 18))]),
    "2d-1d": (lambda: (_t(20, 24), _t(24)), [((20, 24), (24, 1))]),
    "3d-2d": (lambda: (_t(3, 8, 24), _t(24, 18)), [((24, 24), (24, 18))]),
    "4d-1d": (lambda: (_t(2, 3, 5, 24), _t(24)), [((30, 24), (24, 1))]),
    "1d-3d-batch-of-one": (lambda: (_t(24), _t(1, 24, 18)), [((1, 24), (24, 18))]),
    "3d-3d": (lambda: (_t(3, 8, 24), _t(3, 24, 18)), []),
    "broadcast-batch": (lambda: (_t(2, 1, 8, 24), _t(3, 24, 18)), []),
    "broadcast-b-batch-of-one": (lambda: (_t(2, 3, 8, 24), _t(1, 1, 24, 18)), [((48, 24), (24, 18))]),
    "b-batch-of-one-more-dims": (lambda: (_t(8, 24), _t(1, 1, 24, 18)), [((8, 24), (24, 18))]),
    "non-contiguous": (lambda: (_t(24, 20).T, _t(18, 24).T), [((20, 24), (24, 18))]),
    "non-contiguous-3d": (lambda: (_noncontiguous_3d(), _t(24, 18)), [((15, 24), (24, 18))]),
    "float16": (lambda: _pair(torch.float16), [((20, 24), (24, 18))]),
    "float64": (lambda: _pair(torch.float64), []),
    "int64": (lambda: _pair(torch.int64), []),
    "1d-1d": (lambda: (_t(24), _t(24)), []),
    "k-zero": (lambda: (_t(20, 0), _t(0, 18)), []),
    "empty-m": (lambda: (_t(0, 24), _t(24, 18)), []),
    "empty-batch": (lambda: (_t(0, 8, 24), _t(24, 18)), []),
    "mismatched": (lambda: (_t(20, 24), _t(25, 18)), []),
    "mismatched-3d-2d": (lambda: (_t(3, 8, 24), _t(25, 18)), []),
    "mixed-dtypes": (lambda: (_t(20, 24), _t(24, 18, dtype=torch.float16)), []),
    "0-d": (lambda: (torch.tensor(2.0), _t(24)), []),
    "not-a-tensor": (lambda: (_t(20, 24), 3), []),
}  # fmt: skip


def _outcome(fn, a, b):
    try:
        return fn(a, b), None
    except Exception as exc:  # the error's type is what is compared
        return None, type(exc)


@pytest.mark.parametrize(("make", "products"), CASES.values(), ids=CASES.keys())
def test_matmul_agrees_with_torch(dispatch, launched, make, products):
    a, b = make()
    expected, expected_error = _outcome(torch.matmul, a, b)
    got, error = _outcome(dispatch, a, b)
    assert error is expected_error
    assert [(a_shape, b_shape) for _, a_shape, b_shape, _ in launched] == products
    assert all(variant == "grouped" for variant, *_ in launched)
    if expected is None:
        return
    assert (got.shape, got.dtype, got.device) == (expected.shape, expected.dtype, expected.device)
    if not products:
        assert torch.equal(got, expected)  # torch.matmul itself ran
    else:
        k = a.shape[-1]
        assert check_accuracy(got, reference_matmul(a, b), a.dtype, k).ok
        assert relative_error(got, expected) <= 2 * tolerance(a.dtype, k)


def test_kernels_matmul_is_the_drop_in(dispatch, launched, monkeypatch):
    """`kernels.matmul` takes the same path through its loaded dispatcher."""
    monkeypatch.setattr(kernels.dispatch.matmul, "_dispatcher", dispatch)
    a, b = _t(3, 8, 24), _t(24, 18)
    assert kernels.matmul(a, b).shape == (3, 8, 18)
    assert [(s_a, s_b) for _, s_a, s_b, _ in launched] == [((24, 24), (24, 18))]


def test_a_cpu_tensor_outside_the_interpreter_runs_torch(best, launched, monkeypatch):
    a, b = _t(20, 24), _t(24, 18)
    Dispatcher.load(best, gpu_name=GPU)(a, b)
    assert len(launched) == 1  # control: under the interpreter the kernel runs
    monkeypatch.setattr(triton.knobs.runtime, "interpret", False)
    assert torch.equal(Dispatcher.load(best, gpu_name=GPU)(a, b), torch.matmul(a, b))
    assert len(launched) == 1


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "out_shape", "warns"),
    [((3, 8, 24), (24, 18), (3, 8, 18), False), ((20, 24), (24, 18), (0,), False),
     ((20, 24), (24,), (4, 4), True)],
    ids=["right-shape", "empty-out", "resized-with-warning"],
)  # fmt: skip
def test_out_is_written_as_torch_writes_it(dispatch, launched, a_shape, b_shape, out_shape, warns):
    a, b = _t(*a_shape), _t(*b_shape)

    def written(fn):
        out = torch.full(out_shape, float("nan"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert fn(a, b, out=out) is out
        return out, [(w.category, str(w.message)) for w in caught]

    (out, caught), (theirs, theirs_caught) = written(dispatch), written(torch.matmul)
    assert len(caught) == len(theirs_caught) == int(warns)
    for (category, message), (their_category, their_message) in zip(caught, theirs_caught):
        # torch's ends with where C++ raised it: " (Triggered internally at ...Resize.cpp:30.)"
        assert category is their_category and their_message.startswith(message)
    assert (out.shape, out.stride()) == (theirs.shape, theirs.stride())
    assert check_accuracy(out, reference_matmul(a, b), a.dtype, a.shape[-1]).ok
    assert len(launched) == 1


@pytest.mark.parametrize(
    ("out_dtype", "grad"), [(torch.float64, False), (torch.float32, True)], ids=["wrong-dtype", "autograd"]
)
def test_out_refused_as_torch_refuses_it(dispatch, out_dtype, grad):
    a, b = _t(20, 24).requires_grad_(grad), _t(24, 18)
    for fn in (torch.matmul, dispatch):
        with pytest.raises(RuntimeError):
            fn(a, b, out=torch.empty(20, 18, dtype=out_dtype))


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "dtype"),
    [((20, 24), (24, 18), torch.float32), ((3, 8, 24), (24, 18), torch.float32),
     ((24,), (24, 18), torch.float32), ((20, 24), (24, 18), torch.float16)],
    ids=["2d-fp32", "3d-2d-fp32", "1d-2d-fp32", "2d-fp16"],
)  # fmt: skip
def test_gradients_equal_torchs_and_run_through_the_dispatcher(dispatch, launched, a_shape, b_shape, dtype):
    a, b = _t(*a_shape, dtype=dtype), _t(*b_shape, dtype=dtype, seed=1)
    grad_out = _t(*torch.matmul(a, b).shape, dtype=dtype, seed=2)

    def grads(fn):
        x, y = a.clone().requires_grad_(), b.clone().requires_grad_()
        fn(x, y).backward(grad_out)
        return x.grad, y.grad

    (ours_a, ours_b), (theirs_a, theirs_b) = grads(dispatch), grads(torch.matmul)
    m, k, n = a.numel() // a_shape[-1], a_shape[-1], b_shape[-1]
    # forward, then dA = dC @ B^T (inner size N) and dB = A^T @ dC (inner size M), each a kernel
    assert [(s_a, s_b) for _, s_a, s_b, _ in launched] == [
        ((m, k), (k, n)),
        ((m, n), (n, k)),
        ((k, m), (m, n)),
    ]
    for ours, theirs, inner in ((ours_a, theirs_a, n), (ours_b, theirs_b, m)):
        assert (ours.shape, ours.dtype) == (theirs.shape, theirs.dtype)
        assert relative_error(ours, theirs) <= 2 * tolerance(dtype, inner)


def test_only_the_needed_gradient_is_computed(dispatch, launched):
    a, b = _t(20, 24).requires_grad_(), _t(24, 18)
    dispatch(a, b).sum().backward()
    assert len(launched) == 2 and b.grad is None


def test_torch_compile_traces_it_without_a_graph_break(dispatch, launched):
    """fullgraph=True fails on any graph break; tracing picks the kernel objective."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, y: dispatch(x, y).relu(), fullgraph=True, backend="aot_eager")
    a, b = _t(3, 8, 24), _t(24, 18)
    got = compiled(a, b)
    assert torch.equal(got, dispatch(a, b).relu())
    assert got.shape == (3, 8, 18)
    assert [(s_a, s_b, objective) for _, s_a, s_b, objective in launched] == [
        ((24, 24), (24, 18), "kernel"),  # compiled
        ((24, 24), (24, 18), "eager"),  # the eager call beside it
    ]


@pytest.mark.parametrize(
    ("a", "b"),
    [_pair(torch.float32), tuple(t.requires_grad_() for t in _pair(torch.float32)),
     (_t(24, 20).T, _t(24, 18)), _pair(torch.float16)],
    ids=["fp32", "fp32-grad", "transposed", "fp16"],
)  # fmt: skip
@pytest.mark.parametrize("objective", ["eager", "kernel"])
def test_opcheck(dispatch, a, b, objective):
    """The op's fake, autograd registration and schema pass torch.library's own checks."""
    torch.library.opcheck(farm_matmul, (a, b, dispatch.op_id, objective))


def test_the_fake_gives_the_shape():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        c = farm_matmul(torch.empty(20, 24), torch.empty(24, 18), 0, "eager")
    assert (c.shape, c.dtype) == ((20, 18), torch.float32)


def test_torch_compile_of_kernels_matmul_before_it_loaded_its_file(best, launched, monkeypatch):
    """A compiled model's first call may be kernels.matmul's first: the op loads the file when it runs,
    after tracing (building a dispatcher inside the trace would break the graph). Gradients flow."""
    monkeypatch.setenv(kernels.dispatch.BEST_CONFIGS_ENV, str(best))
    fresh = kernels.dispatch.Matmul()
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, y: fresh(x, y).sum(), fullgraph=True, backend="aot_eager")
    a, b = _t(3, 8, 24).requires_grad_(), _t(24, 18).requires_grad_()
    compiled(a, b).backward()
    assert fresh._dispatcher is not None
    assert [(s_a, s_b, objective) for _, s_a, s_b, objective in launched] == [
        ((24, 24), (24, 18), "kernel"),  # forward
        ((24, 18), (18, 24), "kernel"),  # dA = dC @ B^T
        ((24, 24), (24, 18), "kernel"),  # dB = A^T @ dC
    ]
    assert relative_error(a.grad, torch.ones(3, 8, 18) @ b.detach().T) <= 2 * tolerance(torch.float32, 18)
