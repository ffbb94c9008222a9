"""The dispatcher's objective: what an eager caller waits for ("eager") or the kernel time ("kernel")."""

import json

import pytest
import torch

import kernels
from kernels import MatmulConfig
from kernels.dispatch import LIBRARY_CALLS, Dispatcher, default_objective
from kernels.tuned import TunedConfigs, TunedEntry

SMS = 132
GPU = "CPU (Triton interpreter)"
SMALL = MatmulConfig(block_m=16, block_n=16, block_k=16, group_m=2, num_warps=4, num_stages=2)
BIG_TILE = MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)


def _dispatcher(shape, rows, dtype="bfloat16", **kwargs) -> Dispatcher:
    """Entries at one shape: (variant, config, kernel ms, host ms) each."""
    entries = [
        TunedEntry(GPU, dtype, *shape, variant, ms, cfg or kernels.LIBRARY_CONFIG, host_ms=host)
        for variant, cfg, ms, host in rows
    ]
    return Dispatcher(TunedConfigs(entries), **kwargs)


@pytest.mark.parametrize(
    ("shape", "rows", "problem", "eager", "kernel"),
    [
        # 495x5333x71 bf16 on the H200: `grouped` 12.9 us of kernel against cuBLAS's 13.6, but ~20 us of
        # launcher host against cuBLAS's 11: an eager caller waits longer for it
        ((495, 5333, 71), [("grouped", SMALL, 0.0129, 0.0201), ("cublas", None, 0.0136, 0.0110)],
         (495, 5333, 71), "cublas", "grouped"),
        # 4097^3's fastest, two launches and padded copies, carried to the short 2000x3000x1500 (2 rounds
        # of K 1500): its 0.100 ms of host outlasts the kernel there, `persistent_tma_pad`'s 0.070 less
        ((4097, 4097, 4097), [("persistent_tma_bands", BIG_TILE, 0.2555, 0.100),
                              ("persistent_tma_pad", BIG_TILE, 0.2788, 0.070),
                              ("cublas", None, 1.026, 0.012)],
         (2000, 3000, 1500), "persistent_tma_pad", "persistent_tma_bands"),
        # a tie within SHORT_CALL_MARGIN goes to the library eagerly; kernel time alone decides otherwise
        ((256, 256, 256), [("grouped", SMALL, 0.050, None), ("cublas", None, 0.051, None)],
         (256, 256, 256), "cublas", "grouped"),
        # a long call: both objectives rank by kernel time
        ((495, 5333, 71), [("grouped", SMALL, 0.150, 0.200), ("cublas", None, 0.160, 0.010)],
         (495, 5333, 71), "grouped", "grouped"),
    ],
    ids=["host-decides", "triton-host-decides", "short-tie", "long-call"],
)  # fmt: skip
def test_the_objective_picks(shape, rows, problem, eager, kernel):
    dispatch = _dispatcher(shape, rows)
    picks = {
        objective: dispatch.choose(*problem, torch.bfloat16, GPU, programs=SMS, objective=objective).variant
        for objective in ("eager", "kernel")
    }
    assert picks == {"eager": eager, "kernel": kernel}
    # the default is the eager objective's rules, as before objectives were named
    assert dispatch.choose(*problem, torch.bfloat16, GPU, programs=SMS).variant == eager


@pytest.fixture
def objectives(monkeypatch):
    """The objective of each 2-D product the dispatchers run."""
    seen, run = [], Dispatcher.run

    def spy(self, a, b, objective):
        seen.append(objective)
        return run(self, a, b, objective)

    monkeypatch.setattr(Dispatcher, "run", spy)
    return seen


@pytest.mark.filterwarnings("ignore:kernels.matmul. no tuned configs")
def test_calls_take_the_dispatchers_objective_or_their_own(objectives):
    a, b = torch.randn(8, 16), torch.randn(16, 8)
    Dispatcher(None, gpu_name=GPU)(a, b)
    Dispatcher(None, gpu_name=GPU, objective="kernel")(a, b)
    Dispatcher(None, gpu_name=GPU, objective="kernel")(a, b, objective="eager")
    Dispatcher(None, gpu_name=GPU)(a, b, objective="kernel")
    assert objectives == ["eager", "kernel", "eager", "kernel"]


def test_a_served_call_follows_its_objective(tmp_path, monkeypatch):
    """Through a best-configs file, the eager call runs cuBLAS and the kernel one the Triton variant."""
    entries = [
        TunedEntry(GPU, "float32", 48, 40, 64, "grouped", 0.0129, SMALL, host_ms=0.0201),
        TunedEntry(GPU, "float32", 48, 40, 64, "cublas", 0.0136, kernels.LIBRARY_CONFIG, host_ms=0.0110),
    ]
    path = tmp_path / "best.json"
    TunedConfigs(entries).save(path)
    launched = []
    monkeypatch.setitem(LIBRARY_CALLS, "cublas", lambda a, b: launched.append("cublas") or a @ b)
    dispatch = Dispatcher.load(path, gpu_name=GPU)
    a, b = torch.randn(48, 64), torch.randn(64, 40)
    dispatch(a, b)
    assert launched == ["cublas"]
    c = dispatch(a, b, objective="kernel")  # grouped: no torch.matmul call
    assert launched == ["cublas"]
    assert kernels.check_accuracy(c, kernels.reference_matmul(a, b), a.dtype, 64).ok
    assert json.loads(path.read_text())["entries"][0]["host_ms"] == 0.0201


def test_an_unknown_objective_is_refused():
    with pytest.raises(ValueError, match="unknown objective 'wall'"):
        Dispatcher(None, objective="wall")
    with pytest.raises(ValueError, match="unknown objective 'wall'"):
        Dispatcher(None)(torch.randn(2, 2), torch.randn(2, 2), objective="wall")


def test_graph_capture_and_compilation_default_to_the_kernel_objective(monkeypatch):
    assert default_objective(torch.device("cpu")) == "eager"
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    assert default_objective(torch.device("cuda")) == "kernel"
    assert default_objective(torch.device("cpu")) == "eager"  # a CPU stream captures nothing
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert default_objective(torch.device("cpu")) == "kernel"
