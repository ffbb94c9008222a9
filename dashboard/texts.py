"""The words the pages share: what interpreter rows are, and what each timing regime means."""

from __future__ import annotations

INTERPRETER_NOTE = (
    "Rows from Triton's interpreter (TRITON_INTERPRET=1): their times are CPU times, not GPU timings. "
    "Tile and L2 ratios describe a nominal 132-SM GPU; the speedups say nothing about a real one."
)
NOT_GPU = "CPU times, not GPU timings"
INTERPRETER_LABEL = f"interpreter: {NOT_GPU}"  # the `timing` column of interpreter rows
GPU_LABEL = "GPU"
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
