"""Program -> tile mappings shared by the schedules, as pure Python and as their jit mirrors.

The Python functions are the specification: tests enumerate them for small grids and prove
every tile is produced exactly once (`tile_coverage`), and check each jit mirror against its
Python twin under the interpreter. The variant files import the jit mirrors.

Grouped order (GROUP_SIZE_M): programs walk GROUP_M tile rows column by column, so the B
columns a group loads stay in L2 while its A rows are reused. The last group may be short;
its actual height is the divisor (`min(num_pid_m - first_pid_m, GROUP_M)`), never the constant:
with the constant, num_pid_m=3, num_pid_n=2, GROUP_M=2 maps pids 4 and 5 both to (2, 0).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable

import torch
import triton
import triton.language as tl

from kernels.sizes import aligned_chunk, cdiv  # noqa: F401  (the kernels import them from here)

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


@functools.cache  # a device's properties cost about 5 us a call on the H200 host (visit 52)
def multiprocessor_count(device: torch.device) -> int:
    """SMs of the tensors' device; FALLBACK_PROGRAMS where there are none (a CPU)."""
    module = torch.get_device_module(device) if device.type != "cpu" else None
    props = getattr(module, "get_device_properties", None)
    return props(device).multi_processor_count if props else FALLBACK_PROGRAMS


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
