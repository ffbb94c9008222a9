"""Every schedule's pid -> tile mapping is a bijection onto the tile grid, and its jit mirror agrees."""

import itertools

import pytest
import torch
import triton
import triton.language as tl

from kernels.schedule import (
    coverage_errors,
    grouped_tile,
    grouped_tile_jit,
    persistent_tiles,
    split_range,
    split_range_jit,
    splitk_tile,
    splitk_tile_jit,
    tile_coverage,
)
from kernels.streamk import streamk_work
from kernels.streamk_hybrid import hybrid_split, hybrid_work
from kernels.tiled import tiled_tile

# (num_pid_m, num_pid_n, GROUP_M): multiples of the group, a short last group, a single partial
# group (num_pid_m < GROUP_M), one row, one column, GROUP_M = 1 (row-major).
GROUPED_GRIDS = [
    pytest.param(4, 3, 2, id="m4-n3-g2-whole-groups"),
    pytest.param(3, 2, 2, id="m3-n2-g2-short-last-group"),
    pytest.param(7, 5, 3, id="m7-n5-g3-short-last-group"),
    pytest.param(3, 4, 8, id="m3-n4-g8-single-partial-group"),
    pytest.param(1, 6, 4, id="m1-n6-g4-one-row"),
    pytest.param(5, 1, 2, id="m5-n1-g2-one-column"),
    pytest.param(6, 4, 1, id="m6-n4-g1-row-major"),
]


def _grid(num_pid_m, num_pid_n):
    return set(itertools.product(range(num_pid_m), range(num_pid_n)))


def test_tiled_mapping_is_the_identity_on_the_2d_grid():
    num_pid_m, num_pid_n = 5, 3
    coverage = tile_coverage(lambda pid: tiled_tile(*divmod(pid, num_pid_n)), num_pid_m * num_pid_n)
    assert coverage_errors(coverage, _grid(num_pid_m, num_pid_n)) == []


@pytest.mark.parametrize(("num_pid_m", "num_pid_n", "group_m"), GROUPED_GRIDS)
def test_grouped_mapping_is_a_bijection(num_pid_m, num_pid_n, group_m):
    coverage = tile_coverage(
        lambda pid: grouped_tile(pid, num_pid_m, num_pid_n, group_m), num_pid_m * num_pid_n
    )
    assert coverage_errors(coverage, _grid(num_pid_m, num_pid_n)) == []


def _grouped_tile_constant_divisor(pid, num_pid_m, num_pid_n, group_m):
    """The classic bug: pid_n divides by the constant GROUP_M, not the last group's actual height."""
    num_pid_in_group = group_m * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * group_m
    group_size_m = min(num_pid_m - first_pid_m, group_m)
    pid_in_group = pid % num_pid_in_group
    return first_pid_m + pid_in_group % group_size_m, pid_in_group // group_m


def test_check_catches_the_constant_divisor_bug():
    num_pid_m, num_pid_n, group_m = 3, 2, 2
    assert _grouped_tile_constant_divisor(4, num_pid_m, num_pid_n, group_m) == (2, 0)
    assert _grouped_tile_constant_divisor(5, num_pid_m, num_pid_n, group_m) == (2, 0)
    coverage = tile_coverage(lambda pid: _grouped_tile_constant_divisor(pid, 3, 2, 2), 6)
    errors = coverage_errors(coverage, _grid(num_pid_m, num_pid_n))
    assert errors == ["(2, 0) produced 2 times", "(2, 1) never produced"]


@pytest.mark.parametrize(("num_pid_m", "num_pid_n", "group_m"), GROUPED_GRIDS[:4])
@pytest.mark.parametrize("split_k", [1, 3, 4], ids=lambda s: f"split{s}")
def test_splitk_mapping_is_a_bijection_onto_tiles_and_splits(num_pid_m, num_pid_n, group_m, split_k):
    n_programs = num_pid_m * num_pid_n * split_k
    coverage = tile_coverage(lambda pid: splitk_tile(pid, num_pid_m, num_pid_n, group_m, split_k), n_programs)
    expected = {(m, n, s) for (m, n) in _grid(num_pid_m, num_pid_n) for s in range(split_k)}
    assert coverage_errors(coverage, expected) == []
    # pid_k is fastest-varying: the SPLIT_K programs of a tile are consecutive.
    assert [splitk_tile(p, num_pid_m, num_pid_n, group_m, split_k)[2] for p in range(split_k)] == list(
        range(split_k)
    )


SPLIT_RANGES = [
    # K=200, SPLIT_K=4: cdiv(200, 4) = 50, rounded up to whole 32-tiles = 64; the last chunk is 8 long
    pytest.param(200, 4, 32, [(0, 64), (64, 128), (128, 192), (192, 200)], id="K200-chunk64-partial-last"),
    # BLOCK_K=16: chunk 64 = four 16-tiles, the last chunk a single partial tile
    pytest.param(200, 4, 16, [(0, 64), (64, 128), (128, 192), (192, 200)], id="K200-bk16"),
    # K=40: chunk 16, the third is short (8), the fourth is empty
    pytest.param(40, 4, 16, [(0, 16), (16, 32), (32, 40), (48, 40)], id="K40-short-and-empty"),
    # K=10: one short chunk, three empty ones
    pytest.param(10, 4, 16, [(0, 10), (16, 10), (32, 10), (48, 10)], id="K10-mostly-empty"),
    # K=256, SPLIT_K=4, BLOCK_K=32: 64-element chunks, two K iterations each
    pytest.param(256, 4, 32, [(0, 64), (64, 128), (128, 192), (192, 256)], id="K256-two-iterations"),
]


@pytest.mark.parametrize(("k", "split_k", "block_k", "expected"), SPLIT_RANGES)
def test_split_ranges_cover_k_exactly_once(k, split_k, block_k, expected):
    ranges = [split_range(s, k, split_k, block_k) for s in range(split_k)]
    assert ranges == expected
    covered = [kk for start, end in ranges for kk in range(start, end)]
    assert sorted(covered) == list(range(k))
    assert all(start % block_k == 0 for start, _ in ranges)  # every chunk start stays aligned


@triton.jit
def _mapping_probe(
    out_ptr, num_pid_m, num_pid_n, K, GROUP_M: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK_K: tl.constexpr
):
    pid = tl.program_id(0)
    gm, gn = grouped_tile_jit(pid // SPLIT_K, num_pid_m, num_pid_n, GROUP_M)
    sm, sn, sk = splitk_tile_jit(pid, num_pid_m, num_pid_n, GROUP_M, SPLIT_K)
    k_start, k_end = split_range_jit(sk, K, SPLIT_K, BLOCK_K)
    base = out_ptr + pid * 7
    tl.store(base + 0, gm)
    tl.store(base + 1, gn)
    tl.store(base + 2, sm)
    tl.store(base + 3, sn)
    tl.store(base + 4, sk)
    tl.store(base + 5, k_start)
    tl.store(base + 6, k_end)


@pytest.mark.parametrize(("num_pid_m", "num_pid_n", "group_m"), GROUPED_GRIDS[1:4])
@pytest.mark.parametrize(("k", "split_k", "block_k"), [(200, 4, 32), (10, 4, 16)], ids=["K200-s4", "K10-s4"])
def test_jit_mirrors_match_python(device, num_pid_m, num_pid_n, group_m, k, split_k, block_k):
    n_programs = num_pid_m * num_pid_n * split_k
    out = torch.full((n_programs, 7), -1, dtype=torch.int32, device=device)
    _mapping_probe[(n_programs,)](
        out, num_pid_m, num_pid_n, k, GROUP_M=group_m, SPLIT_K=split_k, BLOCK_K=block_k
    )
    expected = [
        (
            *grouped_tile(pid // split_k, num_pid_m, num_pid_n, group_m),
            *splitk_tile(pid, num_pid_m, num_pid_n, group_m, split_k),
            *split_range(pid % split_k, k, split_k, block_k),
        )
        for pid in range(n_programs)
    ]
    assert [tuple(row) for row in out.cpu().tolist()] == expected


# (tiles, K iterations per tile, programs): fewer tiles than programs, more, one of each, ragged.
STREAMK_GRIDS = [
    pytest.param(16, 512, 132, id="512x512x32768-on-132-SMs"),
    pytest.param(7, 5, 3, id="ragged"),
    pytest.param(3, 1, 8, id="fewer-iterations-than-programs"),
    pytest.param(1, 1, 1, id="one-of-each"),
]


@pytest.mark.parametrize(("tiles", "iters", "programs"), STREAMK_GRIDS)
def test_streamk_covers_every_k_iteration_of_every_tile_once(tiles, iters, programs):
    units = [
        (tile, k)
        for pid in range(programs)
        for tile, k0, k1 in streamk_work(pid, tiles, iters, programs)
        for k in range(k0, k1)
    ]
    assert sorted(units) == [(t, k) for t in range(tiles) for k in range(iters)]
    shares = [
        sum(k1 - k0 for _, k0, k1 in streamk_work(pid, tiles, iters, programs)) for pid in range(programs)
    ]
    assert max(shares) - min(shares) <= 1  # balanced to one iteration


# (tiles, K iterations per tile, programs): full waves plus a partial one, whole waves only, fewer
# tiles than programs (all stream-K), the 3000x5000 output in 128x256 tiles on 132 SMs.
HYBRID_GRIDS = [
    pytest.param(11, 5, 4, id="two-waves-and-3-tiles"),
    pytest.param(12, 5, 4, id="whole-waves-only"),
    pytest.param(3, 7, 4, id="fewer-tiles-than-programs"),
    pytest.param(480, 16, 132, id="3000x5000x1000-on-132-SMs"),
]


def _units(work, tiles, iters, programs):
    return [
        (tile, k)
        for pid in range(programs)
        for tile, k0, k1 in work(pid, tiles, iters, programs)
        for k in range(k0, k1)
    ]


@pytest.mark.parametrize(("tiles", "iters", "programs"), HYBRID_GRIDS)
def test_hybrid_covers_every_k_iteration_of_every_tile_once(tiles, iters, programs):
    assert sorted(_units(hybrid_work, tiles, iters, programs)) == [
        (t, k) for t in range(tiles) for k in range(iters)
    ]
    data_parallel, shared = hybrid_split(tiles, programs)
    assert data_parallel % programs == 0 and 0 <= shared < programs
    for pid in range(programs):
        pieces = hybrid_work(pid, tiles, iters, programs)
        whole = [t for t, k0, k1 in pieces if t < data_parallel]
        assert all((k0, k1) == (0, iters) for t, k0, k1 in pieces if t < data_parallel)  # full waves: whole
        assert len(whole) == data_parallel // programs  # every program the same number of whole tiles
    shares = [
        sum(k1 - k0 for t, k0, k1 in hybrid_work(pid, tiles, iters, programs) if t >= data_parallel)
        for pid in range(programs)
    ]
    assert max(shares) - min(shares) <= 1  # the last wave balanced to one iteration


def _hybrid_work_rounding_up(pid, tiles, iters, programs):
    """A planted bug: the data-parallel part rounded up to whole waves, past the last tile."""
    data_parallel = -(-tiles // programs) * programs
    return [(t, 0, iters) for t in range(pid, data_parallel, programs)]


def test_coverage_check_catches_a_wave_rounding_bug():
    assert sorted(_units(hybrid_work, 11, 2, 4)) == [(t, k) for t in range(11) for k in range(2)]  # control
    units = _units(_hybrid_work_rounding_up, 11, 2, 4)
    assert sorted(set(units)) != [(t, k) for t in range(11) for k in range(2)]
    assert (11, 0) in units  # a tile outside the grid


@pytest.mark.parametrize(("tiles", "programs"), [(10, 4), (4, 4), (3, 132), (480, 132)], ids=str)
def test_persistent_programs_take_every_tile_once(tiles, programs):
    programs = min(programs, tiles)  # the launcher never starts more programs than tiles
    taken = [t for pid in range(programs) for t in persistent_tiles(pid, tiles, programs)]
    assert sorted(taken) == list(range(tiles))
    counts = [len(persistent_tiles(pid, tiles, programs)) for pid in range(programs)]
    assert max(counts) - min(counts) <= 1
