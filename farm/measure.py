"""The measurement protocol (DESIGN "Measuring one point"), as functions of tensors: no Ray here.

1. Inputs: seeded random normal data on the device, never zeros.
2. Poisoning: before a checked run, the memory the caching allocator hands out next is filled
   with NaN (allocate, fill, free), so an unwritten tile or an unzeroed split-K output shows up.
   Measured on an H200: a grid missing its last tile row left exactly those 44 rows NaN.
3. Accuracy against the fp64 reference (kernels.accuracy); atomic variants run again to record
   nondeterminism (max |c1 - c2|). The summing variants' kept scratch (kernels.scratch) must be
   zero after the check's launches: a point that leaves it dirty is wrong, and it is zeroed so the
   next point starts clean (found dirty before a check, it is zeroed too, with a warning: an
   earlier point's timed launches left it).
4. Timing, in a named regime: farm.timing (which blocks of launches run when, and when a point
   stops), over farm.clock (how one block is timed: L2 flush, head start, CUPTI, NVML).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import torch

from farm.clock import Launch
from kernels import check_accuracy
from kernels.scratch import clear_scratch


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
    host_s: float  # host time of one launcher call, for sizing the head start of blocks
    scratch_left: bool = False  # the launches left the kept split-K scratch not zeroed

    @property
    def ok(self) -> bool:
        return self.rel_err <= self.tolerance and not self.scratch_left


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
    """Run once on poisoned memory and compare with fp64; repeat atomic variants (repeats > 1); see
    whether the launches left the kept scratch zeroed."""
    if clear_scratch(device):
        said = "kept split-K scratch was not zeroed before this check: an earlier point's launches left it"
        warnings.warn(said, stacklevel=2)
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
    return CheckResult(acc.rel_err, acc.tolerance, nondet, host_s, scratch_left=clear_scratch(device))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
