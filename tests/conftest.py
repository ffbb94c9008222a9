"""Test-wide setup: without a GPU, kernels run under Triton's interpreter on the CPU.

TRITON_INTERPRET must be set before any @triton.jit function is defined (Triton reads it when
it decorates), so this runs before the test modules import `kernels`.
"""

import os

import pytest
import torch

ON_GPU = torch.cuda.is_available()


def _skip_repatching_nested_calls() -> None:
    """Triton's interpreter patches triton.language (every builtin of tl, tl.core, tl.tensor and tl.math,
    found with inspect.getmembers) at each grid launch, and again at every call of a @triton.jit helper
    inside the kernel (kernels.tile's tile_accumulate, store_tile, ...), though the launch's patches are
    still in place (tests/kernels: 177 -> 154 s on 2 cores with the repeats skipped). A nested call whose
    function sees only language modules the running launch patched skips the repeat; one that sees
    another is patched as before. What the kernels compute is unchanged; the farm's workers (their own
    processes) run Triton as it is."""
    import inspect

    from triton.runtime import interpreter

    langs = (interpreter.tl, interpreter.tl.core)
    patched: list[frozenset[int]] = []  # the language modules each running launch patched

    def seen(fn) -> frozenset[int]:
        return frozenset(id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in langs)

    launch, call = interpreter.GridExecutor.__call__, interpreter.InterpretedFunction.__call__

    def grid_call(self, *args, **kwargs):
        patched.append(seen(self.fn))
        try:
            return launch(self, *args, **kwargs)
        finally:
            patched.pop()

    def nested_call(self, *args, **kwargs):
        if not patched or not seen(self.fn) <= patched[-1]:
            return call(self, *args, **kwargs)
        fn = self.rewrite()
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise interpreter.InterpreterError(repr(e)) from e

    interpreter.GridExecutor.__call__ = grid_call
    interpreter.InterpretedFunction.__call__ = nested_call


if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"
    from kernels.interpreter import fix_bf16

    fix_bf16()
    _skip_repatching_nested_calls()


@pytest.fixture(scope="session")
def device() -> torch.device:
    return torch.device("cuda" if ON_GPU else "cpu")


# The PostgreSQL server fixtures (pg_admin_url, pg_admin, pg_target) for tests/db and tests/dashboard.
pytest_plugins = ["pgserver"]
