"""Compiled kernels launched below Triton's runner (`kernels.launching.below_triton`): the C launcher
gets exactly what Triton's own runner gives it, less the launch metadata and the empty hook chains;
wherever that cannot be shown (a hook, scratch memory, another layout) Triton's runner launches.

Without a GPU nothing compiles, so the compiled kernel is the installed Triton's own `CompiledKernel`
and its NVIDIA `CudaLauncher` with their handles said loaded, the C launch a recorder, and the driver
one that names a device and a stream: Triton's runner, launcher `__call__` and hooks run as they do
on a GPU. On a GPU, benchmarks/launch_overhead.py times both paths (`triton_floor_us` and
`direct_floor_us`) and checks every variant's result.
"""

import pytest
import torch
from triton import knobs
from triton.backends.nvidia.driver import CudaLauncher
from triton.compiler.compiler import CompiledKernel
from triton.runtime import driver

from kernels.launching import below_triton

GRID = (7, 2, 1)


class Loaded(CompiledKernel):
    """A CompiledKernel whose handles are loaded (nothing to load without a GPU) and never unloaded."""

    def __init__(self, launcher):
        self.module, self._module_pid, self.function, self._run = "module", None, 0xF00D, launcher
        self.packed_metadata, self.name, self.src = (4, 1, 0), "kernel", None

    def _init_handles(self):
        pass

    def __del__(self):
        pass


class Driver:
    """What Triton's runner and launcher ask the active driver: the device, its current stream."""

    def __init__(self):
        self.stream = 1000

    def get_current_device(self):
        return 0

    def get_current_stream(self, device):
        return self.stream


@pytest.fixture
def device(monkeypatch) -> Driver:
    fake = Driver()
    monkeypatch.setattr(driver, "_active", fake)
    return fake


class Sanitized(CudaLauncher):
    """A launcher that gives the C launch one argument more than the kernel's (as a sanitizer does)."""

    def __call__(self, *args):
        return super().__call__(*args, "extra")


def _launcher(calls: list, kind: type = CudaLauncher, **metadata) -> CudaLauncher:
    """Triton's launcher as its __init__ leaves it for a plain kernel, its C launch a recorder."""
    launcher = object.__new__(kind)
    fields = dict(
        num_ctas=1, global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0,
        profile_scratch_align=1, launch_cooperative_grid=False, launch_pdl=True, gsan_enabled=False,
        arg_annotations=("annotations",), kernel_signature=b"signature",
    )  # fmt: skip
    vars(launcher).update(fields | metadata)
    launcher.launch = lambda *call: calls.append(call)
    return launcher


def _args() -> tuple:
    return torch.zeros(4), torch.zeros(4), 512, 256, 64, 128


def test_the_c_launcher_gets_what_tritons_runner_gives_it_less_metadata_and_hooks(device):
    calls = []
    compiled = Loaded(_launcher(calls))
    args = _args()
    direct = below_triton(compiled, GRID, args)
    assert calls == []  # finding the layout launched nothing
    assert hasattr(direct, "triton_runner")  # below Triton

    compiled[GRID](*args)  # Triton's own runner
    device.stream = 2000  # the current stream is read at each launch
    direct(*args)
    theirs, ours = calls
    assert len(ours) == len(theirs) and ours[:3] == GRID
    assert ours[3] == 2000 and theirs[3] == 1000
    differ = [i for i, (x, y) in enumerate(zip(theirs, ours)) if i != 3 and x is not y and x != y]
    # exactly the launch metadata and the two hook chains, which the direct launch leaves out
    hooks = [knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook]
    assert [theirs[i] for i in differ[1:]] == hooks
    assert all(ours[i] is None for i in differ) and len(differ) == 3
    flat_or_packed = ours[-1] if isinstance(ours[-1], tuple) else ours[-len(args) :]
    assert all(x is y for x, y in zip(flat_or_packed, args, strict=True))


def test_a_hook_added_after_binding_sees_every_launch(device):
    calls, seen = [], []
    compiled = Loaded(_launcher(calls))
    direct = below_triton(compiled, GRID, _args())
    hook = knobs.runtime.launch_enter_hook
    hook.add(seen.append)
    try:
        direct(*_args())
    finally:
        hook.remove(seen.append)
    (call,) = calls
    assert any(x is hook for x in call)  # Triton's runner launched, passing its hooks
    direct(*_args())
    assert not any(x is hook for x in calls[1])  # and below it again once the hook is gone


@pytest.mark.parametrize(
    "why", ["global scratch", "profile scratch", "a hook now", "an unknown layout", "no launcher"]
)
def test_tritons_runner_launches_wherever_the_layout_is_not_shown(device, why):
    calls, seen = [], []
    kind = Sanitized if why == "an unknown layout" else CudaLauncher
    scratch = {"global scratch": {"global_scratch_size": 64}, "profile scratch": {"profile_scratch_size": 64}}
    launcher = _launcher(calls, kind, **scratch.get(why, {}))
    compiled = Loaded(None if why == "no launcher" else launcher)
    if why == "a hook now":
        knobs.runtime.launch_enter_hook.add(seen.append)
    try:
        direct = below_triton(compiled, GRID, _args())
    finally:
        knobs.runtime.launch_enter_hook.remove(seen.append)
    assert not hasattr(direct, "triton_runner")  # Triton's own runner
    assert calls == []
