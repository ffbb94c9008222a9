"""What a worker stores when a time is impossible or the instrument fails (in process, no Ray, no GPU).

A time physics forbids (db.physics) is measured again once and stored `implausible` if it repeats; a
failure of the profiler or NVML is timed again once and, in the fresh process the driver gave the
batch, stored `instrument_error` if it repeats (in an older one the batch asks for a fresh process:
test_fresh_process.py); a launcher that raises while timed stays `launch_error`. The clock is
farm.clock.CudaClock on the CPU: CUDA events, sleep and sync faked, the real torch.profiler; faults are
planted in the profiler's and NVML's own calls, where they happen on a GPU."""

import pickle
import time
from collections import Counter
from types import SimpleNamespace

import pynvml
import pytest
import torch

import farm.clock
from cli.sweep import print_summary
from db.records import Status
from farm.clock import CudaClock
from farm.errors import InstrumentError
from farm.gpu import GpuState
from farm.instrument import NVML, PROFILER, instrument_fault
from farm.plan import Batch, Point
from farm.timing.policy import TimingPolicy
from kernels import MatmulConfig
from kernels.registry import _REGISTRY, Variant
from kernels.space import get_space

pytestmark = pytest.mark.filterwarnings("ignore:CUDA is not available, disabling CUDA profiling")

# H100 SXM's peaks: dense bf16 TFLOP/s from the datasheet, HBM3 GB/s.
H100_PEAKS = (989.4, 3350.0)
# A time no GPU reaches for 40x24x48: 0.1 ns, where the H100's roofline allows 3.7 ns (A and B read once).
IMPOSSIBLE_MS = 1e-7
# What torch.profiler raised on a fresh H100 while it stopped: Kineto met a CUPTI flow id twice.
KINETO_ASSERT = (
    'inserted.second INTERNAL ASSERT FAILED at "/pytorch/torch/csrc/profiler/collection.cpp":1152, '
    "please report a bug to PyTorch."
)
# Interleaved rounds: one profiler session a timing request; no energy window, which needs NVML's counter.
POLICY = TimingPolicy(min_reps=2, max_reps=2, regime="interleaved", energy_window_s=0.0, min_metered_s=0.0)


class FakeEvent:
    """A CUDA event the CPU records: the fake GPU reaches it at once."""

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def query(self):
        return True

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3


class QuietMeter:
    """A GPU below its power limit with no energy counter."""

    def state(self):
        return GpuState(1980, 50, 0)

    def energy_mj(self):
        return None

    def power_limit_w(self):
        return None


@pytest.fixture
def on_cuda_clock(worker, monkeypatch):
    """The worker's clock a CudaClock on the CPU, its times checked against an H100's peaks."""
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(farm.clock, "MIN_FLUSH_BYTES", 0)  # 2 MiB to zero a launch, not 256 MiB of a GPU's
    clock = CudaClock(torch.device("cpu"), l2_bytes=2**20, meter=QuietMeter())
    monkeypatch.setattr(worker, "clock", clock)
    monkeypatch.setattr(worker, "peaks", H100_PEAKS)
    return clock


def torch_matmul(refuse_after: int | None = None):
    """A launcher of torch's own matmul (no interpreter: a batch takes milliseconds); refuse_after: it
    raises from that call on (the check makes two calls, so the first timed launch raises)."""
    calls = []

    def launch(a, b, cfg):
        calls.append(1)
        if refuse_after is not None and len(calls) > refuse_after:
            raise RuntimeError(f"refused call {len(calls)}: out of workspace")
        return a @ b

    return launch


def batch_of(monkeypatch, launcher, n_points=2, fresh_process=True) -> Batch:
    """A batch of `n_points` configs of a variant launching `launcher`, on 40x24x48; fresh_process: its
    points were given their fresh process already (farm.faults), so an instrument failing twice is stored."""
    monkeypatch.setitem(_REGISTRY, "plain", Variant("plain", get_space("tiled"), launcher=launcher))
    points = [
        Point("plain", "float32", 40, 24, 48, MatmulConfig(16, bn, 16, num_warps=4, num_stages=2))
        for bn in (16, 32)[:n_points]
    ]
    return Batch("float32", 40, 24, 48, points, seed=1, fresh_process=fresh_process)


def run(worker, batch, policy=POLICY) -> tuple[list, list]:
    """(records, the Progress events of each timing request)."""
    out = list(worker.run_batch(batch, policy, repeats=1))
    return [r for r in out if hasattr(r, "status")], [p for p in out if getattr(p, "phase", "") == "timing"]


def planted(monkeypatch, module, name, sessions: int | None, fault):
    """Replace module.name by a call of the original whose first `sessions` calls (None: all) end in
    `fault(result)`; returns the list of calls made."""
    original = getattr(module, name)
    calls = []

    def call(*args, **kwargs):
        result = original(*args, **kwargs)
        calls.append(1)
        return fault(result) if sessions is None or len(calls) <= sessions else result

    monkeypatch.setattr(module, name, call)
    return calls


def summary_of(records) -> SimpleNamespace:
    """A finished sweep that stored `records`, as cli.sweep.print_summary reads it."""
    counts = Counter(r.status for r in records)
    failures = [r for r in records if r.status != Status.OK]
    return SimpleNamespace(
        status="finished",
        measured=len(records),
        seconds=1.0,
        skipped=0,
        counts=counts,
        failures=failures,
        faults=[],
    )


def lost_kernels(result):
    """The profile kept one activity of 0.1 ns for every launch (the GEMM kernel lost)."""
    return [IMPOSSIBLE_MS] * len(result)


def kineto_assert(result):
    raise RuntimeError(KINETO_ASSERT)


@pytest.mark.parametrize(
    ("bad_sessions", "status"),
    [
        pytest.param(1, Status.OK, id="right-the-second-time"),
        pytest.param(None, Status.IMPLAUSIBLE, id="twice"),
    ],
)
def test_an_impossible_time_is_measured_again_once(
    worker, on_cuda_clock, monkeypatch, capsys, bad_sessions, status
):
    """The profile attributes 0.1 ns to each launch (under the roofline): both points are timed again in
    one request; right then, they are ok at their second time; wrong again, implausible, the time kept."""
    sessions = planted(monkeypatch, farm.clock, "kernel_ms_per_launch", bad_sessions, lost_kernels)
    records, timing = run(worker, batch_of(monkeypatch, torch_matmul()))
    assert len(sessions) == 2 and [t.indices for t in timing] == [(0, 1), (0, 1)]
    assert [r.status for r in records] == [status, status]
    for r in records:
        if status == Status.OK:
            assert r.error == "" and r.ms > 1e-4 and r.ms == r.stream_ms  # the CPU's events: no CUPTI here
        else:
            assert r.ms == IMPOSSIBLE_MS and r.stream_ms > r.ms  # kept for inspection
            assert r.error.startswith(
                "kernel time 0.0001 us beats the roofline (0.00367 us at the GPU's peaks"
            )
            assert "; timed again after: kernel time 0.0001 us beats the roofline" in r.error
    print_summary(summary_of(records), "r.db")
    out = capsys.readouterr().out
    said = "2 points: times physics forbids, twice (db.physics); stored implausible: kernel time 0.0001 us"
    assert (said in out) == (status == Status.IMPLAUSIBLE)
    assert f"exit status {0 if status == Status.OK else 3}:" in out


def test_a_plausible_point_is_not_timed_again(worker, on_cuda_clock, monkeypatch):
    """Only the point whose time broke physics goes back: one request of one point. One launch a point:
    the first launch of the session (whichever point the seeded order put first) reads 0.1 ns."""
    planted(monkeypatch, farm.clock, "kernel_ms_per_launch", 1, lambda result: [IMPOSSIBLE_MS, None])
    one_rep = POLICY.model_copy(update={"min_reps": 1, "max_reps": 1})
    records, timing = run(worker, batch_of(monkeypatch, torch_matmul()), one_rep)
    assert [r.status for r in records] == [Status.OK, Status.OK]
    assert [len(t.indices) for t in timing] == [2, 1]
    again = records[-1]  # the point timed again is stored last
    assert (again.variant, again.config_key) != (records[0].variant, records[0].config_key)


@pytest.mark.parametrize(
    ("failures", "status"),
    [
        pytest.param(1, Status.OK, id="once-then-right"),
        pytest.param(None, Status.INSTRUMENT_ERROR, id="twice"),
    ],
)
def test_a_profiler_failure_is_the_instruments(worker, on_cuda_clock, monkeypatch, capsys, failures, status):
    """torch.profiler's stop raises Kineto's assert (where it raised on the H100): the batch is timed
    again; failing twice, its points are instrument_error (never launch_error), and the sweep's summary
    says the instrument failed, not the kernels."""
    stops = planted(monkeypatch, torch.autograd.profiler, "_disable_profiler", failures, kineto_assert)
    records, timing = run(worker, batch_of(monkeypatch, torch_matmul()))
    assert len(stops) == 2 and len(timing) == 2
    assert [r.status for r in records] == [status, status]
    assert not torch._C._autograd._profiler_enabled()  # the retry could start its own session
    if status == Status.OK:
        assert all(r.ms > 0 for r in records)
        return
    for r in records:
        first, second = r.error.splitlines()
        assert first == f"torch.profiler: RuntimeError: {KINETO_ASSERT}" and r.ms is None
        assert second == "the instrument failed on each of 2 tries; not the kernel's fault"
    print_summary(summary_of(records), "r.db")
    out = capsys.readouterr().out
    assert "instrument_error 2" in out and "exit status 3:" in out
    assert (
        "2 points: the instrument failed (profiler/CUPTI/NVML), not the kernels: "
        f"torch.profiler: RuntimeError: {KINETO_ASSERT}; --retry-failed measures them again"
    ) in out


def test_an_old_process_whose_instrument_fails_twice_asks_for_a_fresh_one(worker, on_cuda_clock, monkeypatch):
    """A batch not given a fresh process yet: after the second failure it stores nothing and reports
    "instrument_stale" with the instrument's words (the driver restarts the worker); the worker times no
    other batch meanwhile."""
    monkeypatch.setattr(worker, "stale", False, raising=False)
    stops = planted(monkeypatch, torch.autograd.profiler, "_disable_profiler", None, kineto_assert)
    out = list(worker.run_batch(batch_of(monkeypatch, torch_matmul(), fresh_process=False), POLICY, 1))
    assert len(stops) == 2 and not [r for r in out if hasattr(r, "status")]
    assert [p.phase for p in out if p.phase in ("timing", "instrument_stale")] == ["timing"] * 2 + [
        "instrument_stale"
    ]
    assert out[-1].indices == (0, 1) and out[-1].message == f"torch.profiler: RuntimeError: {KINETO_ASSERT}"
    assert worker.stale
    after = list(worker.run_batch(batch_of(monkeypatch, torch_matmul()), POLICY, 1))
    assert [p.phase for p in after] == ["queued"] and len(stops) == 2  # refused, not timed


def test_an_nvml_failure_is_the_instruments(worker, on_cuda_clock, monkeypatch):
    """NVML's clock read fails around every block: the meter is farm.gpu.Gpu reading NVML."""
    gpu = worker.gpu
    monkeypatch.setattr(gpu, "_nvml", "handle")
    monkeypatch.setattr(on_cuda_clock, "meter", gpu)

    def clock_info(handle, clock):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetClockInfo", clock_info)
    records, timing = run(worker, batch_of(monkeypatch, torch_matmul(), n_points=1))
    assert len(timing) == 2
    (r,) = records
    assert r.status == Status.INSTRUMENT_ERROR
    assert r.error.splitlines()[0] == "NVML: NVMLError_Unknown: Unknown Error"


def test_a_launcher_that_raises_while_timed_is_a_launch_error(worker, on_cuda_clock, monkeypatch):
    """Its check passed; its first timed launch raises inside the profiler's labelled range: the
    launcher's error, not the profiler's, and not timed again."""
    records, timing = run(worker, batch_of(monkeypatch, torch_matmul(refuse_after=2), n_points=1))
    (r,) = records
    assert len(timing) == 1
    assert r.status == Status.LAUNCH_ERROR and r.error == "RuntimeError: refused call 3: out of workspace"


def _raised_in_a_launcher():
    try:
        raise RuntimeError("my_kernel needs K divisible by 3")
    except RuntimeError as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "instrument"),
    [
        pytest.param(InstrumentError(PROFILER, RuntimeError("x")), PROFILER, id="guarded-profiler-call"),
        pytest.param(RuntimeError(KINETO_ASSERT), PROFILER, id="kineto-assert-unguarded"),
        pytest.param(pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT), NVML, id="nvml-error-unguarded"),
        pytest.param(_raised_in_a_launcher(), None, id="launcher-error"),
        pytest.param(
            RuntimeError("CUDA error: an illegal memory access was encountered"), None, id="cuda-error"
        ),
    ],
)
def test_whose_fault(exc, instrument):
    fault = instrument_fault(exc)
    assert (fault.instrument if fault else None) == instrument
    if fault is not None:  # it crosses processes whole (Ray pickles what a worker raises)
        again = pickle.loads(pickle.dumps(fault))
        assert (again.instrument, str(again)) == (instrument, str(fault)) and str(fault).startswith(
            instrument
        )


@pytest.fixture
def on_gpu(on_cuda_clock, monkeypatch):
    """The CudaClock as on a GPU: a launch without GPU activity in the profile is lost, not a CPU's."""
    monkeypatch.setattr(on_cuda_clock, "device", torch.device("cuda"))
    return on_cuda_clock


def read_by_cupti(clock, lost=lambda i: False):
    """A profile as a GPU's would read: each launch's kernel time 0.9 of its stream time; None (lost)
    for the launches `lost(i)` names, i counted over the session."""

    def profile(result):
        stream = [ms for block, _ in clock._pending for ms in block.stream_ms]
        return [None if lost(i) else 0.9 * ms for i, ms in enumerate(stream)]

    return profile


def planted_sessions(monkeypatch, clock, profiles):
    """kernel_ms_per_launch answers session i with profiles[i] (the last for any later one)."""
    calls = []

    def call(events, n):
        calls.append(1)
        return profiles[min(len(calls), len(profiles)) - 1](n)

    monkeypatch.setattr(farm.clock, "kernel_ms_per_launch", call)
    return calls


def slivers(clock):
    """Every launch read as the five impossible cuBLAS rows did: 0.75 us of memset in 180 us of stream."""
    kept = read_by_cupti(clock)
    return lambda n: [ms / 0.9 * 0.75 / 180 for ms in kept(n)]


@pytest.mark.parametrize(
    ("lost", "second", "status"),
    [
        pytest.param("no-activity", "kept", Status.OK, id="no-activity-then-right"),
        pytest.param("no-activity", "lost", Status.INSTRUMENT_ERROR, id="no-activity-twice"),
        pytest.param("slivers", "lost", Status.INSTRUMENT_ERROR, id="slivers-twice"),
    ],
)
def test_a_session_that_lost_launches_is_the_instruments_fault(
    worker, on_gpu, monkeypatch, lost, second, status
):
    """A launch the profile lost was read as its stream time (ms == stream_ms, launch gaps included:
    a resumed H100 sweep's last batches), or as the sliver it kept (a memset); now a session that lost
    them is the profiler's fault: timed again, then instrument_error, never a time."""
    bad = read_by_cupti(on_gpu, lost=lambda i: True) if lost == "no-activity" else slivers(on_gpu)
    sessions = planted_sessions(
        monkeypatch, on_gpu, [bad, bad if second == "lost" else read_by_cupti(on_gpu)]
    )
    records, timing = run(worker, batch_of(monkeypatch, torch_matmul()))
    assert len(sessions) == 2 and len(timing) == 2
    assert [r.status for r in records] == [status, status]
    for r in records:
        if status == Status.OK:
            assert r.ms == pytest.approx(0.9 * r.stream_ms, rel=0.2) and r.ms < r.stream_ms
        else:
            assert r.ms is None
            assert r.error.splitlines()[0] == (
                "torch.profiler: the profile lost the GPU work of 4 of the session's 4 launches "
                "(no activity, or under 1/50 of their stream time)"
            )


@pytest.mark.parametrize(
    "one_launch",
    [
        pytest.param(lambda ms: None, id="no-activity"),
        # what the five impossible cuBLAS rows read: 0.75 us of memset in 180 us of stream
        pytest.param(lambda ms: ms * 0.75 / 180, id="a-sliver"),
    ],
)
def test_a_launch_lost_from_a_session_that_kept_the_rest_is_no_sample(
    worker, on_gpu, monkeypatch, one_launch
):
    """One lost launch in 40 (under farm.clock.MAX_LOST_SHARE): dropped from its point's samples, not
    replaced by its stream time."""
    policy = POLICY.model_copy(update={"min_reps": 20, "max_reps": 20})
    kept = read_by_cupti(on_gpu)

    def first_lost(n):
        times = kept(n)
        return [one_launch(times[0] / 0.9), *times[1:]]

    planted_sessions(monkeypatch, on_gpu, [first_lost])
    records, timing = run(worker, batch_of(monkeypatch, torch_matmul()), policy)
    assert len(timing) == 1 and [r.status for r in records] == [Status.OK, Status.OK]
    assert sorted(r.reps for r in records) == [19, 20]
