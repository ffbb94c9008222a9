"""Sweeps and environments: what ran where, and how each sweep ended."""

import streamlit as st

from dashboard import cache, frames, widgets
from db import conclusions, queries

# fmt: off
SWEEP_COLUMNS = [
    "run", "name", "status", "timing_regime", "started_at", "finished_at", "n_points", "n_ok", "n_failed",
    "n_measurements", "host", "command",
]
# fmt: on

st.title("Sweeps and environments")
widgets.conclude(widgets.lead(), conclusions.sweeps_verdict)
sweeps = cache.query(queries.sweeps)
names = cache.query(conclusions.run_names)
sweeps["run"] = sweeps.id.map(names)
sweeps["timing_regime"] = sweeps.spec.map(frames.sweep_timing)  # how its points were timed
for sweep in sweeps.to_dict("records"):
    widgets.sweep_alert(sweep, quiet_if_finished=True)
st.subheader("Sweeps")
widgets.table(sweeps[SWEEP_COLUMNS])
st.subheader("Environments")
envs = frames.readable_environments(widgets.label_timings(cache.query(queries.environments)))
widgets.table(
    envs.drop(columns=["fingerprint"]),
    peak_tflops=st.column_config.NumberColumn("peak", format="%g TFLOP/s"),
    peak_gbps=st.column_config.NumberColumn("bandwidth", format="%g GB/s"),
)
