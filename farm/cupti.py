"""Kernel time per launch from a torch.profiler (CUPTI) session: which GPU activities each launcher
call issued, and the length of their union. farm.clock labels each call of a profiled block
(`LAUNCH_LABEL`) and reads the session here once it closes.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

# record_function label of one launcher call in a profiled block: farm_launch_<index>.
LAUNCH_LABEL = "farm_launch_"


@dataclass(frozen=True)
class Activity:
    """One profiler event, as kernel_ms_per_launch reads it (times in microseconds)."""

    name: str
    id: int  # correlation id: a CUDA runtime/driver call and the GPU work it issued share it
    start_us: float
    end_us: float
    cpu: bool
    annotation: bool = False  # a record_function range (its host side, or its GPU-side span)


def activities(prof) -> list[Activity]:
    """A finished torch.profiler session's events, from Kineto's raw results. torch's own
    `prof.events()` builds a FunctionEvent tree first: 3.4-4.0 s for one interleaved batch of 48
    configs (about 87,000 events), twice the 2.0 s of its GPU blocks (H200);
    reading the raw events is a few method calls per event. Falls back on events() where a torch
    has no raw results."""
    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if results is None:
        return [
            Activity(
                e.name,
                e.id,
                e.time_range.start,
                e.time_range.end,
                _is_cpu_type(getattr(e, "device_type", "CPU")),
                bool(getattr(e, "is_user_annotation", False)),
            )
            for e in prof.events()
        ]
    return [
        Activity(
            e.name(),
            e.correlation_id(),
            e.start_ns() / 1e3,
            e.end_ns() / 1e3,
            _is_cpu_type(e.device_type()),
            e.is_user_annotation(),
        )
        for e in results.events()
    ]


def kernel_ms_per_launch(
    events: Sequence[Activity], n_launches: int, label: str = LAUNCH_LABEL
) -> list[float | None]:
    """GPU activity time per launch: the length of the union of its activities' intervals (`busy_ms`).

    Each launcher call ran inside record_function(f"{label}{i}"). A GPU activity (kernel, memset,
    memcpy) belongs to the launch whose host range holds the CUDA runtime/driver call that issued
    it (same correlation id); the flush and the head-start sleep were issued outside every range
    and drop out. None for a launch with no activity (the profiler lost it).
    """
    host_spans, gpu_spans, issued, device = [], [], {}, []
    for e in events:
        if e.name.startswith(label):
            spans = host_spans if e.cpu else gpu_spans  # the GPU-side span covers the range's GPU work
            spans.append((e.start_us, e.end_us, int(e.name[len(label) :])))
        elif e.cpu and e.name.startswith("cu"):  # cudaLaunchKernel, cuLaunchKernelEx, cudaMemsetAsync...
            issued[e.id] = e.start_us
        elif not e.cpu and not e.annotation:
            device.append(e)
    intervals: list[list[tuple[float, float]]] = [[] for _ in range(n_launches)]
    host_spans.sort()
    gpu_spans.sort()
    for e in device:
        t = issued.get(e.id)
        # by the host call that issued it; else (no runtime event recorded) by the GPU-side span
        i = _span_of(host_spans, t) if t is not None else _span_of(gpu_spans, e.start_us)
        if i is not None and 0 <= i < n_launches:
            intervals[i].append((e.start_us, e.end_us))
    return [busy_ms(spans) if spans else None for spans in intervals]


def busy_ms(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start_us, end_us) intervals, in ms: the sum of their durations
    where they do not overlap. Overlapping ones count once: a kernel launched dependent on the one
    before it (`kernels.launching.dependent_launch`) starts early and waits, and CUPTI's duration
    for it covers the wait (split-K's reduce resident through its product's run)."""
    total_us, reached = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end > reached:
            total_us += end - max(start, reached)
            reached = end
    return total_us / 1e3


def _span_of(spans: list[tuple[float, float, int]], t: float) -> int | None:
    """The label of the sorted span holding t."""
    j = bisect.bisect_right(spans, (t, math.inf, 0)) - 1
    return spans[j][2] if j >= 0 and t <= spans[j][1] else None


def _is_cpu_type(device_type) -> bool:
    return str(device_type).endswith("CPU")
