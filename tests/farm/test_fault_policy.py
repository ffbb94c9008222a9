"""The fault policy without Ray: suspects per phase, retry once then store, quarantine, timeout vs crash."""

import pytest

from db.records import Status
from farm.faults import FaultPolicy, InFlight, progress_deadline, suspects
from farm.plan import Batch, Point
from kernels import MatmulConfig

VERSIONS = {"tiled": "v1", "splitk": "v1"}
# A ragged shape and three configs of two variants: indices 0, 1, 2 in the batch.
CONFIGS = [
    ("tiled", MatmulConfig(block_m=16, block_n=32, block_k=16)),
    ("splitk", MatmulConfig(block_m=16, block_n=16, block_k=16, split_k=2)),
    ("splitk", MatmulConfig(block_m=32, block_n=16, block_k=16, split_k=4)),
]


def points(m: int = 495, n: int = 333, k: int = 71) -> list[Point]:
    return [Point(variant, "bfloat16", m, n, k, cfg) for variant, cfg in CONFIGS]


def flight(phase: str, *, done=(), current=None, timing=(), shape=(495, 333, 71)) -> InFlight:
    batch_points = points(*shape)
    index_of = {(p.variant, p.config.key): i for i, p in enumerate(batch_points)}
    return InFlight(
        Batch("bfloat16", *shape, batch_points, seed=0),
        worker=0,
        index_of=index_of,
        done=set(done),
        phase=phase,
        current=current,
        timing=tuple(timing),
    )


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        pytest.param(dict(phase="compile"), {0, 1, 2}, id="compile-all-unfinished"),
        pytest.param(dict(phase="compile", done={1}), {0, 2}, id="compile-minus-done"),
        pytest.param(dict(phase="check", current=1, done={0}), {1}, id="check-the-current-point"),
        pytest.param(dict(phase="check", current=None), set(), id="check-before-a-point"),
        pytest.param(dict(phase="timing", timing=(0, 1, 2), done={1}), {0, 2}, id="timing-unfinished"),
        pytest.param(dict(phase="queued", current=0), set(), id="queued-blames-nobody"),
    ],
)
def test_suspects_per_phase(state: dict, expected: set) -> None:
    assert suspects(flight(**state)) == expected


@pytest.mark.parametrize(
    ("state", "gpu_elsewhere", "expected"),
    [
        pytest.param(dict(phase="check", current=0), False, {0, 1}, id="check-and-the-next"),
        pytest.param(
            dict(phase="check", current=0, done={1}), False, {0, 2}, id="check-and-the-next-unfinished"
        ),
        pytest.param(dict(phase="check", current=2), False, {2}, id="check-the-last"),
        pytest.param(dict(phase="check", current=0, done={0}), False, {1}, id="checked-and-recorded"),
        pytest.param(dict(phase="queued"), False, {0}, id="queued-alone-the-first"),
        pytest.param(dict(phase="queued", done={0}), False, {1}, id="queued-alone-past-the-done"),
        pytest.param(dict(phase="queued"), True, set(), id="queued-behind-another-innocent"),
        pytest.param(dict(phase="timing", timing=(0, 2)), False, {0, 2}, id="timing-as-before"),
    ],
)
def test_a_dead_worker_may_have_taken_its_last_report_along(state, gpu_elsewhere, expected) -> None:
    """A process that died may not have delivered the report it yielded last: the point after the
    one heard checked is a suspect too, and a batch heard `queued` held the GPU unless another did."""
    assert suspects(flight(**state), gpu_elsewhere=gpu_elsewhere, died=True) == expected


def test_a_queued_batch_is_innocent_while_another_holds_the_gpu() -> None:
    outcome = FaultPolicy(VERSIONS).lost(flight("queued"), "worker lost", "actor died", gpu_elsewhere=True)
    assert outcome.suspects == [] and len(outcome.innocent) == 3


def test_a_retry_that_dies_before_its_check_is_heard_is_stored_not_run_again() -> None:
    """A dying process's last reports can be lost: the lone retried point, heard only `queued`, is
    the one that killed the worker again."""
    policy = FaultPolicy(VERSIONS)
    first = policy.lost(flight("check", current=1, done={0}), "worker lost", "actor died")
    retry = first.retry[0]
    alone = InFlight(Batch("bfloat16", 495, 333, 71, [retry], seed=0), 0, {}, phase="queued")
    second = policy.lost(alone, "worker lost", "actor died")
    assert second.retry == [] and second.innocent == []
    assert [(p, r.status) for p, r in second.store] == [(retry, Status.CRASHED)]


def test_crash_retries_each_suspect_once_then_stores_crashed() -> None:
    policy = FaultPolicy(VERSIONS)
    first = policy.lost(flight("check", current=1, done={0}), "crashed", "CUDA context lost")
    assert [p.config for p in first.suspects] == [CONFIGS[1][1]]  # a live worker: it is where heard
    assert [p.config for p in first.innocent] == [CONFIGS[2][1]]  # back untouched, not counted
    assert [p.config for p in first.retry] == [CONFIGS[1][1]] and first.store == []

    second = policy.lost(flight("check", current=1, done={0}), "crashed", "CUDA context lost")
    assert second.retry == []
    ((point, record),) = second.store
    assert point.config == CONFIGS[1][1]
    assert (record.status, record.error) == (Status.CRASHED, "crashed: CUDA context lost")
    assert (record.m, record.n, record.k, record.split_k) == (495, 333, 71, 2)
    assert record.operand_bytes == 2 * (495 * 71 + 71 * 333 + 495 * 333)


def test_attempts_are_per_point_not_per_config() -> None:
    """The same config on another shape is another point: its first failure is retried too."""
    policy = FaultPolicy(VERSIONS)
    policy.lost(flight("check", current=0), "crashed", "x")
    other = policy.lost(flight("check", current=0, shape=(24, 40, 48)), "crashed", "x")
    assert [p.shape for p in other.retry] == [(24, 40, 48)] and other.store == []


@pytest.mark.parametrize(
    ("state", "size", "status"),
    [
        pytest.param(dict(phase="check", current=2), 3, Status.TIMEOUT, id="hung-in-check-timeout"),
        pytest.param(dict(phase="compile"), 1, Status.TIMEOUT, id="lone-point-timeout"),
        pytest.param(dict(phase="timing", timing=(0, 2)), 3, None, id="hung-timing-retried-as-crash"),
    ],
)
def test_timeout_versus_crash(state: dict, size: int, status) -> None:
    f = flight(**state)
    f.batch.points = f.batch.points[:size]
    outcome = FaultPolicy(VERSIONS).lost(f, "timeout", "no progress")
    if status is None:  # which of several timed points hung is unknown: each is retried alone
        assert [p.config for p in outcome.retry] == [CONFIGS[0][1], CONFIGS[2][1]] and outcome.store == []
    else:
        assert outcome.retry == [] and {r.status for _, r in outcome.store} == {status}
        assert all(r.error == "timed out: no progress" for _, r in outcome.store)


@pytest.mark.parametrize("status", [Status.CRASHED, Status.TIMEOUT], ids=str)
def test_a_stored_crash_or_timeout_quarantines_its_config(status) -> None:
    policy = FaultPolicy(VERSIONS)
    here, elsewhere = points()[1], points(24, 40, 48)[1]
    assert policy.quarantined(elsewhere) is None
    culprit = here.record(status, f"{status}: killed its worker")
    policy.stored(here, culprit)
    instead = policy.quarantined(elsewhere)
    assert (instead.status, instead.m, instead.split_k) == (status, 24, 2)
    assert instead.error.startswith(f"quarantined: this config ended {status} on 495x333x71")
    assert policy.quarantined(points(24, 40, 48)[2]) is None  # another config of the variant runs
    assert policy.quarantined(Point("splitk", "float16", 24, 40, 48, here.config)) is None  # other dtype


@pytest.mark.parametrize(
    "status", [Status.OK, Status.WRONG, Status.COMPILE_ERROR, Status.LAUNCH_ERROR], ids=str
)
def test_other_outcomes_do_not_quarantine(status) -> None:
    policy = FaultPolicy(VERSIONS)
    policy.stored(points()[0], points()[0].record(status, "" if status == Status.OK else "x"))
    assert policy.quarantined(points(24, 40, 48)[0]) is None


def test_a_quarantined_record_does_not_quarantine_again() -> None:
    """Its own `quarantined` row must not replace the culprit (whose error names the real shape)."""
    policy = FaultPolicy(VERSIONS)
    policy.stored(points()[0], points()[0].record(Status.CRASHED, "crashed: boom"))
    echo = policy.quarantined(points(24, 40, 48)[0])
    policy.stored(points(24, 40, 48)[0], echo)
    assert "on 495x333x71" in policy.quarantined(points(64, 64, 64)[0]).error


@pytest.mark.parametrize(
    ("phase", "current", "expected"),
    [
        ("queued", 500.0, 0.0),  # behind another batch: no deadline
        ("check", 500.0, 100 + 60 + 10 * 2.0),
        ("timing", 500.0, 100 + 60 + 3 * 2.0),
        ("warmup", 500.0, 500.0),  # the compile allowance set at dispatch still holds
        ("warmup", 120.0, 100 + 60 + 3 * 2.0),  # ... unless the warm-up itself needs longer
    ],
    ids=["queued", "check", "timing", "warmup-keeps-compile-allowance", "warmup-extends"],
)
def test_progress_deadline(phase, current, expected):
    assert progress_deadline(phase, 100.0, current, 60.0, 2.0) == pytest.approx(expected)
