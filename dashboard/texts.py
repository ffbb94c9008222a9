"""The words the pages share: what interpreter rows are, and what each timing regime means."""

from __future__ import annotations

from db.records import CUT_FACTOR, CUT_SUFFIX

INTERPRETER_NOTE = (
    "Rows from Triton's interpreter (TRITON_INTERPRET=1): their times are CPU times, not GPU timings. "
    "Tile and L2 ratios describe a nominal 132-SM GPU; the speedups say nothing about a real one."
)
NOT_GPU = "CPU times, not GPU timings"
INTERPRETER_LABEL = f"interpreter: {NOT_GPU}"  # the `timing` column of interpreter rows
GPU_LABEL = "GPU"
# The `timing` column of rows stored `implausible` (db.physics): their times are kept for inspection only.
IMPLAUSIBLE_LABEL = "implausible: not a time (error says why)"
# Where a point has no energy reading (NVML measures only on a GPU, and a short block may not tick).
NO_ENERGY = "no energy reading"

# What each timing regime means for the numbers a page shows (farm.measure; README "What a measurement is").
REGIMES = {
    "steady": "each config in its own steady state under the power limit, as do_bench and Triton's "
    "autotuner see it",
    "interleaved": "every config of a shape launched once per round, sharing one power-limiter state: "
    "where the limiter acts, ratios shrink (group_m 8 at 16384^3 on an H200: 1.01-1.05 against "
    "do_bench's 1.13-1.17)",
    "rest": "single launches, each after 1 s of idle GPU: boost clock, cold limiter",
}
# A regime stored with CUT_SUFFIX ("steady+cut") is a point the early cut stopped: same regime, fewer
# repetitions.
CUT = (
    f"cut early: its first samples read over {CUT_FACTOR:g}x the best time stored for its shape, so it "
    "stopped at the "
    "minimum repetitions with no energy reading; a slow point's time, not a tuned one "
    '(docs/design.md, "The early cut")'
)


def base_regime(regime: str) -> str:
    """The timing regime without the early cut's suffix: "steady+cut" -> "steady"."""
    return regime.removesuffix(CUT_SUFFIX)


def regime_words(regime: str) -> str:
    """What a stored regime means: REGIMES' words, and the early cut's where the regime carries it."""
    words = REGIMES.get(base_regime(regime), base_regime(regime))
    return f"{words}; {CUT}" if regime.endswith(CUT_SUFFIX) else words


# The help of every table's regime column.
REGIME_HELP = (
    "How the point was timed: steady (its own steady state under the power limit), interleaved (every "
    'config of a shape once per round), rest (single launches after 1 s idle). A "+cut" suffix: the '
    f"point read over {CUT_FACTOR:g}x its shape's best and stopped at the minimum repetitions "
    '(docs/design.md, "The early cut").'
)
