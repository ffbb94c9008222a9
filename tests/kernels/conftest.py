import pytest

from kernels.launching import KeptBindings
from kernels.registry import _REGISTRY


@pytest.fixture(autouse=True)
def no_kept_bindings():
    """Each test starts with no launch kept bound (kernels.launching.KeptBindings): a test that replaces a
    kernel by a stand-in (kernelkit.py) must not meet a binding made over another test's stand-in."""
    for variant in _REGISTRY.values():
        if isinstance(variant.launcher, KeptBindings):
            variant.launcher.bound.clear()
