"""Program -> tile mappings shared by the schedules, as pure Python and as their jit mirrors.

The Python functions are the specification: tests enumerate them for small grids and prove
every tile is produced exactly once (`tile_coverage`), and check each jit mirror against its
Python twin under the interpreter. The variant files import the jit mirrors.

Grouped order (GROUP_SIZE_M): programs walk GROUP_M tile rows column by column, so the B
columns a group loads stay in L2 while its A rows are reused. The last group may be short;
its actual height is the divisor (`min(num_pid_m - first_pid_m, GROUP_M)`), never the constant:
with the constant, num_pid_m=3, num_pid_n=2, GROUP_M=2 maps pids 4 and 5 both to (2, 0).

Persistent grids: how many programs (`multiprocessor_count`), and where C is cut so that one band
fills whole waves and the rest runs in smaller tiles (`wave_bands`, `tail_tile`).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.sizes import aligned_chunk, cdiv  # the kernels import them from here

# Programs a persistent schedule launches when the device cannot say how many SMs it has (the
# interpreter on a CPU): a few, so that programs walk several tiles and share them as on a GPU.
FALLBACK_PROGRAMS = 4


def grouped_tile(pid: int, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[int, int]:
    num_pid_in_group = group_m * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * group_m
    group_size_m = min(num_pid_m - first_pid_m, group_m)
    pid_in_group = pid % num_pid_in_group
    return first_pid_m + pid_in_group % group_size_m, pid_in_group // group_size_m


@triton.jit
def grouped_tile_jit(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_in_group = pid % num_pid_in_group
    return first_pid_m + pid_in_group % group_size_m, pid_in_group // group_size_m


def splitk_tile(pid: int, num_pid_m: int, num_pid_n: int, group_m: int, split_k: int) -> tuple[int, int, int]:
    """Split-K order: pid_k varies fastest, so the SPLIT_K programs of one tile run side by side."""
    tile, pid_k = divmod(pid, split_k)
    pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, group_m)
    return pid_m, pid_n, pid_k


@triton.jit
def splitk_tile_jit(pid, num_pid_m, num_pid_n, GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr):
    tile = pid // SPLIT_K
    pid_k = pid % SPLIT_K
    pid_m, pid_n = grouped_tile_jit(tile, num_pid_m, num_pid_n, GROUP_M)
    return pid_m, pid_n, pid_k


def split_range(pid_k: int, k: int, split_k: int, block_k: int) -> tuple[int, int]:
    """[k_start, k_end) of split pid_k; empty (k_end <= k_start) when the split starts past K.

    k_start stays a multiple of BLOCK_K even for empty splits, so the alignment hint holds.
    """
    chunk = aligned_chunk(k, split_k, block_k)
    k_start = pid_k * chunk
    return k_start, min(k_start + chunk, k)


@triton.jit
def split_range_jit(pid_k, K, SPLIT_K: tl.constexpr, BLOCK_K: tl.constexpr):
    chunk = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    k_start = tl.multiple_of(pid_k * chunk, BLOCK_K)
    return k_start, tl.minimum(k_start + chunk, K)


@functools.cache  # a device's properties cost about 5 us a call on an H200 host
def multiprocessor_count(device: torch.device) -> int:
    """SMs of the tensors' device; FALLBACK_PROGRAMS where there are none (a CPU)."""
    module = torch.get_device_module(device) if device.type != "cpu" else None
    props = getattr(module, "get_device_properties", None)
    return props(device).multi_processor_count if props else FALLBACK_PROGRAMS


# The tail band's tiles are halved (longer side first) until they fill this much of a wave, and no
# further: at 3072^3 its 256 x 3072 in 128x64 tiles (96 on 132 SMs) took 12.4 us, in 128x128 ones
# (48) 18.8, in 64x64 ones (192) 20.9; 104 x 14336 in 128x128 (112 tiles) 33.5, in 64x128 42.9;
# 568 x 5000 in 128x256 (100 tiles) 16.6, in 128x128 22.4 (CUDA graphs, bf16, H200).
TAIL_WAVE_FILL = 2 / 3


@dataclass(frozen=True)
class Bands:
    """C cut in two: the main band (its first `cut` rows if axis is "m", else columns) in the
    config's tiles, the rest in `tail_block_m` x `tail_block_n` tiles."""

    axis: str
    cut: int
    tail_block_m: int
    tail_block_n: int


def tail_tile(m: int, n: int, block_m: int, block_n: int, programs: int) -> tuple[int, int]:
    """Tiles for an m x n tail band: the given ones halved, the longer side first, until they fill
    TAIL_WAVE_FILL of a wave of `programs` or would fall under 16 a side (tl.dot's smallest)."""
    while cdiv(m, block_m) * cdiv(n, block_n) < TAIL_WAVE_FILL * programs:
        if block_n >= block_m and block_n > 16:
            block_n //= 2
        elif block_m > 16:
            block_m //= 2
        else:
            break
    return block_m, block_n


# A tail band this thin or thinner (rows, or columns) is served by split-K: at 4097^3 the column
# left of 128x256 tiles is one wide, and `tail_tile`'s 32x32 tiles (129, one wave) each ran the whole
# 65-step K loop, latency-bound, about 25 us of the 267 (H200, docs/design.md, "Wave bands").
THIN_TAIL = 16


def thin_tail_split(tiles: int, k_tiles: int, programs: int, max_split: int = 16) -> int:
    """How many ways to split K for a thin tail of `tiles` tiles: the most (a power of two, at most
    max_split) that keeps the tail in one wave of `programs` and leaves each split 4 K tiles or more."""
    split = 1
    while split * 2 <= max_split and tiles * split * 2 <= programs and k_tiles >= 4 * split * 2:
        split *= 2
    return split


def wave_bands(m: int, n: int, block_m: int, block_n: int, programs: int) -> Bands | None:
    """Where to cut C into a main band of whole waves and a tail band of smaller tiles, or None.

    A persistent grid of P programs over T tiles takes cdiv(T, P) tile times; when its last wave
    is short (3072^3 in 128x256 tiles: 288 tiles on 132 SMs, 2.18 waves of work in three tile
    times), the main band's whole tile rows (or columns) fill the full waves and the tail band, in
    `tail_tile`'s tiles, takes a fraction of a tile time. Counted so (a tail tile's time in
    proportion to its area; the farm measures what it really costs), a cut is returned only where
    it beats cdiv(T, P): rows on a tie.
    """
    tiles_m, tiles_n = cdiv(m, block_m), cdiv(n, block_n)
    tiles = tiles_m * tiles_n
    full = tiles - tiles % programs
    options = []
    for axis, cut, size in (("m", full // tiles_n * block_m, m), ("n", full // tiles_m * block_n, n)):
        if not 0 < cut < size:
            continue
        main = cut // block_m * tiles_n if axis == "m" else cut // block_n * tiles_m
        tail_m, tail_n = (m - cut, n) if axis == "m" else (m, n - cut)
        tbm, tbn = tail_tile(tail_m, tail_n, block_m, block_n, programs)
        tail_time = cdiv(cdiv(tail_m, tbm) * cdiv(tail_n, tbn), programs) * tbm * tbn / (block_m * block_n)
        options.append((cdiv(main, programs) + tail_time, axis, cut, tbm, tbn))
    if not options:
        return None
    time, *bands = min(options, key=lambda o: o[0])  # min keeps the first (rows) on a tie
    return Bands(*bands) if time < cdiv(tiles, programs) else None


def persistent_tiles(pid: int, num_tiles: int, num_programs: int) -> list[int]:
    """Tiles persistent program pid computes, in order: pid, pid + num_programs, ... (a grid-stride loop)."""
    return list(range(pid, num_tiles, num_programs))


def tile_coverage(mapping: Callable[[int], tuple[int, ...]], num_programs: int) -> Counter:
    """How many programs produce each tile (or (tile, split)) under `mapping`."""
    return Counter(mapping(pid) for pid in range(num_programs))


def coverage_errors(coverage: Counter, expected: Iterable[tuple[int, ...]]) -> list[str]:
    """Tiles produced twice, never, or outside the grid. Empty means the mapping is a bijection."""
    expected = set(expected)
    errors = [f"{tile} produced {count} times" for tile, count in sorted(coverage.items()) if count > 1]
    errors += [f"{tile} never produced" for tile in sorted(expected - set(coverage))]
    errors += [f"{tile} is outside the grid" for tile in sorted(set(coverage) - expected)]
    return errors
