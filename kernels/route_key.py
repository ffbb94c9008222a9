"""The route key of kernels.matmul's decided calls (kernels/op.py, `DropIn`), made below Python where built.

A decided call is keyed by its operands' ranks, sizes, strides, dtypes and devices. Made in Python
(`python_key`) that is eight attribute reads and a tuple: 835 ns, 1,140 with the dictionary's look-up
(4x4 float32, 2-core CPU host; on an H100 host the key alone took 1.31 us), most of what a decided
cuBLAS route adds to torch.matmul. route_key.cpp makes the same key in one C call: 62 ns, 137 with the
look-up, on the same host. It is a torch C++ extension, built once for each Python, torch and source by

    python -m kernels.route_key

(the Makefile's setup runs it; it needs a C++ compiler and ninja, and took 37 s on 2 cores) into the
user's cache folder ($XDG_CACHE_HOME or ~/.cache, `triton-matmul-farm/`). `key_function()` loads the one
built for this Python and torch; where none was (no compiler, a new torch), it returns `python_key`,
which tells the same calls apart, and kernels.matmul is only slower.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

NAME = "farm_route_key"
SOURCE = Path(__file__).with_name("route_key.cpp")
# Plain tensors (a Parameter is one): a subclass (a fake or a distributed tensor) decides every call.
PLAIN = (torch.Tensor, torch.nn.Parameter)


def python_key(a, b) -> tuple | None:
    """What route_key.cpp's `route_key(a, b)` tells apart, in Python: None where no route may serve the
    call (an operand not exactly a tensor or a Parameter, or a gradient to record), else a's and b's
    sizes, strides, dtypes and devices. (The C key also gives None past 8 dims, its buffer's bound.)"""
    if type(a) not in PLAIN or type(b) not in PLAIN:
        return None
    if (a.requires_grad or b.requires_grad) and torch.is_grad_enabled():
        return None
    return (a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, a.device, b.device)


def build_directory() -> Path:
    """Where the extension for this Python, torch and source is built: a new torch or source is a new
    folder, so a build made for another never loads."""
    tag = f"{sys.version_info.major}.{sys.version_info.minor}-{torch.__version__}".encode()
    digest = hashlib.sha256(SOURCE.read_bytes() + tag).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "triton-matmul-farm" / f"{NAME}-{digest}"


def built_key() -> Callable | None:
    """The C key built for this Python and torch, or None where none was built or it does not load (a
    cache folder shared with a machine of another C library)."""
    path = build_directory() / f"{NAME}.so"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(NAME, path)
    try:
        module = importlib.util.module_from_spec(spec)  # dlopen: an undefined symbol, a wrong ELF class
        spec.loader.exec_module(module)
    except ImportError:
        return None
    return module.route_key


def key_function() -> Callable:
    """The C key where built, else `python_key`."""
    return built_key() or python_key


def build(verbose: bool = False) -> Path:
    """Compiles route_key.cpp for this Python and torch (torch.utils.cpp_extension, with ninja: the
    one beside this Python where the environment has one) and returns the built module's path."""
    from torch.utils.cpp_extension import load

    bin_dir = os.path.dirname(sys.executable)  # a virtual environment's ninja (the `ninja` package)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    directory = build_directory()
    directory.mkdir(parents=True, exist_ok=True)
    load(NAME, [str(SOURCE)], build_directory=str(directory), extra_cflags=["-O2"], verbose=verbose)
    return directory / f"{NAME}.so"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build kernels.matmul's route key (kernels/route_key.cpp).")
    parser.add_argument("--verbose", action="store_true", help="show the compiler's commands")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        path = build(args.verbose)
    except (OSError, RuntimeError, ImportError) as exc:  # no compiler or ninja, a failed compile
        print(f"route key not built ({exc}); kernels.matmul keys decided calls in Python", file=sys.stderr)
        return 1
    print(f"built {path} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
