"""persistent_tma_bands: where `wave_bands` cuts C and how small `tail_tile` makes the tail's tiles,
and both bands' results right (on a GPU too: the launcher is told of 4 SMs, as the interpreter's
fallback has, so small grids have short last waves)."""

import random

import pytest
import torch

import kernels.persistent_bands as pb
from kernels import MatmulConfig, check_accuracy, get_variant, reference_matmul
from kernels.schedule import Bands, cdiv, tail_tile, thin_tail_split, wave_bands

H200_SMS = 132


@pytest.mark.parametrize(
    ("m", "n", "expected"),
    [
        # 288 tiles, 2.18 waves: 22 of 24 tile rows fill two; 256 x 3072 left in 96 tiles of 128x64
        (3072, 3072, Bands("m", 2816, 128, 64)),
        # 448 tiles, 3.39 waves: 7 rows (392 tiles) as many as 49 columns, rows first; 112 tiles of 128x128
        (1000, 14336, Bands("m", 896, 128, 128)),
        # 3 x 47 tiles: 44 whole columns fill one wave; 384 x 768 left in 144 tiles of 64x32
        (384, 47 * 256, Bands("n", 44 * 256, 64, 32)),
        # 512 tiles, 3.88 waves: 24 rows in three, then 128 whole tiles (or 256 halves): four again
        (4096, 4096, None),
        (3000, 5000, None),  # 480 tiles, 3.64 waves: 19 rows in three, then 100 whole tiles: four again
        (2048, 2048, None),  # 128 tiles: under one wave
        (2816, 3072, None),  # 264 tiles: two whole waves
    ],
)
def test_wave_bands_on_an_h200_in_128x256_tiles(m, n, expected):
    assert wave_bands(m, n, 128, 256, H200_SMS) == expected


@pytest.mark.parametrize(
    ("band", "tile", "expected"),
    [
        ((256, 3072), (128, 256), (128, 64)),  # 24 -> 48 -> 96 tiles (>= 88, two thirds of 132)
        ((104, 14336), (128, 256), (128, 128)),  # 56 -> 112
        ((568, 5000), (128, 256), (128, 256)),  # 100 already
        ((8, 8), (32, 32), (16, 16)),  # never under 16 a side (tl.dot's smallest)
    ],
)
def test_tail_tile_halves_the_longer_side_until_two_thirds_of_a_wave(band, tile, expected):
    assert tail_tile(*band, *tile, H200_SMS) == expected


def _makespan(tile_costs: list[float], programs: int) -> float:
    """The grid-stride loop played out: program p computes tiles p, p + P, ..."""
    return max(sum(tile_costs[p::programs]) for p in range(programs))


def _banded(m: int, n: int, p: int, bands: Bands) -> float:
    """Both bands played out: 32x32 tiles of cost 1 in the main band, then the tail's at their area's cost."""
    cut, tbm, tbn = bands.cut, bands.tail_block_m, bands.tail_block_n
    main_m, main_n = (cut, n) if bands.axis == "m" else (m, cut)
    tail_m, tail_n = (m - cut, n) if bands.axis == "m" else (m, n - cut)
    tail = [tbm * tbn / 32**2] * (cdiv(tail_m, tbm) * cdiv(tail_n, tbn))
    return _makespan([1.0] * (cdiv(main_m, 32) * cdiv(main_n, 32)), p) + _makespan(tail, p)


def test_wave_bands_cuts_whole_tiles_where_the_played_out_schedule_is_shorter():
    rng = random.Random(7)
    cut_seen = {"m": 0, "n": 0}
    for _ in range(2000):
        tm, tn, p = rng.randint(1, 40), rng.randint(1, 40), rng.randint(2, 140)
        m, n = tm * 32 - rng.randint(0, 31), tn * 32 - rng.randint(0, 31)
        tiles = tm * tn
        full = tiles - tiles % p
        single = _makespan([1.0] * tiles, p)
        bands = wave_bands(m, n, 32, 32, p)
        if bands is None:  # neither band of the most whole tile rows or columns would be shorter
            for axis, cut, size in (("m", full // tn * 32, m), ("n", full // tm * 32, n)):
                if 0 < cut < size:
                    rest = (m - cut, n) if axis == "m" else (m, n - cut)
                    assert _banded(m, n, p, Bands(axis, cut, *tail_tile(*rest, 32, 32, p))) >= single
            continue
        cut_seen[bands.axis] += 1
        assert bands.cut % 32 == 0 and 0 < bands.cut < (m if bands.axis == "m" else n)
        assert bands.cut // 32 * (tn if bands.axis == "m" else tm) <= full  # the main band: whole waves
        assert _banded(m, n, p, bands) < single
    assert min(cut_seen.values()) > 20  # both kinds of cut were exercised


CFG = MatmulConfig(block_m=32, block_n=32, block_k=16, group_m=2, num_warps=4, num_stages=2)
TAIL = CFG.replace(block_n=16)


def _random(shape, dtype, device, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen).to(dtype).to(device)


def _recorded_launches(monkeypatch):
    monkeypatch.setattr(pb, "multiprocessor_count", lambda device: 4)
    calls = []
    real = pb.launch_into

    def record(a, b, c, cfg):
        calls.append((tuple(c.shape), c.data_ptr(), cfg))
        return real(a, b, c, cfg)

    monkeypatch.setattr(pb, "launch_into", record)
    return calls


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize(
    ("m", "n", "k", "launches"),
    [
        # 5 x 2 tiles on 4 programs: rows 0-127 in 32x32 tiles, the 22 rows left (from element
        # 128 * 40 of C) in 32x16 ones
        pytest.param(150, 40, 40, [((128, 40), 0, CFG), ((22, 40), 128 * 40, TAIL)], id="row-band"),
        pytest.param(40, 152, 24, [((40, 128), 0, CFG), ((40, 24), 128, TAIL)], id="column-band"),
        pytest.param(64, 64, 40, [((64, 64), 0, CFG)], id="whole-wave"),  # 4 tiles: one launch
    ],
)
def test_bands_match_fp64(device, monkeypatch, m, n, k, launches, dtype):
    calls = _recorded_launches(monkeypatch)
    a, b = _random((m, k), dtype, device, 1), _random((k, n), dtype, device, 2)
    c = get_variant("persistent_tma_bands").launch(a, b, CFG)
    acc = check_accuracy(c, reference_matmul(a, b), dtype, k)
    assert c.shape == (m, n) and acc.ok, f"rel_err {acc.rel_err:.3g} > {acc.tolerance:.3g}"
    # each band writes its own part of C's storage
    assert calls == [(shape, c.data_ptr() + at * c.element_size(), cfg) for shape, at, cfg in launches]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize(
    ("m", "n", "k", "axis"),
    [pytest.param(150, 41, 37, "m", id="row-band"), pytest.param(45, 150, 37, "n", id="column-band")],
)
def test_bands_pad_odd_sizes_then_cut(device, monkeypatch, m, n, k, axis, dtype):
    """Rows of 37 and 41 (or 150) elements are not 16-byte aligned in any dtype: both operands are
    copied to rows 128 B apart, C is padded the same way, and the cut (at 128 on 4 SMs) runs on them."""
    monkeypatch.setattr(pb, "multiprocessor_count", lambda device: 4)
    launches, real = [], pb.launch_into

    def record(a, b, c, cfg):
        launches.append((a.stride(0) * a.element_size(), b.stride(0) * b.element_size(), tuple(c.shape)))
        return real(a, b, c, cfg)

    monkeypatch.setattr(pb, "launch_into", record)
    a, b = _random((m, k), dtype, device, 5), _random((k, n), dtype, device, 6)
    c = get_variant("persistent_tma_bands").launch(a, b, CFG)
    acc = check_accuracy(c, reference_matmul(a, b), dtype, k)
    assert c.shape == (m, n) and acc.ok, f"rel_err {acc.rel_err:.3g} > {acc.tolerance:.3g}"
    assert (c.stride(0) * c.element_size()) % 128 == 0
    pitch = lambda cols: 128 * cdiv(cols * c.element_size(), 128)  # bytes a padded row
    bands = [(128, n), (m - 128, n)] if axis == "m" else [(m, 128), (m, n - 128)]
    assert launches == [(pitch(k), pitch(n), band) for band in bands]


@pytest.mark.parametrize(
    ("tiles", "k_tiles", "expected"),
    [
        (33, 65, 4),  # 4097^3's one-column tail in 128-row tiles: 132 programs of 16 or 17 K tiles
        (33, 12, 2),  # K of 12 tiles: splits keep 4 each
        (2, 1000, 16),  # at most 16
        (140, 65, 1),  # a wave already
    ],
)
def test_thin_tail_split_fills_one_wave_and_keeps_four_k_tiles_a_split(tiles, k_tiles, expected):
    assert thin_tail_split(tiles, k_tiles, H200_SMS) == expected


def _recorded_band_launches(monkeypatch) -> list[tuple]:
    """On 4 SMs, each band's launch as (launcher, C's shape, block_m, block_n, split_k, overlapping)."""
    monkeypatch.setattr(pb, "multiprocessor_count", lambda device: 4)
    launches = []
    for name in ("launch_into", "splitk_tma_into"):
        real = getattr(pb, name)

        def record(a, b, c, cfg, name=name, real=real, **options):
            overlapping = options.get("overlapping", False)
            launches.append((name, tuple(c.shape), cfg.block_m, cfg.block_n, cfg.split_k, overlapping))
            return real(a, b, c, cfg, **options)

        monkeypatch.setattr(pb, name, record)
    return launches


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize(
    ("m", "n", "axis"),
    [pytest.param(129, 64, "m", id="one-row"), pytest.param(64, 129, "n", id="one-column")],
)
def test_a_thin_tail_runs_split_k(device, monkeypatch, m, n, axis, dtype):
    """A tail of one row (or column), cut at 128 on 4 SMs, runs through `splitk_tma` in tiles 16
    across, K (150: 10 tiles of 16) split in two; the main band through `persistent_tma`."""
    launches = _recorded_band_launches(monkeypatch)
    k = 150
    a, b = _random((m, k), dtype, device, 7), _random((k, n), dtype, device, 8)
    c = get_variant("persistent_tma_bands").launch(a, b, CFG)
    acc = check_accuracy(c, reference_matmul(a, b), dtype, k)
    assert c.shape == (m, n) and acc.ok, f"rel_err {acc.rel_err:.3g} > {acc.tolerance:.3g}"
    main, tail = ((128, n), (1, n)) if axis == "m" else ((m, 128), (m, 1))
    tile = (16, 32) if axis == "m" else (32, 16)
    # the tail may overlap the main band (programmatic dependent launch, on CUDA): it reads nothing
    # the main band writes
    assert launches == [("launch_into", main, 32, 32, 1, False), ("splitk_tma_into", tail, *tile, 2, True)]


def test_bands_read_column_major_operands(device, monkeypatch):
    calls = _recorded_launches(monkeypatch)
    a = _random((40, 152), torch.bfloat16, device, 3).t()  # (152, 40) column-major: its bands are views too
    b = _random((40, 40), torch.bfloat16, device, 4).t()
    c = get_variant("persistent_tma_bands").launch(a, b, CFG)
    assert check_accuracy(c, reference_matmul(a, b), torch.bfloat16, 40).ok
    assert len(calls) == 2


def test_tail_config_runs_tiles_up_to_128x128_on_one_warpgroup():
    cfg = MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)
    assert pb.tail_config(cfg, Bands("m", 2816, 128, 64)) == cfg.replace(block_n=64, num_warps=4)
    assert pb.tail_config(cfg, Bands("m", 896, 128, 128)) == cfg.replace(block_n=128, num_warps=4)
    assert pb.tail_config(cfg, Bands("m", 2432, 128, 256)) == cfg  # a tail of whole tiles


@pytest.mark.parametrize(
    ("m", "n", "k", "expected"),
    [
        # 256 x 3072 left: 48 tiles of 128x128, split in two (96 programs), not 96 of 128x64 whole
        (3072, 3072, 3072, MatmulConfig(128, 128, 64, group_m=1, split_k=2, num_warps=8, num_stages=4)),
        (3072, 3072, 448, None),  # 7 K tiles: no split keeps 4 each
        (1000, 14336, 4096, None),  # the tail's own tiles are 128x128 already
        (16384, 16384, 16384, None),
    ],
)
def test_a_tail_of_small_tiles_runs_split_in_larger_ones(m, n, k, expected):
    cfg = MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)
    bands = wave_bands(m, n, cfg.block_m, cfg.block_n, H200_SMS)
    assert pb.split_tail_config(cfg, bands, m, n, k, H200_SMS) == expected


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_a_split_tail_matches_fp64(device, monkeypatch, dtype):
    """150 x 40 on 4 SMs: rows 0-127 in 32x32 tiles, the 22 rows left in 32x32 tiles too (2 of them,
    not 3 of 32x16), K (160: 10 tiles of 16) split in two through `splitk_tma`. The main config's 5 stages
    leave room for the tail's 4 and its whole C tile (5,632 elements against 5,120)."""
    launches = _recorded_band_launches(monkeypatch)
    m, n, k = 150, 40, 160
    a, b = _random((m, k), dtype, device, 9), _random((k, n), dtype, device, 10)
    c = get_variant("persistent_tma_bands").launch(a, b, CFG.replace(num_stages=5))
    acc = check_accuracy(c, reference_matmul(a, b), dtype, k)
    assert c.shape == (m, n) and acc.ok, f"rel_err {acc.rel_err:.3g} > {acc.tolerance:.3g}"
    assert launches == [
        ("launch_into", (128, 40), 32, 32, 1, False),
        ("splitk_tma_into", (22, 40), 32, 32, 2, True),
    ]


@pytest.mark.parametrize(
    ("main", "expected"),
    [
        (MatmulConfig(128, 256, 64, num_warps=8, num_stages=3), (128, 128, 64, 4)),  # 81,920 <= 90,112
        (MatmulConfig(128, 128, 64, num_warps=8, num_stages=4), None),  # 81,920 > 73,728 elements
        (MatmulConfig(128, 256, 128, num_warps=8, num_stages=2), None),  # 147,456 > 114,688
    ],
)
def test_a_split_tail_takes_four_stages_within_the_main_bands_shared_memory(main, expected):
    bands = wave_bands(3072, 3072, main.block_m, main.block_n, H200_SMS)
    tail = pb.split_tail_config(main, bands, 3072, 3072, 3072, H200_SMS)
    assert (tail and (tail.block_m, tail.block_n, tail.block_k, tail.num_stages)) == expected


@pytest.mark.parametrize(
    ("m", "n", "k", "split"),
    [
        pytest.param(150, 40, 40, False, id="row-band"),
        pytest.param(129, 64, 160, True, id="thin-tail-split"),
        pytest.param(150, 40, 37, False, id="a-copied"),  # A's rows of 74 bytes: copied into 128-byte ones
    ],
)
def test_bound_bands_launch_both_bands_over_this_calls_views(monkeypatch, m, n, k, split):
    """`persistent_tma_bands` bound (kernels.launching.KeptBindings; its kernels stand-ins, kernelkit.py)
    on 4 SMs: a call like the first runs the main band's and the tail's compiled kernels over views
    of this call's A and C (descriptors whose bases start where the launcher's views do), the split
    tail with fresh partial slots, each then what Triton was given first."""
    from kernelkit import StandInKernel

    import kernels.persistent_tma as pt
    import kernels.pitched as pitched
    import kernels.splitk_tma as st
    from kernels.launching import DirectCalls

    monkeypatch.setattr(pb, "multiprocessor_count", lambda device: 4)
    persistent = StandInKernel(pt._persistent_tma_kernel.arg_names)
    splits = StandInKernel(st._splitk_tma_kernel.arg_names)
    monkeypatch.setattr(pt, "_CALLS", DirectCalls(persistent))
    monkeypatch.setattr(st, "_CALLS", DirectCalls(splits))
    copies = StandInKernel(pitched._copy_rows_kernel.arg_names)
    monkeypatch.setattr(pitched, "_COPIES", DirectCalls(copies))
    launch = get_variant("persistent_tma_bands").launch
    launch(_random((m, k), torch.bfloat16, "cpu", 1), _random((k, n), torch.bfloat16, "cpu", 2), CFG)
    first = persistent.jit_calls + splits.jit_calls
    assert len(first) == 2 and len(splits.jit_calls) == split  # the thin tail through split-K
    a2, b2 = _random((m, k), torch.bfloat16, "cpu", 3), _random((k, n), torch.bfloat16, "cpu", 4)
    c2 = launch(a2, b2, CFG)
    assert len(persistent.jit_calls + splits.jit_calls) == 2  # nothing through Triton's path again
    calls = persistent.compiled.calls + splits.compiled.calls
    assert len(calls) == 2
    a_in = a2
    if k == 37:  # this call's A copied, the bands cut from the copy
        (copy,) = copies.compiled.calls
        assert copy[0] is a2 and copy[1].stride() == (64, 1)
        a_in = copy[1]
    row = lambda t, at: t.data_ptr() + at * t.stride(0) * t.element_size()
    for (_, jit_args, kwargs), call, kernel, at in zip(
        first, calls, (persistent, splits if split else persistent), (0, 128)
    ):
        a_desc, b_desc, c_desc = call[:3]
        assert (
            a_desc.base.data_ptr() == row(a_in, at)
            and b_desc.base is b2
            and c_desc.base.data_ptr() == row(c2, at)
        )
        leading = 5 if kernel is splits else 3
        if kernel is splits:
            assert call[3].dtype == torch.float32 and call[3] is not jit_args[3]  # fresh partial slots
        names = kernel.arg_names[len(jit_args) :]
        assert call[leading:] == (*jit_args[leading:], *(kwargs[name] for name in names))
