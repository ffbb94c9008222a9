"""Stand-ins for a Triton JIT kernel and its CompiledKernel, for launchers that call compiled kernels
directly (`kernels.launching.DirectCalls`): without a GPU nothing compiles, so the stand-in records
each launch through Triton's path and returns a CompiledKernel whose runner records the direct calls."""

from triton.compiler.compiler import CompiledKernel


class StandInCompiled(CompiledKernel):
    def __init__(self):  # nothing to load: no GPU
        self.module = None  # what CompiledKernel.__del__ looks at
        self.grids, self.calls = [], []

    def __getitem__(self, grid):
        self.grids.append(grid)
        return lambda *args: self.calls.append(args)


class StandInKernel:
    """The JIT kernel's interface: `kernel[grid](*args, **kwargs)` and its argument names."""

    def __init__(self, arg_names):
        self.arg_names = arg_names
        self.jit_calls, self.compiled = [], StandInCompiled()

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.jit_calls.append((grid, args, kwargs))
            return self.compiled

        return run
