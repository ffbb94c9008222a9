"""A sweep's options (the command line's, or a caller's), and starting the sweep's Ray and workers from
them. No database module is imported here: `farm sweep` launches the workers first and imports the
driver while they come up (cli/sweep.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from farm import cluster
from farm.errors import UserError

BACKENDS = ("auto", "cuda", "interpreter")


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
    repeat: bool = False  # measure every point again as a new run (db: every sweep's rows are kept)
    progress: bool = True
    keep_workers: bool = False  # the workers outlive the sweep (cluster.py: kept workers)
    wait_s: float | None = None  # how long to wait for GPUs other jobs hold; None: as long as it takes
    search: str = "grid"  # farm/source.py: the whole grid, or a strategy of farm.search within a budget
    budget: str = "10%"  # a search's points per (dtype, shape): a share of its candidates or a count
    train: list[str] = field(default_factory=list)  # more databases the model strategy learns from

    def __post_init__(self) -> None:
        problem = check_options(self)
        if problem:
            raise UserError(problem)

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


def check_options(o: SweepOptions) -> str | None:
    """What is wrong with the options, in the command line's words, or None. Checked before Ray or the
    database is touched: a compile pool of 0 threads killed every worker at start-up (ActorDiedError),
    and a point timeout of 0 or less ended every point `timeout` without running it."""

    def positive(value, flag: str, *, integer: bool) -> str | None:
        if integer and (not isinstance(value, int) or isinstance(value, bool)):
            return f"{flag} must be a whole number, not {value!r}"
        if not integer and not isinstance(value, (int, float)):
            return f"{flag} must be a number of seconds, not {value!r}"
        if not math.isfinite(value) or value <= 0:
            least = "at least 1" if integer else "more than 0 seconds"
            return f"{flag} must be {least}, not {value:g}"
        return None

    checks = [
        positive(o.compile_threads, "--compile-threads", integer=True),
        positive(o.point_timeout_s, "--point-timeout", integer=False),
        positive(o.inflight_per_worker, "inflight_per_worker", integer=True),
    ]
    if o.workers is not None:
        checks.append(positive(o.workers, "--workers", integer=True))
    if o.wait_s is not None:
        checks.append(positive(o.wait_s, "--wait-s", integer=False))
    if not isinstance(o.max_restarts, int) or o.max_restarts < 0:
        checks.append(f"max_restarts must be 0 or more, not {o.max_restarts!r}")
    if o.backend not in BACKENDS:
        checks.append(f"--backend must be one of {', '.join(BACKENDS)}, not {o.backend!r}")
    if not o.db:
        checks.append("--db must name a database (a SQLite path or an SQLAlchemy URL)")
    checks.append(check_search(o))
    return next((c for c in checks if c), None)


def check_search(o: SweepOptions) -> str | None:
    """--search, --budget and --train in the command line's words (farm.search reads them)."""
    from farm.search import STRATEGIES, parse_budget

    if o.search not in STRATEGIES:
        return f"--search must be one of {', '.join(STRATEGIES)}, not {o.search!r}"
    try:
        parse_budget(o.budget)
    except ValueError as exc:
        return f"--budget: {exc}"
    if o.train and o.search != "model":
        return "--train gives the model strategy more to learn from: use it with --search model"
    return None
