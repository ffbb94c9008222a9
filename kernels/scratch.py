"""Scratch the summing kernels keep zeroed themselves: fp32 tile slots and int32 arrival counters.

A tile whose K range is cut between programs (`splitk`, `streamk`, `streamk_hybrid`, `splitk_tma`)
is summed in an fp32 slot with atomics. Each contributor adds its part, then its K iterations to
the tile's counter (release, after a CTA barrier so every thread's adds are done); the one that
brings the count to the tile's K iterations is the last (`contribute`): it reads the sum (acquire;
loads that bypass L1), zeroes the slot and the counter for the next launch (`take_sum`) and stores
the tile in the output dtype. No program waits on another, so no schedule deadlocks, the
interpreter's sequential one included.

So no eager launch zeroes anything: the slots and counters are zeroed once, when first made, and
kept per device and stream (two launches on different streams never share them); a CUDA graph
being captured gets its own, zeroed by a memset node each replay runs. Before, `splitk` and `streamk`
zeroed an fp32 copy of C and converted it afterwards, three launches a call where this is one, and a
launcher's host time is what an eager caller of a short split-K kernel waits for: on H100 hosts the
split-K launcher took 48.3-62.0 us a call with them, 23.4-40.5 without (kernels_per_call 3 -> 1,
docs/results/launch_overhead.csv), every result accurate over 30 calls of six shapes and in
CUDA-graph replays.

The kept slots grow to the largest problem seen and are never given back: at most the fp32 size of
the largest C that went through split-K or stream-K (64 MiB at 4096 x 4096), as PyTorch's caching
allocator kept the zeroed copy before.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# (device, stream, dtype) -> a buffer its kernels leave zeroed
_KEPT: dict[tuple, torch.Tensor] = {}

# Counters are few (one per tile): allocated at least this many, so most problems reuse the first.
MIN_COUNTERS = 1024


def _place(device: torch.device) -> tuple | None:
    """What kept scratch is kept for on this call: (device, its current stream); None while the stream
    captures a CUDA graph, which gets its own (`_kept_zeroed`). Asked once a launch, not once a buffer."""
    if device.type != "cuda":
        return device, 0
    if torch.cuda.is_current_stream_capturing():
        return None
    # The stream's raw handle from Triton's driver (0.2 us), not `torch.cuda.current_stream(device)`,
    # which builds a Stream object: 7-10 us of a call's host time on the H200's host.
    return device, triton.runtime.driver.active.get_current_stream(device.index)


def _kept_zeroed(numel: int, dtype: torch.dtype, device: torch.device, place: tuple | None) -> torch.Tensor:
    if place is None:
        # A CUDA graph being captured gets its own, zeroed by a memset it replays: memory allocated
        # now is the graph's, and holds nothing until a replay, so it cannot serve eager calls, and a
        # kept buffer shared with a graph could be summed into by a replay and an eager call at once.
        return torch.zeros(numel, dtype=dtype, device=device)
    key = (*place, dtype)
    kept = _KEPT.get(key)
    if kept is None or kept.numel() < numel:
        kept = _KEPT[key] = torch.zeros(numel, dtype=dtype, device=device)
    return kept


def zeroed_counters(tiles: int, device: torch.device) -> torch.Tensor:
    """At least `tiles` zeroed int32 counters, kept for this device and its current stream."""
    return _counters(tiles, device, _place(device))


def _counters(tiles: int, device: torch.device, place: tuple | None) -> torch.Tensor:
    return _kept_zeroed(max(tiles, MIN_COUNTERS), torch.int32, device, place)


def zeroed_scratch(
    tiles: int, block_m: int, block_n: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """A summing kernel's (slots, counters): zeroed fp32 slots for `tiles` tiles of block_m x block_n (one
    at least: a launch with nothing to share still passes a pointer) and their counters, kept for this
    device and its current stream."""
    place = _place(device)
    slots = _kept_zeroed(max(tiles, 1) * block_m * block_n, torch.float32, device, place)
    return slots, _counters(tiles, device, place)


class ScratchOperands:
    """A bound summing kernel's leading arguments (`kernels.launching.BoundCall`): the tensors, then the
    slots and counters for `tiles` tiles, looked up at each call (kept per stream: the call's stream
    may not be the first call's)."""

    __slots__ = ("block_m", "block_n", "tiles")

    def __init__(self, tiles: int, block_m: int, block_n: int) -> None:
        self.tiles, self.block_m, self.block_n = tiles, block_m, block_n

    def __call__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple:
        return a, b, c, *zeroed_scratch(self.tiles, self.block_m, self.block_n, a.device)


def scratch_is_zeroed() -> bool:
    """Whether every kept slot and counter is zero: what each launch must leave behind."""
    return all(not bool(kept.any()) for kept in _KEPT.values())


def clear_scratch(device: torch.device) -> bool:
    """Zero the slots and counters kept for `device`'s current stream; whether any was not zero. Each
    launch must leave them zeroed (`take_sum`); one that does not makes every later summing launch on
    the stream add to its leftovers, so the farm clears them around each point's check
    (farm/measure.py) and calls the point that left them `wrong`. Nothing is kept while a CUDA graph
    is captured: False."""
    place = _place(device)
    if place is None:
        return False
    dirty = False
    for key, kept in _KEPT.items():
        if key[:2] == place and bool(kept.any()):
            kept.zero_()
            dirty = True
    return dirty


@triton.jit
def contribute(
    ws_ptr, counts_ptr, tile, acc, iters, iters_per_tile, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    """Add acc, `iters` K iterations of `tile`, into the tile's fp32 slot.

    Returns the slot and whether this contributor completed the tile's `iters_per_tile`: that one,
    and only that one, then takes the sum (`take_sum`) and stores it.
    """
    offsets = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    slot = ws_ptr + tile.to(tl.int64) * (BLOCK_M * BLOCK_N) + offsets
    tl.atomic_add(slot, acc, sem="relaxed")
    tl.debug_barrier()  # every thread's adds precede the release below
    before = tl.atomic_add(counts_ptr + tile, iters, sem="acq_rel")
    return slot, before + iters == iters_per_tile


@triton.jit
def take_sum(slot, counts_ptr, tile):
    """The last contributor's read of its tile's sum, leaving the slot and the counter zeroed."""
    total = tl.load(slot, cache_modifier=".cg")  # the other contributors' adds live in L2
    tl.store(slot, tl.zeros_like(total))
    tl.store(counts_ptr + tile, 0)
    return total
