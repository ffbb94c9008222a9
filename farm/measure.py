"""The measurement protocol (DESIGN "Measuring one point"), as functions of tensors: no Ray here.

1. Inputs: seeded random normal data on the device, never zeros.
2. Poisoning: before a checked run, the memory the caching allocator hands out next is filled
   with NaN (allocate, fill, free), so an unwritten tile or an unzeroed split-K output shows up.
   Measured on an H200: a grid missing its last tile row left exactly those 44 rows NaN.
3. Accuracy against the fp64 reference (kernels.accuracy); atomic variants run again to record
   nondeterminism (max |c1 - c2|).
4. Timing: the points of a batch are timed in rounds; each round launches every unfinished point
   once, in a fresh random order, each launch behind an L2 flush and between two CUDA events.
   Clock drift then falls on all configs alike instead of on whichever ran last. A round is
   queued behind a GPU sleep as long as the host needs to queue it, and is synchronized once at
   its end: the host's launch time (76 us for a split-K launcher on an H200) never shows in the
   events. A point stops when the 95% confidence interval of its median is within +-target_ci,
   or at max_reps, or when it has used its time cap. Reported: median, p20, p80, reps.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kernels import check_accuracy

Launch = Callable[[], torch.Tensor]

# L2 flush: writing 2x the L2 evicts it; at least 256 MiB, as triton.testing.do_bench does.
MIN_FLUSH_BYTES = 256 * 2**20
# torch.cuda._sleep spins this many cycles per microsecond at about 1.4-2 GHz; the estimate only
# has to be long enough, not exact.
SLEEP_CYCLES_PER_US = 2000
MAX_SLEEP_US = 50_000
# Host time per launch besides the launcher itself: the flush's zero_ and two event records.
ENQUEUE_OVERHEAD_US = 20


def make_inputs(m: int, n: int, k: int, dtype: torch.dtype, device: torch.device, seed: int):
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn((m, k), generator=gen, device=device, dtype=torch.float32).to(dtype)
    b = torch.randn((k, n), generator=gen, device=device, dtype=torch.float32).to(dtype)
    return a, b


def poison_allocator(m: int, n: int, split_k: int, device: torch.device) -> None:
    """Fill with NaN the blocks a launcher's next allocations will get: an output in any dtype,
    an fp32 output, and an fp32 split-K workspace."""
    if device.type != "cuda":
        return  # the CPU allocator does not cache; interpreter tests plant faults directly
    for numel, dtype in ((m * n, torch.float16), (m * n, torch.float32), (split_k * m * n, torch.float32)):
        torch.full((numel,), math.nan, dtype=dtype, device=device)


@dataclass
class CheckResult:
    rel_err: float
    tolerance: float
    nondeterminism: float | None
    host_s: float  # host time of one launcher call, for sizing the round's head start

    @property
    def ok(self) -> bool:
        return self.rel_err <= self.tolerance


def check(
    launch: Launch,
    reference: torch.Tensor,
    dtype: torch.dtype,
    k: int,
    input_precision: str,
    *,
    device: torch.device,
    m: int,
    n: int,
    split_k: int,
    repeats: int,
) -> CheckResult:
    """Run once on poisoned memory and compare with fp64; repeat atomic variants (repeats > 1)."""
    poison_allocator(m, n, split_k, device)
    out = launch()
    _sync(device)
    acc = check_accuracy(out, reference, dtype, k, input_precision)
    nondet = None
    if repeats > 1:
        diffs = []
        for _ in range(repeats - 1):
            again = launch()
            diffs.append((again.double() - out.double()).abs().max().item())
        nondet = max(diffs)
    _sync(device)
    start = time.perf_counter()
    launch()
    host_s = time.perf_counter() - start
    _sync(device)
    return CheckResult(acc.rel_err, acc.tolerance, nondet, host_s)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Timing:
    ms: float
    ms_p20: float
    ms_p80: float
    reps: int


def median_ci_halfwidth(samples: Sequence[float]) -> float:
    """Relative half-width of a 95% confidence interval of the median (order statistics)."""
    xs = sorted(samples)
    n = len(xs)
    half = 1.96 * math.sqrt(n) / 2
    lo, hi = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half) - 1)
    med = statistics.median(xs)
    return (xs[hi] - xs[lo]) / (2 * med) if med > 0 else math.inf


def summarize(samples: Sequence[float]) -> Timing:
    q = statistics.quantiles(samples, n=5, method="inclusive") if len(samples) > 1 else [samples[0]] * 4
    return Timing(statistics.median(samples), q[0], q[3], len(samples))


@dataclass
class TimingPolicy:
    min_reps: int = 10
    max_reps: int = 100
    target_ci: float = 0.005
    max_seconds_per_point: float = 1.0


class CudaClock:
    """Cold-L2 GPU timing with CUDA events; a round is queued behind a sleep and synced once."""

    def __init__(self, device: torch.device, l2_bytes: int):
        self.device = device
        nbytes = max(MIN_FLUSH_BYTES, 2 * l2_bytes)
        self.flush_buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=device)

    def round(self, launches: Sequence[Launch], host_s: Sequence[float]) -> list[float]:
        head_start_us = min(
            MAX_SLEEP_US, 1.5 * (1e6 * sum(host_s) + ENQUEUE_OVERHEAD_US * len(launches)) + 100
        )
        torch.cuda._sleep(int(head_start_us * SLEEP_CYCLES_PER_US))
        events = []
        for launch in launches:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.flush_buffer.zero_()
            start.record()
            launch()
            end.record()
            events.append((start, end))
        torch.cuda.synchronize(self.device)
        return [start.elapsed_time(end) for start, end in events]


class HostClock:
    """Interpreter backend: wall-clock time of each call on the CPU (not a GPU time)."""

    def round(self, launches: Sequence[Launch], host_s: Sequence[float]) -> list[float]:
        times = []
        for launch in launches:
            start = time.perf_counter()
            launch()
            times.append((time.perf_counter() - start) * 1e3)
        return times


def time_interleaved(
    launches: Sequence[Launch], host_s: Sequence[float], clock, policy: TimingPolicy, rng: random.Random
) -> list[Timing]:
    """Time several launchers in interleaved rounds until each is stable or capped."""
    samples: list[list[float]] = [[] for _ in launches]
    spent = [0.0] * len(launches)
    active = list(range(len(launches)))
    while active:
        order = rng.sample(active, len(active))
        times = clock.round([launches[i] for i in order], [host_s[i] for i in order])
        for i, ms in zip(order, times):
            samples[i].append(ms)
            spent[i] += ms / 1e3 + host_s[i]
        active = [i for i in active if not _done(samples[i], spent[i], policy)]
    return [summarize(s) for s in samples]


def _done(samples: list[float], spent_s: float, policy: TimingPolicy) -> bool:
    if len(samples) >= policy.max_reps:
        return True
    if len(samples) < policy.min_reps:
        return False
    return spent_s >= policy.max_seconds_per_point or median_ci_halfwidth(samples) <= policy.target_ci


def warm_up(device: torch.device, seconds: float) -> None:
    """Keep the GPU busy with bf16 matmuls so it leaves its idle clock (345 MHz seen on an H200)."""
    if device.type != "cuda":
        return
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize(device)
