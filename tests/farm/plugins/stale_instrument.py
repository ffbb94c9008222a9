"""Plugin variants timed by an instrument that fails, for the fresh-process tests
(tests/farm/test_fresh_process.py).

Both launch `tiled`. The worker's clock (farm.clock.HostClock, the interpreter's) raises the profiler's
lost-launches InstrumentError after each block holding one of their launches, as CUPTI's drift does in
an old process (docs/design.md, "Instrument faults"): `stale_instrument` in the first process that timed
one (its pid kept in PID_FILE beside this plugin's copy), `broken_instrument` in every process. The
clock is patched at the first launch, so only in a worker: the driver imports this file but never
launches.
"""

import contextlib
import os
from pathlib import Path

import torch

from kernels import MatmulConfig, get_variant, register_variant

PID_FILE = "stale-process.pid"
LOST = (
    "the profile lost the GPU work of 4 of the session's 4 launches "
    "(no activity, or under 1/50 of their stream time)"
)
_launched: set[str] = set()  # the variants launched since the clock's current block began


def _first_timed_here() -> bool:
    """Whether this process is the first that timed a `stale_instrument` launch (it writes PID_FILE)."""
    path = Path(__file__).with_name(PID_FILE)
    if not path.exists():
        partial = path.with_name(f".{PID_FILE}.{os.getpid()}")
        partial.write_text(str(os.getpid()))
        with contextlib.suppress(FileExistsError):  # another process was first
            os.link(partial, path)  # whole or not at all
        partial.unlink()
    return int(path.read_text()) == os.getpid()


def _plant() -> None:
    from farm.clock import HostClock
    from farm.errors import InstrumentError
    from farm.instrument import PROFILER

    run = HostClock.run
    if getattr(run, "planted", False):
        return

    def planted(self, launches, host_s, **kwargs):
        _launched.clear()
        block = run(self, launches, host_s, **kwargs)
        if "broken_instrument" in _launched or ("stale_instrument" in _launched and _first_timed_here()):
            raise InstrumentError(PROFILER, LOST)
        return block

    planted.planted = True
    HostClock.run = planted


@register_variant("stale_instrument", config_space="tiled")
def stale_instrument(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Timed by an instrument that fails in the first process that timed it."""
    _plant()
    _launched.add("stale_instrument")
    return get_variant("tiled").launch(a, b, cfg)


@register_variant("broken_instrument", config_space="tiled")
def broken_instrument(a: torch.Tensor, b: torch.Tensor, cfg: MatmulConfig) -> torch.Tensor:
    """Timed by an instrument that fails in every process."""
    _plant()
    _launched.add("broken_instrument")
    return get_variant("tiled").launch(a, b, cfg)
