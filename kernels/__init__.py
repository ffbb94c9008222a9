"""Triton matmul variants: one file per schedule, a registry, configs and their spaces.

Usable on its own in any program: imports nothing from `farm`, `db` or `dashboard`, and never
picks a device (launchers allocate on their inputs' device).

Importing the package imports neither torch nor Triton: configs, config spaces and the registry
(`get_variant`, `register_variant`) are plain Python, so a sweep's driver plans with them in a
fraction of a second. Names that need torch (the launchers, accuracy checks, the dispatcher,
`DTYPES`) load their modules on first use, and a built-in variant's module loads when it is
first launched (kernels/registry.py).
"""

import importlib

from kernels.config import LIBRARY_CONFIG, ConfigError, MatmulConfig
from kernels.registry import UnknownVariantError, Variant, get_variant, register_variant, variant_names
from kernels.space import SPACES, ConfigSpace, Problem

# name -> the module that defines it; imported on first access (PEP 562), as each imports torch.
_LAZY = {
    "DTYPES": "kernels.space",
    "check_accuracy": "kernels.accuracy",
    "reference_matmul": "kernels.accuracy",
    "relative_error": "kernels.accuracy",
    "tolerance": "kernels.accuracy",
    "Dispatcher": "kernels.dispatch",
    "matmul": "kernels.dispatch",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DTYPES",
    "LIBRARY_CONFIG",
    "SPACES",
    "ConfigError",
    "ConfigSpace",
    "Dispatcher",
    "MatmulConfig",
    "Problem",
    "UnknownVariantError",
    "Variant",
    "check_accuracy",
    "get_variant",
    "matmul",
    "reference_matmul",
    "register_variant",
    "relative_error",
    "tolerance",
    "variant_names",
]
