"""farm.cupti's attribution over a profile recorded on an H100, and the loss the shipped rows show.

The fixture is farm.clock's own session of ten cuBLAS 4096^3 launches, as Kineto returned it
(tests/farm/data/cublas_4096_h100_session.json says how it was recorded). Each launch issues a
workspace memset (runtime API, cudaMemsetAsync) and the GEMM (driver API, cuLaunchKernelEx); the
flush and the head-start spin kernel run between launches, outside every launch's range. The five
impossible cuBLAS rows of the shipped H100 study kept each launch's memset and lost its GEMM: the
same session with its GEMM records dropped, as Kineto drops records it finds out of range.
"""

import json
from pathlib import Path

import pytest

from db.physics import lost_kernels
from farm.clock import MAX_LOST_SHARE
from farm.cupti import Activity, kernel_ms_per_launch

RECORDED = json.loads((Path(__file__).parent / "data" / "cublas_4096_h100_session.json").read_text())
LAUNCHES = len(RECORDED["kernel_ms"])
GEMM = "nvjet_"  # cuBLAS's Hopper GEMM kernels


def _activities(raw: list[list]) -> list[Activity]:
    """Kineto's raw events as farm.cupti.activities reads them from a live session."""
    return [
        Activity(name, corr, start / 1e3, end / 1e3, device.endswith("CPU"), annotation)
        for name, corr, _linked, start, end, device, annotation in raw
    ]


def test_each_launch_is_its_memset_and_gemm_and_nothing_between_launches():
    events = _activities(RECORDED["raw"])
    kernel = kernel_ms_per_launch(events, LAUNCHES)
    assert kernel == pytest.approx(RECORDED["kernel_ms"], abs=1e-9)  # what the clock read on the H100
    for i, ms in enumerate(kernel):
        # the GEMM and the memset issued inside launch i's host range, nothing else
        mine = [e for e in events if not e.cpu and not e.annotation and _issued_in(events, e, i)]
        assert sorted(e.name.split("_")[0] for e in mine) == ["Memset (Device)", "nvjet"]
        assert ms < RECORDED["stream_ms"][i]  # a launch's kernels run inside its stream time
    between = [e for e in events if not e.cpu and ("elementwise" in e.name or "spin_kernel" in e.name)]
    assert len(between) == 2 * LAUNCHES  # a flush and a head-start spin a round
    assert not any(_issued_in(events, e, i) for e in between for i in range(LAUNCHES))


def test_the_session_that_lost_its_gemms_reads_as_the_shipped_rows_and_is_refused():
    """Without its GEMM records a launch keeps 1-2 us of memset in 180 us of stream: the shipped rows'
    0.75-1.0 us in 19.5-222 us. Each such launch is no sample (db.physics.lost_kernels), and a session
    that lost over MAX_LOST_SHARE of its launches is the instrument's fault (farm.clock)."""
    kept = [r for r in RECORDED["raw"] if not r[0].startswith(GEMM)]
    assert len(kept) == len(RECORDED["raw"]) - LAUNCHES
    kernel = kernel_ms_per_launch(_activities(kept), LAUNCHES)
    assert all(ms is not None and ms < 0.003 for ms in kernel)  # the memset alone
    lost = [lost_kernels(ms, s) for ms, s in zip(kernel, RECORDED["stream_ms"])]
    assert all(lost) and sum(lost) > MAX_LOST_SHARE * LAUNCHES
    # control: the recorded session loses none
    whole = kernel_ms_per_launch(_activities(RECORDED["raw"]), LAUNCHES)
    assert not any(lost_kernels(ms, s) for ms, s in zip(whole, RECORDED["stream_ms"]))


def test_a_launch_whose_gemm_alone_was_dropped_is_the_one_lost():
    """Kineto drops a session's first records first (docs/design.md, "Instrument faults"): with launch
    0's GEMM gone, launch 0 alone reads as lost, and one launch of ten is over MAX_LOST_SHARE."""
    first_gemm = min((r for r in RECORDED["raw"] if r[0].startswith(GEMM)), key=lambda r: r[3])
    kernel = kernel_ms_per_launch(_activities([r for r in RECORDED["raw"] if r is not first_gemm]), LAUNCHES)
    lost = [lost_kernels(ms, s) for ms, s in zip(kernel, RECORDED["stream_ms"])]
    assert lost == [True] + [False] * (LAUNCHES - 1)
    assert sum(lost) > MAX_LOST_SHARE * LAUNCHES


def _issued_in(events: list[Activity], gpu: Activity, launch: int) -> bool:
    """Whether the host call that issued `gpu` (same correlation id) started inside launch's host range."""
    (rng,) = [e for e in events if e.cpu and e.name == f"farm_launch_{launch}"]
    calls = [e for e in events if e.cpu and e.id == gpu.id and e.name.startswith("cu")]
    return any(rng.start_us <= c.start_us <= rng.end_us for c in calls)
