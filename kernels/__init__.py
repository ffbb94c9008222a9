"""Triton matmul variants: one file per schedule, a registry, configs and their spaces.

Usable on its own in any program: imports nothing from `farm`, `db` or `dashboard`, and never
picks a device (launchers allocate on their inputs' device).
"""

from kernels import (  # noqa: F401  (register the built-ins)
    cublas,
    grouped,
    persistent_tma,
    splitk,
    splitk_det,
    streamk,
    streamk_hybrid,
    tiled,
)
from kernels.accuracy import check_accuracy, reference_matmul, relative_error, tolerance
from kernels.config import LIBRARY_CONFIG, ConfigError, MatmulConfig
from kernels.dispatch import Dispatcher, matmul
from kernels.registry import UnknownVariantError, Variant, get_variant, register_variant, variant_names
from kernels.space import DTYPES, SPACES, ConfigSpace, Problem

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
