"""A point as numbers for the cost model (farm/search/model.py), and the time it learns.

The target is log(ms / roofline ms): how far a config sits above the roof of its shape, comparable
between a 16-token decode and a 16k cube. Features: the shape (log2 m, n, k), the config (log2 of
block sizes and split, warps, stages, a one-hot of the variant) and derived numbers, each from the
one function that computes it (farm.metrics, kernels.sizes): tiles, tiles per SM, waves before
compiling, operand bytes over L2, the tile's arithmetic intensity, the share of the padded block
grid that is the problem's, and K per split.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from farm.metrics import (
    NOMINAL_GPU,
    DeviceLimits,
    estimated_waves,
    operand_bytes,
    roofline_ms,
    tile_counts,
    tile_fill,
    tile_intensity,
)
from farm.plan import Point
from farm.search.observations import Observations, row_config
from kernels import MatmulConfig
from kernels.registry import BUILTINS
from kernels.sizes import aligned_chunk

# One column per built-in searched variant; a plugin's variant sets none of them.
VARIANTS = tuple(name for name, builtin in BUILTINS.items() if not builtin.baseline)
# The config's own numbers: what tells configs of one shape apart (with the variant).
CONFIG_NUMERIC = (
    "log_block_m", "log_block_n", "log_block_k", "log_group_m", "log_split_k", "num_warps", "num_stages",
)  # fmt: skip
NUMERIC = (
    "log_m",
    "log_n",
    "log_k",
    *CONFIG_NUMERIC,
    "log_tiles",
    "tiles_per_sm",
    "waves",
    "log_waves",
    "log_operand_over_l2",
    "tile_intensity",
    "tile_fill",
    "log_k_per_split",
    "log_roofline_ms",
)
FEATURES = (*NUMERIC, *(f"variant_{v}" for v in VARIANTS))
# The features that tell configs of one shape apart (the in-group correction's distance, model.py).
CONFIG_FEATURES = (*CONFIG_NUMERIC, *(f"variant_{v}" for v in VARIANTS))


def limits_of(sm_count: int, l2_bytes: int) -> DeviceLimits:
    """A GPU's limits from what the database stores of it (SMs, L2); the rest an H100/H200's."""
    return dataclasses.replace(NOMINAL_GPU, sm_count=int(sm_count), l2_bytes=int(l2_bytes))


def features(
    variant: str, dtype: str, m: int, n: int, k: int, cfg: MatmulConfig, limits: DeviceLimits
) -> list[float]:
    tiles, _, tiles_per_sm = tile_counts(m, n, cfg, limits.sm_count)
    waves = estimated_waves(m, n, dtype, cfg, limits)
    numeric = [
        math.log2(m),
        math.log2(n),
        math.log2(k),
        math.log2(cfg.block_m),
        math.log2(cfg.block_n),
        math.log2(cfg.block_k),
        math.log2(cfg.group_m),
        math.log2(cfg.split_k),
        cfg.num_warps,
        cfg.num_stages,
        math.log2(tiles),
        tiles_per_sm,
        waves,
        math.log2(waves),
        math.log2(operand_bytes(m, n, k, dtype) / limits.l2_bytes),
        tile_intensity(cfg),
        tile_fill(m, n, k, cfg),
        math.log2(aligned_chunk(k, cfg.split_k, cfg.block_k)),
        math.log10(roofline_ms(m, n, k, dtype)),
    ]
    return numeric + [float(variant == v) for v in VARIANTS]


def point_matrix(points: Sequence[Point], limits: DeviceLimits = NOMINAL_GPU) -> np.ndarray:
    return np.array(
        [features(p.variant, p.dtype, p.m, p.n, p.k, p.config, limits) for p in points], dtype=float
    ).reshape(len(points), len(FEATURES))


def target(ms: float, m: int, n: int, k: int, dtype: str) -> float:
    """What the model learns: log(ms / roofline ms)."""
    return math.log(ms / roofline_ms(m, n, k, dtype))


def observation_matrix(observations: Observations) -> tuple[np.ndarray, np.ndarray]:
    """(features, targets) of every row, computed once per Observations (its cache)."""
    cached = observations.cache.get("matrix")
    if cached is None:
        xs, ys = [], []
        for row in observations.rows.to_dict("records"):
            if int(row["block_m"]) == 0:  # a library baseline: no tiles to describe
                continue
            m, n, k, dtype = int(row["m"]), int(row["n"]), int(row["k"]), row["dtype"]
            limits = limits_of(row["sm_count"], row["l2_bytes"])
            xs.append(features(row["variant"], dtype, m, n, k, row_config(row), limits))
            ys.append(target(float(row["ms"]), m, n, k, dtype))
        cached = (np.array(xs, dtype=float).reshape(len(xs), len(FEATURES)), np.array(ys, dtype=float))
        observations.cache["matrix"] = cached
    return cached
