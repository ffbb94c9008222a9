"""The variant registry: built-in schedules and users' plugins register the same way.

    @register_variant("my_grouped", config_space="grouped")
    def launch(a, b, cfg: MatmulConfig) -> torch.Tensor: ...

`get_variant(name)` returns the `Variant`, with `.launch(a, b, cfg)` and `.configs(m, n, k, dtype)`.

The built-ins are declared below (`BUILTINS`: module, config space, flags) so that looking one up
imports neither torch nor Triton: a sweep's driver plans from the declarations, and only the
workers import the variant modules, when they first launch one (importing them costs 3-5 s of
start-up; docs/design.md, "Start-up"). A variant module's own `@register_variant` must agree with its
declaration, or importing it fails.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from kernels.config import MatmulConfig
from kernels.space import DEFAULT_SMEM_LIMIT, ConfigSpace, Problem, get_space

if TYPE_CHECKING:
    import torch

Launcher = Callable[["torch.Tensor", "torch.Tensor", MatmulConfig], "torch.Tensor"]


@dataclass(frozen=True)
class Builtin:
    """Where a built-in variant lives and what it is, known without importing it."""

    module: str
    config_space: str
    atomic: bool = False
    baseline: bool = False


BUILTINS: dict[str, Builtin] = {
    "tiled": Builtin("kernels.tiled", "tiled"),
    "grouped": Builtin("kernels.grouped", "grouped"),
    "grouped_pad": Builtin("kernels.grouped", "grouped_pad"),
    "splitk": Builtin("kernels.splitk", "splitk", atomic=True),
    "splitk_det": Builtin("kernels.splitk_det", "splitk"),
    "streamk": Builtin("kernels.streamk", "grouped", atomic=True),
    "streamk_hybrid": Builtin("kernels.streamk_hybrid", "grouped", atomic=True),
    "persistent_tma": Builtin("kernels.persistent_tma", "persistent_tma"),
    "persistent_tma_pad": Builtin("kernels.persistent_tma", "persistent_tma_pad"),
    "persistent_tma_bands": Builtin("kernels.persistent_bands", "persistent_tma_bands"),
    "splitk_tma": Builtin("kernels.splitk_tma", "splitk_tma"),
    "splitk_tma_reduce": Builtin("kernels.splitk_tma", "splitk_tma"),
    "splitk_tma_cluster": Builtin("kernels.splitk_tma", "splitk_tma_cluster"),
    "cublas": Builtin("kernels.cublas", "library", baseline=True),
}


class UnknownVariantError(KeyError, ValueError):
    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0])


@dataclass(frozen=True)
class Variant:
    name: str
    space: ConfigSpace
    atomic: bool = False  # result order depends on atomics: the farm repeats it to record nondeterminism
    baseline: bool = False  # the library kernel every variant is compared with
    source_file: str | None = None
    description: str = ""
    # The launcher; None for a built-in not imported yet (`launch` imports its module).
    launcher: Launcher | None = field(default=None, repr=False, compare=False)

    @property
    def launch(self) -> Launcher:
        if self.launcher is not None:
            return self.launcher
        importlib.import_module(BUILTINS[self.name].module)  # registers the full Variant
        return _REGISTRY[self.name].launch

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
        return self.space.configs(Problem(m, n, k, dtype, smem_limit), axes)


_REGISTRY: dict[str, Variant] = {}


def _builtin_source(module: str) -> str:
    """The file of a built-in's module, found without importing it (its package is imported)."""
    return importlib.util.find_spec(module).origin


@functools.cache
def _declared(name: str) -> Variant:
    """A built-in as its declaration says, before its module is imported."""
    decl = BUILTINS[name]
    return Variant(
        name=name,
        space=get_space(decl.config_space),
        atomic=decl.atomic,
        baseline=decl.baseline,
        source_file=_builtin_source(decl.module),
    )


def register_variant(
    name: str, *, config_space: str | ConfigSpace, atomic: bool = False, baseline: bool = False
) -> Callable[[Launcher], Launcher]:
    """Decorator: register `launch(a, b, cfg) -> a @ b` under `name` with a config space."""
    if not name.isidentifier():
        raise ValueError(f"variant name {name!r} must be an identifier")
    space = get_space(config_space)

    def decorate(launch: Launcher) -> Launcher:
        written = inspect.unwrap(launch)  # the function, not a wrapper (kernels.launching.KeptBindings)
        source = inspect.getsourcefile(written)
        existing = _REGISTRY.get(name) or (_declared(name) if name in BUILTINS else None)
        if existing is not None and existing.source_file != source:
            raise ValueError(f"variant {name!r} is already registered by {existing.source_file}")
        if name in BUILTINS:
            decl = BUILTINS[name]
            if (space.name, atomic, baseline) != (decl.config_space, decl.atomic, decl.baseline):
                raise ValueError(
                    f"variant {name!r}: registered with ({space.name}, atomic={atomic}, baseline={baseline}) "
                    f"but declared in kernels.registry.BUILTINS as {decl}"
                )
        _REGISTRY[name] = Variant(
            name=name,
            space=space,
            atomic=atomic,
            baseline=baseline,
            source_file=source,
            description=(inspect.getdoc(written) or "").split("\n")[0],
            launcher=launch,
        )
        return launch

    return decorate


def wrap_launcher(name: str, wrap: Callable[[Launcher], Launcher]) -> None:
    """Registered variant `name` launches through `wrap(its launcher)` from now on (kernels.launching.binds:
    a variant that binds its launch serves repeated calls through it). `name` must be registered."""
    if name not in _REGISTRY:
        raise ValueError(f"variant {name!r} is not registered: register it before wrapping its launcher")
    variant = _REGISTRY[name]
    _REGISTRY[name] = replace(variant, launcher=wrap(variant.launcher))


def get_variant(name: str) -> Variant:
    """The registered variant; a built-in not imported yet comes from its declaration (no torch)."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name in BUILTINS:
        return _declared(name)
    raise UnknownVariantError(f"unknown variant {name!r}; known: {', '.join(variant_names())}")


def variant_names() -> list[str]:
    return sorted(set(_REGISTRY) | set(BUILTINS))
