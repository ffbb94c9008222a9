"""Grouping / L2: what GROUP_SIZE_M > 1 buys, in time and in energy, as the operands outgrow L2."""

import streamlit as st

from dashboard import cache, charts, frames, widgets
from db import queries

# fmt: off
PAIR_COLUMNS = [
    "shape", "config", "group_m", "time_gain", "energy_gain", "operand_to_l2", "ms", "ms_group1",
    "joules_per_launch", "joules_group1", "avg_watts", "avg_watts_group1", "joules_per_tflop",
    "joules_per_tflop_group1", "timing_regime",
]
# fmt: on
ENERGY = {
    "joules_per_launch": "mJ",
    "joules_group1": "mJ",
    "avg_watts": "W",
    "avg_watts_group1": "W",
    "joules_per_tflop": "J/TFLOP",
    "joules_per_tflop_group1": "J/TFLOP",
}  # fmt: skip
GAIN = st.column_config.NumberColumn(format="%.3f")
PAIR_TITLES = {
    "time_gain": GAIN, "energy_gain": GAIN, "group_m": "GROUP_SIZE_M", "operand_to_l2": "operands / L2",
    "ms_group1": "ms at 1",
    "joules_per_launch": "energy / launch", "joules_group1": "energy at 1", "avg_watts": "power",
    "avg_watts_group1": "power at 1", "joules_per_tflop": "energy / TFLOP",
    "joules_per_tflop_group1": "energy / TFLOP at 1",
}  # fmt: skip

st.title("Grouping / L2")
st.caption(
    "Grouped program order keeps a band of A's rows and B's columns in L2 while neighbouring "
    "programs reuse them: it can only pay once the operands (A + B + C) no longer fit in L2. "
    "Each mark: one config, its best GROUP_SIZE_M > 1 against GROUP_SIZE_M = 1 with all else equal; "
    "gain = value at 1 / value at GROUP_SIZE_M, for kernel time (dots) and joules per launch (triangles). "
    f"Grey band: within {frames.NOISE:.0%} of 1, run-to-run noise on an H200."
)
scope, effect = widgets.scoped(
    queries.grouping_effect, what="grouped pairs (GROUP_SIZE_M > 1 and = 1, same config)", preset="grouping"
)
widgets.throttle_badge(**scope.filters)
widgets.regime_badge(**scope.filters)
gains = frames.grouping_gains(cache.query(queries.grouping_gain, **scope.filters))
n_pairs, n_energy = int((gains.measure == "time").sum()), int((gains.measure == "energy").sum())
if not n_energy:
    st.info(
        "No grouped pair here has energy on both rows (NVML's energy counter, recorded from revision 0002 on "
        "and only on a GPU): the chart shows the time gain alone."
    )
elif n_energy < n_pairs:
    st.caption(f"Energy gain for {n_energy} of {n_pairs} pairs: only where both rows have an energy reading.")
st.altair_chart(charts.grouping_gains(gains, scope.note))
st.altair_chart(charts.grouping_heatmap(frames.grouping_heatmap(frames.grouping_points(effect)), scope.note))
st.subheader("Grouped pairs, largest time gain first")
st.caption(
    "Each row: one config at its GROUP_SIZE_M against the same config at 1, with each side's energy per "
    "launch, average power and joules per TFLOP (NVML; no energy reading on the interpreter or where the "
    "counter did not tick)."
)
pairs = frames.grouping_pairs(gains)
widgets.energy_table(pairs[PAIR_COLUMNS], ENERGY, **PAIR_TITLES)
