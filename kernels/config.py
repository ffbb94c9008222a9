"""`MatmulConfig`: one point of a variant's config space, frozen, with a stable key.

Fields a variant does not use keep their defaults (group_m 1, split_k 1). Library baselines
(cuBLAS) have no tile knobs: they use `LIBRARY_CONFIG`, whose block and warp fields are 0.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

# Triton's dot accepts these for fp32 inputs; for fp16/bf16 inputs the field is ignored and stays "ieee".
INPUT_PRECISIONS = ("ieee", "tf32", "tf32x3")
TILE_FIELDS = ("block_m", "block_n", "block_k", "num_warps", "num_stages")
# tl.dot needs every block dimension >= 16 (the smallest MMA tile); above 512 the register tile cannot fit.
MIN_BLOCK, MAX_BLOCK = 16, 512


class ConfigError(ValueError):
    """A config that cannot run (not a power of two, SPLIT_K < 1, ...), raised before any launch."""


def _is_pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


@dataclass(frozen=True, order=True)
class MatmulConfig:
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    group_m: int = 1
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 3
    input_precision: str = "ieee"
    # Variant-specific knobs as sorted (name, value) pairs, so the config stays hashable and its key stable.
    extras: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        for name in (*TILE_FIELDS, "group_m", "split_k"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{name} must be an integer, got {value!r}")
        if not self.is_library:
            for name in ("block_m", "block_n", "block_k"):
                value = getattr(self, name)
                if not _is_pow2(value) or not MIN_BLOCK <= value <= MAX_BLOCK:
                    raise ConfigError(
                        f"{name}={value}: block sizes must be powers of two in [{MIN_BLOCK}, {MAX_BLOCK}]"
                    )
            if not _is_pow2(self.num_warps) or self.num_warps > 32:
                raise ConfigError(f"num_warps={self.num_warps}: must be a power of two <= 32")
            if self.num_stages < 1:
                raise ConfigError(f"num_stages={self.num_stages}: must be >= 1")
        if self.group_m < 1:
            raise ConfigError(f"group_m={self.group_m}: must be >= 1")
        if self.split_k < 1:
            raise ConfigError(f"split_k={self.split_k}: must be >= 1")
        if self.input_precision not in INPUT_PRECISIONS:
            raise ConfigError(
                f"input_precision={self.input_precision!r}: one of {', '.join(INPUT_PRECISIONS)}"
            )
        if list(self.extras) != sorted(self.extras) or len({k for k, _ in self.extras}) != len(self.extras):
            raise ConfigError("extras must be sorted (name, value) pairs with distinct names")

    @property
    def is_library(self) -> bool:
        """True for a library baseline's config: every tile knob is 0 (not applicable)."""
        return all(getattr(self, name) == 0 for name in TILE_FIELDS)

    @property
    def key(self) -> str:
        """Stable text key: the database's config identity. Never reorder or rename its parts."""
        if self.is_library:
            base = "library"
        else:
            base = (
                f"bm{self.block_m}_bn{self.block_n}_bk{self.block_k}_gm{self.group_m}_sk{self.split_k}"
                f"_w{self.num_warps}_s{self.num_stages}"
            )
        parts = [base, self.input_precision, *(f"{name}={value}" for name, value in self.extras)]
        return "_".join(parts)

    def extra(self, name: str, default: Any = None) -> Any:
        return dict(self.extras).get(name, default)

    def replace(self, **changes: Any) -> MatmulConfig:
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["extras"] = dict(self.extras)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MatmulConfig:
        data = dict(data)
        extras = data.pop("extras", {}) or {}
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown config fields: {', '.join(sorted(unknown))}")
        return cls(**data, extras=tuple(sorted(dict(extras).items())))


LIBRARY_CONFIG = MatmulConfig(block_m=0, block_n=0, block_k=0, num_warps=0, num_stages=0)
