"""One call's time on a GPU, four ways, to compare in one process (each has its own bias):

- `graph_warm_us`: calls captured in a CUDA graph and replayed: GPU time only, with L2 warm (what
  `triton.testing.do_bench_cudagraph` reads);
- `graph_flushed_us`: [zero a 256 MB buffer, call] captured, minus [zero] alone, the two replayed in
  pairs: GPU time with L2 flushed as do_bench flushes it, and no host time (`graphs_flushed_us`:
  several calls' at once, their replays interleaved);
- `do_bench_us`: `triton.testing.do_bench`'s median, eager, L2 flushed: the larger of a call's GPU
  time and its host time past the flush's (about 70 us on an H200);
- `host_us`: the host's time to queue one call, the best of a few passes (one pass read twice the
  time of another on the same launcher; benchmarks/launch_overhead.py keeps its one pass).

Used by benchmarks/fidelity.py, benchmarks/launch_overhead.py and tools/library_bench.py. The callable
must be capturable (no host sync, no allocation that changes between calls beyond PyTorch's caching
allocator).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

FLUSH_BYTES = 256 * 1024 * 1024  # do_bench's L2 flush: four times the H200's 60 MB of L2


def _timed_ms(replay: Callable[[], None]) -> float:
    """ms of one `replay()` between two events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _replay_ms(replay: Callable[[], None], replays: int) -> float:
    """Median ms of `replay()`."""
    return statistics.median(_timed_ms(replay) for _ in range(replays))


def _interleaved_differences_ms(
    replays_of: dict[str, Callable[[], None]], baseline: Callable[[], None], rounds: int
) -> dict[str, float]:
    """Each replay's ms minus the baseline's, the median over `rounds` rounds; a round replays the
    baseline and every one of `replays_of` back to back, the order rotated a step each round, and
    takes each difference within the round. So a clock that drifts between rounds enters no difference,
    and every replay sees the same clocks: with one replay, pairs whose first alternates.

    Why: timed as two blocks, one torch.matmul timed twice in the same rounds read up to 9.4% apart on
    power-capped rows (1215-1800 MHz), within 1.4% at 1980 MHz (H200); each contender's
    pairs taken apart, seconds from the others', still read the same kernel 3.1-6.4% apart on the five
    capped rows, and within 0.5% on uncapped ones; rivals interleaved in rounds, within 1.7%
    on 17 capped rows, 0.12% at the median."""
    names = [*replays_of, None]  # None: the baseline
    differences: dict[str, list[float]] = {name: [] for name in replays_of}
    for r in range(rounds):
        ms = {
            name: _timed_ms(baseline if name is None else replays_of[name])
            for name in names[r % len(names) :] + names[: r % len(names)]
        }
        for name in replays_of:
            differences[name].append(ms[name] - ms[None])
    return {name: statistics.median(ds) for name, ds in differences.items()}


def captured(body: Callable[[], None]) -> torch.cuda.CUDAGraph:
    """body captured in a CUDA graph, after one eager run on a side stream (compiles, allocates)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        body()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def graph_warm_us(fn: Callable[[], object], calls: int = 20, replays: int = 15) -> float:
    graph = captured(lambda: [fn() for _ in range(calls)])
    return _replay_ms(graph.replay, replays) * 1000 / calls


class Flush:
    """do_bench's L2 flush, captured beside a call: `graph_flushed_us`."""

    def __init__(self, device: torch.device | None = None) -> None:
        self.buffer = torch.empty(FLUSH_BYTES, dtype=torch.int8, device=device or torch.device("cuda"))

    def graph_flushed_us(self, fn: Callable[[], object], calls: int = 10, replays: int = 15) -> float:
        return self.graphs_flushed_us({"fn": fn}, calls, replays)["fn"]

    def graphs_flushed_us(
        self,
        fns: dict[str, Callable[[], object]],
        calls: int = 10,
        replays: int = 15,
        on_capture_error: Callable[[str, Exception], None] | None = None,
    ) -> dict[str, float]:
        """Each fn's time a call: [zero, fn] x calls captured, minus [zero] x calls, their replays
        interleaved (`_interleaved_differences_ms`), so that rivals timed together see the same clocks.
        A fn that cannot be captured (it syncs, or allocates outside the caching allocator) raises, or
        with `on_capture_error` is reported to it and left out."""

        def flushed(fn: Callable[[], object] | None) -> Callable[[], None]:
            def body() -> None:
                for _ in range(calls):
                    self.buffer.zero_()
                    if fn is not None:
                        fn()

            return body

        replays_of = {}
        for name, fn in fns.items():
            try:
                replays_of[name] = captured(flushed(fn)).replay
            except Exception as exc:
                if on_capture_error is None:
                    raise
                on_capture_error(name, exc)
        alone = captured(flushed(None))
        differences = _interleaved_differences_ms(replays_of, alone.replay, replays)
        return {name: ms * 1000 / calls for name, ms in differences.items()}


def do_bench_us(fn: Callable[[], object], rep_ms: int = 60) -> float:
    import triton

    return 1000 * triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median")


def paired_host_us(
    fn: Callable[[], object], ref: Callable[[], object], calls: int = 200, pairs: int = 7
) -> tuple[float, float, float]:
    """fn's and ref's host time a call, and their ratio, from `pairs` pairs of passes, fn's and ref's
    alternating (which goes first alternates too): each time the best pass, the ratio the median of the
    pairs' ratios. The H200 hosts' host time moves by up to 2x from process to process and minute to
    minute (torch.matmul 12.8 and 26.4 us a call minutes apart); a pair sees one host state."""
    fn_us, ref_us = rotated_host_us([fn, ref], calls, pairs)
    ratio = statistics.median(f / r for f, r in zip(fn_us, ref_us, strict=True))
    return min(fn_us), min(ref_us), ratio


def rotated_host_us(fns: list[Callable[[], object]], calls: int = 200, rounds: int = 7) -> list[list[float]]:
    """Each fn's host us a call in each of `rounds` rounds, a round one pass of `calls` calls of every
    fn, the order rotated round to round (which goes first moves): paired_host_us's pairs for any number
    of callables, so each round's times compare one host state."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for i in range(rounds):
        for j in range(len(fns)):
            at = (i + j) % len(fns)
            times[at].append(host_us(fns[at], calls, passes=1))
    return times


def host_us(fn: Callable[[], object], calls: int = 100, passes: int = 3) -> float:
    """The host's time to queue one call: after one call (which may compile or plan), the best pass of
    `calls` calls, synchronised around each."""
    fn()
    best = float("inf")
    for _ in range(passes):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return best
