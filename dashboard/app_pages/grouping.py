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
scope, newest = widgets.scoped(
    queries.grouping_gain, what="grouped pairs (GROUP_SIZE_M > 1 and = 1, same config)", preset="grouping"
)
by_run = cache.query(conclusions.grouping_gain_by_run, **scope.filters)
lead.markdown(f"**{conclusions.grouping_said(by_run)}**")  # conclusions.grouping, from the rows held here
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
# One query of pairs feeds the chart, the heatmap and the table: the grouping_effect view's speedup is
# grouping_gain's time_gain, pair for pair.
if run == NEWEST:
    pairs = frames.grouping_pairs(newest)
    run_title = f"run: {NEWEST_LABEL}"
else:
    pairs = frames.grouping_pairs(by_run[by_run.sweep_id == run])
    run_title = f"run {runs.get(run, f'#{run}').split(': ', 1)[0]}"  # its id, start and name
gains = frames.grouping_gains(pairs)
l2 = f"the {by_run.l2_bytes.iloc[0] / 2**20:.0f} MiB L2" if len(by_run) else "L2"
st.caption(
    f"Grouped program order keeps a band of A's rows and B's columns in {l2} while neighbouring "
    f"programs reuse them: it can only pay once the operands (A + B + C) no longer fit in {l2}. "
    "Each mark: one shape at one GROUP_SIZE_M > 1, the median over its block configs of the gain against "
    "the same config at GROUP_SIZE_M = 1, in the run chosen above; gain = value at 1 / value at "
    "GROUP_SIZE_M, for kernel time (dots) and joules per launch (triangles); the vertical line spans its "
    f"configs' time gains, worst to best. Grey band: within {frames.NOISE:.0%} of 1, run-to-run noise on "
    "an H200. Every config's pair: the table below; every run's gains: the table by run."
)
widgets.throttle_badge(**scope.filters)
widgets.regime_badge(**scope.filters)
n_pairs, n_energy = len(pairs), int(pairs.energy_gain.notna().sum())
if not n_energy:
    st.info(
        "No grouped pair here has energy on both rows (NVML's energy counter, recorded from revision 0002 on "
        "and only on a GPU): the chart shows the time gain alone."
    )
elif n_energy < n_pairs:
    st.caption(f"Energy gain for {n_energy} of {n_pairs} pairs: only where both rows have an energy reading.")
st.altair_chart(charts.grouping_gains(gains, scope.note, run_title))
cells = frames.grouping_heatmap(pairs.assign(speedup=pairs.time_gain))
st.altair_chart(charts.grouping_heatmap(cells, scope.note, run_title))
st.subheader("Grouped pairs, largest time gain first")
st.caption(
    "Each row: one config at its GROUP_SIZE_M against the same config at 1, with each side's energy per "
    "launch, average power and joules per TFLOP (NVML; no energy reading on the interpreter or where the "
    "counter did not tick)."
)
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
