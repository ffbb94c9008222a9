"""Where `farm sweep`'s start-up goes, phase by phase, in one process on a GPU machine.

    python bench/startup_probe.py

Times what a sweep's driver does before its first batch, one phase after another: the driver's
imports, `ray.init` of a local head, one GPU actor up (its own imports and CUDA context, reported
by the actor), a database created and migrated. Visit 20 (docs/perf-notes.md): 16 s in all on an
H200 host, 5.9 s of it `ray.init`.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

T0 = time.perf_counter()


def mark(what: str) -> None:
    print(f"{time.perf_counter() - T0:6.2f} s  {what}", flush=True)


def main() -> None:
    import torch as driver_torch  # noqa: F401

    mark("import torch (driver)")
    import cli  # noqa: F401
    import farm.driver  # noqa: F401

    mark("import farm.driver, cli")
    import ray

    mark("import ray")
    ray.init(num_gpus=1, include_dashboard=False, log_to_driver=False)
    mark("ray.init (local head)")

    @ray.remote(num_gpus=1, num_cpus=0)
    class Probe:
        def __init__(self):
            t = time.perf_counter()
            import torch

            self.imports_s = time.perf_counter() - t
            t = time.perf_counter()
            torch.zeros(1, device="cuda")
            self.cuda_s = time.perf_counter() - t
            t = time.perf_counter()
            import farm.worker  # noqa: F401
            import kernels  # noqa: F401

            self.kernels_s = time.perf_counter() - t

        def times(self):
            return self.imports_s, self.cuda_s, self.kernels_s

    actor = Probe.remote()
    mark("actor created (asynchronous)")
    imports_s, cuda_s, kernels_s = ray.get(actor.times.remote())
    print(f"actor: import torch {imports_s:.2f} s, CUDA context {cuda_s:.2f} s, kernels {kernels_s:.2f} s")
    mark("actor up")
    from db.engine import make_engine
    from db.schema import ensure_current

    with tempfile.TemporaryDirectory() as folder:
        ensure_current(make_engine(str(Path(folder) / "probe.db")), create=True)
    mark("database created and migrated")
    ray.shutdown()


if __name__ == "__main__":
    main()
