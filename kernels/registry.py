"""The variant registry: built-in schedules and users' plugins register the same way.

    @register_variant("my_grouped", config_space="grouped")
    def launch(a, b, cfg: MatmulConfig) -> torch.Tensor: ...

`get_variant(name)` returns the `Variant`, with `.launch(a, b, cfg)` and `.configs(m, n, k, dtype)`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from kernels.config import MatmulConfig
from kernels.space import DEFAULT_SMEM_LIMIT, DTYPES, ConfigSpace, Problem, get_space

Launcher = Callable[[torch.Tensor, torch.Tensor, MatmulConfig], torch.Tensor]


class UnknownVariantError(KeyError, ValueError):
    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0])


@dataclass(frozen=True)
class Variant:
    name: str
    launch: Launcher
    space: ConfigSpace
    atomic: bool = False  # result order depends on atomics: the farm repeats it to record nondeterminism
    baseline: bool = False  # the library kernel every variant is compared with
    source_file: str | None = None
    description: str = ""

    def configs(
        self,
        m: int,
        n: int,
        k: int,
        dtype: torch.dtype | str,
        axes: Mapping[str, Sequence] | None = None,
        *,
        smem_limit: int = DEFAULT_SMEM_LIMIT,
    ) -> list[MatmulConfig]:
        """This variant's config space for one problem, pruned, in a stable order."""
        dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
        return self.space.configs(Problem(m, n, k, dtype, smem_limit), axes)


_REGISTRY: dict[str, Variant] = {}


def register_variant(
    name: str, *, config_space: str | ConfigSpace, atomic: bool = False, baseline: bool = False
) -> Callable[[Launcher], Launcher]:
    """Decorator: register `launch(a, b, cfg) -> a @ b` under `name` with a config space."""
    if not name.isidentifier():
        raise ValueError(f"variant name {name!r} must be an identifier")
    space = get_space(config_space)

    def decorate(launch: Launcher) -> Launcher:
        source = inspect.getsourcefile(launch)
        existing = _REGISTRY.get(name)
        if existing is not None and existing.source_file != source:
            raise ValueError(f"variant {name!r} is already registered by {existing.source_file}")
        _REGISTRY[name] = Variant(
            name=name,
            launch=launch,
            space=space,
            atomic=atomic,
            baseline=baseline,
            source_file=source,
            description=(inspect.getdoc(launch) or "").split("\n")[0],
        )
        return launch

    return decorate


def get_variant(name: str) -> Variant:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownVariantError(
            f"unknown variant {name!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None


def variant_names() -> list[str]:
    return sorted(_REGISTRY)
