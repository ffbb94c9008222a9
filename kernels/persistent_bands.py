"""`persistent_tma_bands`: `persistent_tma` on the band of C whose tiles fill whole waves, then the
rest of C in smaller tiles (`kernels.schedule.wave_bands` says where to cut, `tail_tile` how small).

Why: a persistent grid of P programs over T tiles takes cdiv(T, P) tile times. At 3072^3 in
128x256 tiles, 288 tiles on the H200's 132 SMs are 2.18 waves of work in three tile times. Cut
at row 2816, the main band (264 tiles, two whole waves) took 77.2 us and the tail (256 rows in
96 tiles of 128x64) 12.4, against 103.6 for the single grid and 81.7 for cuBLAS (CUDA graphs,
bf16). One kernel doing both lost (`persistent_tma_hybrid`: its full-wave
loop slowed beside the stream-K part); two launches keep each kernel as fast as it runs alone,
for one more launch's host time and the tail's second read of B (row bands) or A (column bands),
from L2 where the operands fit. Eagerly that host time can hide the gain: at 3072^3 the two
launches took 176 us of host a call on the H200 host against 89 us of GPU, so a
do_bench time (0.147 ms) showed the host; kernel time (the farm) and CUDA graphs (0.0886 against
`persistent_tma`'s 0.1008) show the schedule.

Shapes whose waves are whole, or whose cut would not shorten the schedule, run one `persistent_tma`
launch. Odd sizes are padded as `persistent_tma_pad` pads them (`padded`, `tma_output`) and then cut:
at 4097^3 in 128x256 tiles the padded grid is 561 tiles, 4.25 waves in five tile times, where
columns 0-4095 are four whole waves and column 4096 the tail. A tail that thin (`THIN_TAIL` rows or
columns or fewer) runs through `splitk_tma`, its K split to fill a wave: in `tail_tile`'s 32x32
tiles each of the 129 programs ran the whole 65-step K loop, about 25 us; split in 4 over 33 tiles of
128x16 the padded bands took 0.2474 ms against 0.2671 (bf16, CUDA graphs; docs/design.md, "Wave bands").
A tail whose `tail_tile`s would be smaller than the config's tile halved to 128x128 runs in those
larger tiles with K split to fill the wave, where K is long enough for two splits (`split_tail_config`):
at 3072^3 the 256-row tail in 96 tiles of 128x64 ran at a third of the main band's rate (ncu,
tensor pipes 32% busy against 90%).
Constraints and errors are `persistent_tma`'s (`check_tma`), for both bands.
"""

from __future__ import annotations

import functools

import torch

from kernels.config import MatmulConfig
from kernels.launching import binds
from kernels.operands import check_operands
from kernels.persistent_tma import (
    BoundPadded,
    bind_padded,
    compiled_persistent,
    launch_into,
    padded,
    padded_layout,
    tma_output,
)
from kernels.registry import register_variant
from kernels.schedule import THIN_TAIL, Bands, cdiv, multiprocessor_count, thin_tail_split, wave_bands
from kernels.space import shared_memory_elements
from kernels.splitk_tma import SplitTmaOperands, compiled_split_tma
from kernels.splitk_tma import launch_into as splitk_tma_into

# Tail tiles up to 128x128 run on one warpgroup (4 warps, 128 fp32 accumulators a thread at most):
# 128x128 took 17.0 us with 4 warps against 18.8 with 8 at 3072^3, 33.5 against 34.4 at
# 1000x14336x4096; 64x128 with 4 warps 12.3. Larger tails keep the config's warps.
ONE_WARPGROUP_MAX = 128 * 128


def tail_config(cfg: MatmulConfig, bands: Bands) -> MatmulConfig:
    """cfg with the tail band's tiles; 4 warps for tiles up to 128x128."""
    bm, bn = bands.tail_block_m, bands.tail_block_n
    warps = 4 if bm * bn <= ONE_WARPGROUP_MAX else cfg.num_warps
    return cfg.replace(block_m=bm, block_n=bn, num_warps=warps)


def thin_tail_config(cfg: MatmulConfig, bands: Bands, m: int, n: int, k: int, programs: int) -> MatmulConfig:
    """`splitk_tma`'s config for a tail of THIN_TAIL rows or columns or fewer: 16 across it, the config's
    block along it, K split to fill a wave (`thin_tail_split`), one warpgroup."""
    if bands.axis == "m":
        bm, bn, tiles = 16, cfg.block_n, cdiv(n, cfg.block_n)
    else:
        bm, bn, tiles = cfg.block_m, 16, cdiv(m, cfg.block_m)
    split = thin_tail_split(tiles, cdiv(k, cfg.block_k), programs)
    return cfg.replace(block_m=bm, block_n=bn, group_m=1, split_k=split, num_warps=4)


# A split tail's largest tile, its warps there, and its stages. At 3072^3 (bf16, H200, CUDA graphs with
# L2 flushed) the bands took 89.3-89.7 us with the tail in 96 tiles of 128x64, 83.3-83.7
# in 48 tiles of 128x128 split 2 (96 programs, 8 warps, 4 stages; 84.3 with 4 warps), 86.3 with 3 stages,
# 89.4 in 24 of 128x256 split 5; fp16 91.3-91.7 -> 85.5-85.8. cuBLAS 74.3-75.0 and 76.4-76.6, the main
# band alone 67.4. Behind a 128x128 main band (4 stages) a 3-stage split tail lost (97.9 against 96.3).
SPLIT_TAIL_MAX = 128 * 128
SPLIT_TAIL_WARPS = 8
SPLIT_TAIL_STAGES = 4


def split_tail_config(
    cfg: MatmulConfig, bands: Bands, m: int, n: int, k: int, programs: int
) -> MatmulConfig | None:
    """`splitk_tma`'s config for a tail in the config's tile halved (longer side first) to at most
    SPLIT_TAIL_MAX, K split to fill a wave (`thin_tail_split`), SPLIT_TAIL_STAGES stages. None where that
    tile is no larger than `tail_tile`'s, K does not split in two, or the stages (and the whole C tile
    `splitk_tma` stages) would take more shared memory than the main band's config (half a C tile),
    which is known to fit the device."""
    bm, bn = cfg.block_m, cfg.block_n
    while bm * bn > SPLIT_TAIL_MAX:
        bm, bn = (bm, bn // 2) if bn >= bm else (bm // 2, bn)
    if bm * bn <= bands.tail_block_m * bands.tail_block_n:
        return None
    tail_m, tail_n = (m - bands.cut, n) if bands.axis == "m" else (m, n - bands.cut)
    split = thin_tail_split(cdiv(tail_m, bm) * cdiv(tail_n, bn), cdiv(k, cfg.block_k), programs)
    warps = SPLIT_TAIL_WARPS if bm * bn == SPLIT_TAIL_MAX else 4
    tail = cfg.replace(
        block_m=bm, block_n=bn, group_m=1, split_k=split, num_warps=warps, num_stages=SPLIT_TAIL_STAGES
    )
    tail_smem = shared_memory_elements(tail, bm * bn)
    if split < 2 or tail_smem > shared_memory_elements(cfg, cfg.block_m * cfg.block_n // 2):
        return None
    return tail


# the cut, the tail's config, and whether the tail runs split-K (`splitk_tma`)
BandPlan = tuple[Bands, MatmulConfig, bool]


@functools.lru_cache(maxsize=1024)
def band_plan(m: int, n: int, k: int, cfg: MatmulConfig, programs: int) -> BandPlan | None:
    """The cut, the tail's config and whether the tail runs split-K (`splitk_tma`: thin tails, and tails
    whose K splits in larger tiles), once per shape and config: the two launches already take 60 us of
    host a call (3072^3, H200 host), and making a config (MatmulConfig checks every field) each call would
    add to it."""
    bands = wave_bands(m, n, cfg.block_m, cfg.block_n, programs)
    if bands is None:
        return None
    if (m if bands.axis == "m" else n) - bands.cut <= THIN_TAIL:
        return bands, thin_tail_config(cfg, bands, m, n, k, programs), True
    split = split_tail_config(cfg, bands, m, n, k, programs)
    if split is not None:
        return bands, split, True
    return bands, tail_config(cfg, bands), False


@register_variant("persistent_tma_bands", config_space="persistent_tma_bands")
def persistent_tma_bands(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """persistent_tma over whole waves of tiles, the remaining band of C in smaller tiles."""
    m, n, _ = check_operands(a, b, cfg)
    a, b, c = padded(a), padded(b), tma_output(m, n, like=a)
    plan = band_plan(m, n, a.shape[1], cfg, multiprocessor_count(a.device))
    if plan is None:
        return launch_into(a, b, c, cfg)
    bands, tail, split = plan
    # the split tail may take SMs as the main band's programs exit (programmatic dependent launch):
    # they write apart, and the tail reads nothing the main band writes
    tail_launch = functools.partial(splitk_tma_into, overlapping=True) if split else launch_into
    cut = bands.cut
    if bands.axis == "m":
        launch_into(a[:cut], b, c[:cut], cfg)
        tail_launch(a[cut:], b, c[cut:], tail)
    else:
        launch_into(a, b[:, :cut], c[:, :cut], cfg)
        tail_launch(a, b[:, cut:], c[:, cut:], tail)
    return c


def _cut(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, bands: Bands) -> tuple[tuple, tuple]:
    """The main band's operands and the tail's: views of a (by rows) or b (by columns) and of c (the
    bound launches' `BoundPadded.parts`)."""
    cut = bands.cut
    if bands.axis == "m":
        return (a[:cut], b, c[:cut]), (a[cut:], b, c[cut:])
    return (a, b[:, :cut], c[:, :cut]), (a, b[:, cut:], c[:, cut:])


@binds("persistent_tma_bands")
def _bind(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig, fallback):
    """`persistent_tma_bands` at cfg for operands like a and b: `persistent_tma_pad`'s binding where the
    problem is not cut, else both bands' compiled kernels and plans for the copies' and views' layouts
    (nothing copied), launched over the two bands' views (`BoundPadded`); None where either was not
    compiled yet."""
    (m, k), n = a.shape, b.shape[1]
    plan = band_plan(m, n, k, cfg, multiprocessor_count(a.device))
    if plan is None:  # one launch, as persistent_tma_pad's
        return bind_padded(a, b, cfg, fallback)
    bands, tail_cfg, split = plan
    a_in, b_in = padded_layout(a), padded_layout(b)
    main_views, tail_views = _cut(a_in, b_in, tma_output(m, n, like=a), bands)
    main = compiled_persistent(*main_views, cfg)
    tail = (
        compiled_split_tma(*tail_views, tail_cfg, overlapping=True)
        if split
        else compiled_persistent(*tail_views, tail_cfg)
    )
    if main is None or tail is None:
        return None
    (main_runner, main_tail), main_plan = main
    (tail_runner, tail_tail), tail_plan = tail
    tail_leading = SplitTmaOperands(tail_plan, tail_cfg) if split else tail_plan.descriptors
    launches = ((main_runner, main_plan.descriptors, main_tail), (tail_runner, tail_leading, tail_tail))
    parts = functools.partial(_cut, bands=bands)
    return BoundPadded(launches, parts, a_in is not a, b_in is not b, (m, n), fallback)
