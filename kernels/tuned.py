"""Load the best configs a farm exported (`farm export-best --out best.json`) and use them.

    tuned = TunedConfigs.load("best.json")
    variant, cfg = tuned.lookup(4096, 4096, 4096, torch.bfloat16, gpu_name="NVIDIA H200")
    c = get_variant(variant).launch(a, b, cfg)

A shape not in the file takes the entry nearest in log space (ratios of m, n and k).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from kernels.config import MatmulConfig
from kernels.space import DTYPES, dtype_name

FORMAT = "triton-matmul-farm/best-configs"


@dataclass(frozen=True)
class TunedEntry:
    gpu_name: str
    dtype: str
    m: int
    n: int
    k: int
    variant: str
    ms: float
    config: MatmulConfig


class TunedConfigs:
    def __init__(self, entries: list[TunedEntry]):
        self.entries = entries

    @classmethod
    def load(cls, path: str | Path) -> TunedConfigs:
        data = json.loads(Path(path).read_text())
        if data.get("format") != FORMAT or data.get("version") != 1:
            raise ValueError(f"{path}: not a {FORMAT} v1 file")
        entries = [
            TunedEntry(
                e["gpu_name"],
                e["dtype"],
                e["m"],
                e["n"],
                e["k"],
                e["variant"],
                e["ms"],
                MatmulConfig.from_dict(e["config"]),
            )
            for e in data["entries"]
        ]
        return cls(entries)

    def lookup(
        self,
        m: int,
        n: int,
        k: int,
        dtype: torch.dtype | str,
        *,
        gpu_name: str | None = None,
        variant: str | None = None,
    ) -> tuple[str, MatmulConfig]:
        """(variant, config) of the fastest entry for the nearest shape, optionally for one GPU/variant."""
        name = dtype if isinstance(dtype, str) else dtype_name(dtype)
        if name not in DTYPES:
            raise ValueError(f"unsupported dtype {name}")
        pool = [
            e
            for e in self.entries
            if e.dtype == name
            and (gpu_name is None or e.gpu_name == gpu_name)
            and (variant is None or e.variant == variant)
        ]
        if not pool:
            raise LookupError(f"no tuned entry for dtype={name} gpu={gpu_name} variant={variant}")

        def distance(e: TunedEntry) -> tuple[float, float]:
            return (abs(math.log(e.m / m)) + abs(math.log(e.n / n)) + abs(math.log(e.k / k)), e.ms)

        best = min(pool, key=distance)
        return best.variant, best.config
