"""Load the best configs a farm exported (`farm export-best --out best.json`) and use them.

    tuned = TunedConfigs.load("best.json")
    variant, cfg = tuned.lookup(4096, 4096, 4096, torch.bfloat16, gpu_name="NVIDIA H200")
    c = get_variant(variant).launch(a, b, cfg)

A shape not in the file takes the entry nearest in log space (ratios of m, n and k). A file may hold
several GPUs' entries (pass `gpu_name`, or every GPU's compete), a library entry (`cublas`, whose
config is LIBRARY_CONFIG: `get_variant("cublas").launch` is torch.matmul) and entries of variants this
program does not know (a plugin's): `lookup` passes those over unless `variant` names one, so what it
returns launches. kernels.dispatch decides per problem from the same file.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernels.config import MatmulConfig
from kernels.registry import variant_names
from kernels.space import DTYPES, dtype_name

# The file's identity. VERSION changes only when the layout does: v1 files must keep loading.
FORMAT = "triton-matmul-farm/best-configs"
VERSION = 1
# An entry's times besides `ms`, each written only where known: optional in v1, so files without them
# keep loading (TunedEntry's fields of the same names, in this order).
OPTIONAL_TIMES = ("host_ms", "gpu_ms", "eager_ms")


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
    tflops: float | None = None
    # The launcher's host time a call, where it was measured (the farm's host_ms; benchmarks/vs_libraries.py's
    # tuning): an eager caller of a short product waits for it (`kernels.dispatch.Candidate.eager_wait_ms`).
    host_ms: float | None = None
    # The product's GPU time alone (CUDA graphs, L2 flushed), where measured (benchmarks/vs_libraries.py's
    # tuning): what the kernel itself costs, where `ms` (eager) also holds the launcher's host time.
    gpu_ms: float | None = None
    # What an eager caller waited for per call at this shape, where measured (the farm's eager_ms: the
    # longer of the stream and host times): the eager objective's time, where `ms` is the kernel
    # objective's (`farm export-best` writes both; kernels.dispatch's objectives).
    eager_ms: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The entry as the file holds it; the config through MatmulConfig.as_dict, extras included."""
        config = self.config.as_dict()
        if not config["extras"]:
            del config["extras"]  # v1 files written before extras existed: same bytes for the same data
        entry = {
            "gpu_name": self.gpu_name,
            "dtype": self.dtype,
            "m": self.m,
            "n": self.n,
            "k": self.k,
            "variant": self.variant,
            "ms": self.ms,
            "tflops": self.tflops,
            "config": config,
        }
        # optional in v1: files without them keep loading, and say the same
        entry.update({key: value for key in OPTIONAL_TIMES if (value := getattr(self, key)) is not None})
        return entry

    @classmethod
    def from_dict(cls, e: dict[str, Any]) -> TunedEntry:
        return cls(
            e["gpu_name"],
            e["dtype"],
            e["m"],
            e["n"],
            e["k"],
            e["variant"],
            e["ms"],
            MatmulConfig.from_dict(e["config"]),
            e.get("tflops"),
            *(e.get(key) for key in OPTIONAL_TIMES),
        )


class TunedConfigs:
    def __init__(self, entries: Iterable[TunedEntry]):
        self.entries = list(entries)

    @classmethod
    def load(cls, path: str | Path) -> TunedConfigs:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} file")
        if data.get("version") != VERSION:
            raise ValueError(
                f"{path}: {FORMAT} version {data.get('version')!r}; this code reads version {VERSION}"
            )
        return cls(TunedEntry.from_dict(e) for e in data["entries"])

    def document(self) -> dict[str, Any]:
        """The JSON document `save` writes."""
        return {"format": FORMAT, "version": VERSION, "entries": [e.as_dict() for e in self.entries]}

    def dumps(self) -> str:
        return json.dumps(self.document(), indent=1) + "\n"

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.dumps())

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
        """(variant, config) of the fastest entry for the nearest shape, optionally for one GPU/variant;
        without `variant`, of the variants registered in this program (LookupError where none is)."""
        name = dtype if isinstance(dtype, str) else dtype_name(dtype)
        if name not in DTYPES:
            raise ValueError(f"unsupported dtype {name}")
        known = set(variant_names())
        pool = [
            e
            for e in self.entries
            if e.dtype == name
            and (gpu_name is None or e.gpu_name == gpu_name)
            and (e.variant == variant if variant is not None else e.variant in known)
        ]
        if not pool:
            raise LookupError(f"no tuned entry for dtype={name} gpu={gpu_name} variant={variant}")

        def distance(e: TunedEntry) -> tuple[float, float]:
            return (abs(math.log(e.m / m)) + abs(math.log(e.n / n)) + abs(math.log(e.k / k)), e.ms)

        best = min(pool, key=distance)
        return best.variant, best.config


def stored_config(columns: Mapping[str, Any], config_key: str) -> MatmulConfig:
    """The config of a stored result: its config columns, plus the extras that only its key holds.

    MatmulConfig.key appends extras as `_name=value` after the base key, and a results row has no
    extras columns, so they are read back from the key. Names and values may contain `_`: a part
    without `=` belongs to the next name, a trailing one to the last value. A key this code does not
    write (a hand-made row) carries no recoverable extras: the columns alone.
    """
    fields = {f.name for f in dataclasses.fields(MatmulConfig)} - {"extras"}
    config = MatmulConfig(**{name: columns[name] for name in fields})
    base = config.key
    if not config_key.startswith(base + "_"):
        return config
    extras: list[tuple[str, Any]] = []
    pending: list[str] = []
    for part in config_key[len(base) + 1 :].split("_"):
        if "=" in part:
            name, value = part.split("=", 1)
            extras.append(("_".join([*pending, name]), value))
            pending = []
        else:
            pending.append(part)
    if pending and extras:
        name, value = extras[-1]
        extras[-1] = (name, "_".join([value, *pending]))
    return config.replace(extras=tuple(sorted((name, _scalar(value)) for name, value in extras)))


def _scalar(text: str) -> Any:
    """An extra's value as MatmulConfig.key printed it: int, float, bool or text."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)
