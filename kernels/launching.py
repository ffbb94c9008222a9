"""Whether a launcher's Triton launches run or only compile.

The farm compiles every point's kernels ahead of timing by calling its launcher while Triton's
launches are turned into compile-only warm-ups (farm/compile.py sets `COMPILE_ONLY`). A launcher
that calls a compiled kernel directly (`persistent_tma`, after a shape and config's first launch)
must take Triton's path instead while it is set: a direct call would run the kernel, and the farm
would not see which kernels the launcher uses. The switch lives here, at the bottom, so launchers
read it without importing the farm.
"""

import contextvars

COMPILE_ONLY = contextvars.ContextVar("kernels_compile_only", default=False)
