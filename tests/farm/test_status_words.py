"""Status words of failed points: `compile_error` is Triton's compiler (or loading its binary) failing;
whatever a launcher's own code raises is `launch_error`, also when it surfaces while compiling ahead."""

import ast
import os
from concurrent.futures import Future

import pytest
import triton
from triton.compiler.errors import CompilationError
from triton.runtime.errors import OutOfResources

from db.records import Status
from farm.compile import failure_status
from farm.plan import Point
from kernels import MatmulConfig

TRITON = os.path.dirname(triton.__file__)


def raised(exc_type, message, where=None):
    """An exception with a real traceback, raised from code in file `where` (a path) or from here."""
    try:
        if where is None:
            raise exc_type(message)
        code = compile(f"raise {exc_type.__name__}({message!r})", where, "exec")
        exec(code, {exc_type.__name__: exc_type})
    except exc_type as exc:
        return exc
    raise AssertionError("nothing was raised")


def launcher_that_checks_its_input(a, b, cfg):
    """A plugin launcher whose own Python code refuses a shape."""
    if a.shape[1] % 3:
        raise RuntimeError("my_kernel needs K divisible by 3")


def plugin_error():
    try:
        launcher_that_checks_its_input(type("T", (), {"shape": (40, 64)})(), None, None)
    except RuntimeError as exc:
        return exc
    raise AssertionError("nothing was raised")


CASES = [
    pytest.param(lambda: plugin_error(), Status.LAUNCH_ERROR, id="launcher-own-runtime-error"),
    pytest.param(lambda: raised(ValueError, "bad cfg"), Status.LAUNCH_ERROR, id="launcher-own-value-error"),
    pytest.param(
        lambda: raised(TypeError, "missing argument", os.path.join(TRITON, "runtime", "jit.py")),
        Status.LAUNCH_ERROR,
        id="kernel-called-with-wrong-arguments",
    ),
    pytest.param(
        lambda: raised(
            RuntimeError, "interpreted kernel raised", os.path.join(TRITON, "runtime", "interpreter.py")
        ),
        Status.LAUNCH_ERROR,
        id="interpreter-kernel-raised",
    ),
    pytest.param(
        lambda: CompilationError("src", ast.parse("x").body[0], "unknown function"),
        Status.COMPILE_ERROR,
        id="compilation-error",
    ),
    pytest.param(
        lambda: OutOfResources(262144, 232448, "shared memory"),
        Status.COMPILE_ERROR,
        id="out-of-shared-memory",
    ),
    pytest.param(
        lambda: raised(
            RuntimeError, "PassManager::run failed", os.path.join(TRITON, "compiler", "compiler.py")
        ),
        Status.COMPILE_ERROR,
        id="mlir-pass-failed",
    ),
    pytest.param(
        lambda: raised(
            RuntimeError, "ptxas failed", os.path.join(TRITON, "backends", "nvidia", "compiler.py")
        ),
        Status.COMPILE_ERROR,
        id="backend-ptxas-failed",
    ),
]


@pytest.mark.parametrize(("make", "expected"), CASES)
def test_failure_status(make, expected):
    assert failure_status(make()) == expected


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        pytest.param(plugin_error, Status.LAUNCH_ERROR, id="launcher-raised-while-compiling-ahead"),
        pytest.param(
            lambda: OutOfResources(300, 255, "registers"), Status.COMPILE_ERROR, id="binary-does-not-fit"
        ),
    ],
)
def test_worker_stores_a_compile_ahead_failure_by_its_cause(make, expected, monkeypatch):
    from farm.worker import GpuWorker, _Slot

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    worker = GpuWorker([], backend="interpreter", compile_threads=1)
    failed = Future()
    failed.set_exception(make())
    point = Point("my_variant", "bfloat16", 40, 64, 48, MatmulConfig(16, 16, 16, num_warps=4, num_stages=2))
    record = worker._wait_compiled(_Slot(point, launch=None, compiled=failed))
    worker.pool.shutdown()
    assert record.status == expected and record.ms is None and record.timing_regime == ""
    assert record.error.startswith(type(failed.exception()).__name__)
