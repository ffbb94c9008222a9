"""Grouping / L2: what GROUP_SIZE_M > 1 buys, in time and in energy, as the operands outgrow L2."""

import streamlit as st

from dashboard import cache, charts, frames, widgets
from db import conclusions, queries

# fmt: off
PAIR_COLUMNS = [
    "shape", "config", "group_m", "time_gain", "energy_gain", "operand_to_l2", "ms", "ms_group1",
    "joules_per_launch", "joules_group1", "avg_watts", "avg_watts_group1", "joules_per_tflop",
    "joules_per_tflop_group1", "timing_regime",
]
# fmt: on
ENERGY = {
    "joules_per_launch": "J",
    "joules_group1": "J",
    "avg_watts": "W",
    "avg_watts_group1": "W",
    "joules_per_tflop": "J/TFLOP",
    "joules_per_tflop_group1": "J/TFLOP",
}  # fmt: skip
GAIN = st.column_config.NumberColumn(format="%.3f")
PAIR_TITLES = {
    "time_gain": GAIN, "energy_gain": GAIN, "group_m": "GROUP_SIZE_M", "operand_to_l2": "operands / L2",
    "joules_per_launch": "energy / launch", "joules_group1": "energy at 1", "avg_watts": "power",
    "avg_watts_group1": "power at 1", "joules_per_tflop": "energy / TFLOP",
    "joules_per_tflop_group1": "energy / TFLOP at 1",
}  # fmt: skip

NEWEST = 0  # not a sweep id: sweeps count from 1
NEWEST_LABEL = "each point's newest"

st.title("Grouping / L2")
lead = widgets.lead()
scope, effect = widgets.scoped(
    queries.grouping_effect, what="grouped pairs (GROUP_SIZE_M > 1 and = 1, same config)", preset="grouping"
)
widgets.conclude(lead, conclusions.grouping, **scope.filters)
by_run = cache.query(conclusions.grouping_gain_by_run, **scope.filters)
runs = cache.query(conclusions.run_names)
# The run the charts and the pairs table draw: each point's newest run (the rows every other page
# shows), or any one run with grouped pairs, newest first (a --repeat keeps both runs' rows).
run_ids = sorted({int(i) for i in by_run.sweep_id}, reverse=True)
run = st.selectbox(
    "Run drawn",
    [NEWEST, *run_ids],
    format_func=lambda i: NEWEST_LABEL if i == NEWEST else runs.get(i, f"#{i}"),
    key="grouping_run",
)
if run == NEWEST:
    gains = frames.grouping_gains(cache.query(queries.grouping_gain, **scope.filters))
    points = frames.grouping_points(effect)
    run_title = f"run: {NEWEST_LABEL}"
else:
    of_run = by_run[by_run.sweep_id == run]
    gains = frames.grouping_gains(of_run)
    points = frames.grouping_points(of_run.assign(speedup=of_run.time_gain))
    run_title = f"run {runs.get(run, f'#{run}').split(': ', 1)[0]}"  # its id, start and name
l2 = f"the {by_run.l2_bytes.iloc[0] / 2**20:.0f} MiB L2" if len(by_run) else "L2"
st.caption(
    f"Grouped program order keeps a band of A's rows and B's columns in {l2} while neighbouring "
    f"programs reuse them: it can only pay once the operands (A + B + C) no longer fit in {l2}. "
    "Each mark: one (config, GROUP_SIZE_M > 1) against the same config at GROUP_SIZE_M = 1, in the run "
    "chosen above; gain = value at 1 / value at GROUP_SIZE_M, for kernel time (dots) and joules per "
    f"launch (triangles). Grey band: within {frames.NOISE:.0%} of 1, run-to-run noise on an H200. "
    "Every run's gains: the table by run below."
)
widgets.throttle_badge(**scope.filters)
widgets.regime_badge(**scope.filters)
n_pairs, n_energy = int((gains.measure == "time").sum()), int((gains.measure == "energy").sum())
if not n_energy:
    st.info(
        "No grouped pair here has energy on both rows (NVML's energy counter, recorded from revision 0002 on "
        "and only on a GPU): the chart shows the time gain alone."
    )
elif n_energy < n_pairs:
    st.caption(f"Energy gain for {n_energy} of {n_pairs} pairs: only where both rows have an energy reading.")
st.altair_chart(charts.grouping_gains(gains, scope.note, run_title))
st.altair_chart(charts.grouping_heatmap(frames.grouping_heatmap(points), scope.note, run_title))
st.subheader("Grouped pairs, largest time gain first")
st.caption(
    "Each row: one config at its GROUP_SIZE_M against the same config at 1, with each side's energy per "
    "launch, average power and joules per TFLOP (NVML; no energy reading on the interpreter or where the "
    "counter did not tick)."
)
pairs = frames.grouping_pairs(gains)
widgets.energy_table(pairs[PAIR_COLUMNS], ENERGY, **PAIR_TITLES)

st.subheader("Best time gain of every run, per shape")
st.caption(
    "Each run's own rows (a --repeat keeps both): the largest time gain over its (config, GROUP_SIZE_M > 1) "
    "pairs, and their median. Two runs that differ here by more than noise measured two clock states."
)
per_run = frames.grouping_by_run(by_run, runs)
widgets.table(
    per_run,
    best_gain=st.column_config.NumberColumn("best time gain", format="%.3f"),
    median_gain=st.column_config.NumberColumn("median time gain", format="%.3f"),
    operand_to_l2=st.column_config.NumberColumn("operands / L2", format="%.3g"),
)
