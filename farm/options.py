"""A sweep's options (the command line's, or a caller's), and starting the sweep's Ray and workers from
them. No database module is imported here: `farm sweep` launches the workers first and imports the
driver while they come up (cli/sweep.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from farm import cluster


@dataclass
class SweepOptions:
    db: str
    plugins: list[str] = field(default_factory=list)
    address: str | None = None
    backend: str = "auto"
    workers: int | None = None  # local run without a GPU: number of logical GPUs (workers)
    point_timeout_s: float = 60.0  # the floor of every deadline
    compile_threads: int = 8
    inflight_per_worker: int = cluster.INFLIGHT_PER_WORKER
    max_restarts: int = cluster.MAX_RESTARTS
    retry_failed: bool = False
    progress: bool = True
    keep_workers: bool = False  # the workers outlive the sweep (cluster.py: kept workers)

    def launch(self, plugin_sources: list) -> cluster.Launched:
        """Join or start Ray and create the workers these options ask for (`cluster.launch`)."""
        return cluster.launch(
            self.address,
            self.workers,
            plugin_sources,
            backend=self.backend,
            compile_threads=self.compile_threads,
            max_restarts=self.max_restarts,
            inflight_per_worker=self.inflight_per_worker,
            keep_workers=self.keep_workers,
        )
