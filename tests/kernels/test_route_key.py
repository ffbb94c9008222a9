"""kernels.matmul's route key below Python (kernels/route_key.cpp, built by the Makefile's setup) tells
apart what its Python twin tells apart, and a decided call uses it."""

import itertools
import subprocess
import sys

import pytest
import torch

from kernels import op, route_key


class Sub(torch.Tensor):
    pass


def _t(*shape, dtype=torch.float32, device="cpu"):
    return torch.ones(shape, dtype=dtype, device=device)


# (a, b) pairs, each a call a decided route may or may not serve
CALLS = {
    "2-D": lambda: (_t(20, 24), _t(24, 18)),
    "2-D again": lambda: (_t(20, 24), _t(24, 18)),
    "shape": lambda: (_t(21, 24), _t(24, 18)),
    "strides": lambda: (_t(24, 20).T, _t(24, 18)),
    "B's strides": lambda: (_t(20, 24), _t(18, 24).T),
    "dtype": lambda: (_t(20, 24, dtype=torch.float16), _t(24, 18, dtype=torch.float16)),
    "B's dtype": lambda: (_t(20, 24), _t(24, 18, dtype=torch.float16)),
    "meta": lambda: (_t(20, 24, device="meta"), _t(24, 18, device="meta")),
    "3-D": lambda: (_t(2, 10, 24), _t(24, 18)),
    "3-D, its sizes swapped": lambda: (_t(10, 2, 24), _t(24, 18)),
    "1-D B": lambda: (_t(20, 24), _t(24)),
    "0-D": lambda: (torch.tensor(2.0), _t(24)),
    "Parameter": lambda: (torch.nn.Parameter(_t(20, 24), requires_grad=False), _t(24, 18)),
    "subclass": lambda: (_t(20, 24).as_subclass(Sub), _t(24, 18)),
    "gradient": lambda: (_t(20, 24).requires_grad_(), _t(24, 18)),
    "not a tensor": lambda: ([[1.0]], _t(1, 1)),
}


def test_the_built_key_is_what_decided_calls_use():
    """The Makefile's setup built it (`python -m kernels.route_key`): a C function, kernels.op's key."""
    built = route_key.built_key()
    assert built is not None, "run `python -m kernels.route_key` (the Makefile's setup does)"
    assert type(op._route_key) is type(built) and op._route_key.__name__ == "route_key"
    assert op._route_key is not route_key.python_key


@pytest.mark.parametrize(("first", "second"), list(itertools.combinations(CALLS, 2)))
def test_the_c_key_tells_apart_what_the_python_key_does(first, second):
    c_key = route_key.built_key()
    a1, b1 = CALLS[first]()
    a2, b2 = CALLS[second]()
    c1, c2 = c_key(a1, b1), c_key(a2, b2)
    p1, p2 = route_key.python_key(a1, b1), route_key.python_key(a2, b2)
    assert (c1 is None, c2 is None) == (p1 is None, p2 is None)
    if p1 is not None and p2 is not None:
        assert (c1 == c2) == (p1 == p2)


def test_no_key_for_a_subclass_a_gradient_or_a_non_tensor_and_one_without_grad_mode():
    c_key = route_key.built_key()
    for name in ("subclass", "gradient", "not a tensor"):
        assert c_key(*CALLS[name]()) is None, name
    with torch.no_grad():  # no gradient recorded: the same call is keyed
        assert c_key(*CALLS["gradient"]()) == c_key(*CALLS["2-D"]())


def test_past_eight_dims_only_the_python_key_keys_the_call():
    a, b = _t(*[1] * 8, 2, 3), _t(3, 4)
    assert route_key.built_key()(a, b) is None and route_key.python_key(a, b) is not None
    assert route_key.built_key()(_t(*[1] * 6, 2, 3), b) is not None


def test_the_c_key_takes_two_arguments():
    with pytest.raises(TypeError, match="two arguments"):
        route_key.built_key()(_t(2, 2))


def test_decided_calls_take_their_routes_with_the_python_key(monkeypatch):
    """Where nothing was built, decided calls are keyed in Python and served the same way."""
    from kernels.dispatch import Dispatcher

    monkeypatch.setattr(op, "_route_key", route_key.python_key)
    dispatch = Dispatcher(None, gpu_name="NVIDIA H100 80GB HBM3")
    a, b = _t(20, 24, dtype=torch.float64), _t(24, 18, dtype=torch.float64)
    dispatch(a, b)  # float64: torch.matmul serves, the route torch.matmul itself
    dispatch(a, b)
    dispatch(_t(21, 24, dtype=torch.float64), b)
    assert (dispatch.routes.served, dispatch.routes.decided) == (1, 2)
    ((key, *_),) = itertools.islice(dispatch.routes, 1)
    assert key == route_key.python_key(a, b)


def test_a_build_without_a_compiler_says_so_and_fails(tmp_path):
    """No compiler: exit status 1 and why, and nothing to load (kernels.matmul keys in Python)."""
    env = {"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path), "CXX": str(tmp_path / "no-compiler")}
    run = subprocess.run(
        [sys.executable, "-m", "kernels.route_key"], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "route key not built" in run.stderr and "Traceback" not in run.stderr
    load = [sys.executable, "-c", "from kernels import route_key; print(route_key.key_function().__name__)"]
    shown = subprocess.run(load, env=env, capture_output=True, text=True, timeout=600)
    assert shown.stdout.strip() == "python_key", shown.stderr


def test_a_build_that_does_not_load_is_not_used(tmp_path, monkeypatch):
    """A cache folder shared with another machine: a file that is no module for this one is passed over."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    directory = route_key.build_directory()
    directory.mkdir(parents=True)
    (directory / f"{route_key.NAME}.so").write_bytes(b"not an ELF file")
    assert route_key.built_key() is None and route_key.key_function() is route_key.python_key
