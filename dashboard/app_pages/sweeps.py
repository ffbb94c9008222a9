"""Sweeps and environments: what ran where, and how each sweep ended."""

import streamlit as st

from dashboard import cache, frames, widgets
from db import queries

# fmt: off
SWEEP_COLUMNS = [
    "id", "name", "status", "timing_regime", "started_at", "finished_at", "n_points", "n_ok", "n_failed",
    "n_measurements", "host", "command",
]
# fmt: on

st.title("Sweeps and environments")
sweeps = cache.query(queries.sweeps)
sweeps["timing_regime"] = sweeps.spec.map(frames.sweep_timing)  # how its points were timed
for sweep in sweeps.to_dict("records"):
    widgets.sweep_alert(sweep, quiet_if_finished=True)
st.subheader("Sweeps")
st.dataframe(sweeps[SWEEP_COLUMNS], hide_index=True)
st.subheader("Environments")
envs = frames.readable_environments(widgets.label_timings(cache.query(queries.environments)))
st.dataframe(
    envs.drop(columns=["fingerprint"]),
    hide_index=True,
    column_config={
        "peak_tflops": st.column_config.NumberColumn("peak", format="%g TFLOP/s"),
        "peak_gbps": st.column_config.NumberColumn("bandwidth", format="%g GB/s"),
    },
)
