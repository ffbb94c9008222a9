"""Overview: what the database holds and how the last sweep ended."""

import streamlit as st

from dashboard import cache, charts, texts, widgets
from db import queries

st.title("Overview")
s = cache.query(queries.summary)
by_status = s["by_status"]
cols = st.columns(4)
cols[0].metric("measurements", f"{s['measurements']:,}")
cols[1].metric("ok", f"{by_status.get('ok', 0):,}")
cols[2].metric("sweeps", s["sweeps"])
cols[3].metric("GPUs", len(s["by_gpu"]))

if s["last_sweep"] is not None:
    widgets.sweep_alert(s["last_sweep"], prefix="Last sweep")

n_interp = s["by_backend"].get("interpreter", 0)
if n_interp:
    st.warning(
        f"{n_interp:,} of the rows come from Triton's interpreter. {texts.INTERPRETER_NOTE}",
        icon=":material/warning:",
    )

left, right = st.columns(2)
with left:
    st.subheader("By status")
    st.altair_chart(charts.count_bars(by_status, "status", "measurements by status"))
with right:
    st.subheader("By GPU")
    labels = {widgets.gpu_label(g): n for g, n in s["by_gpu"].items()}
    st.altair_chart(charts.count_bars(labels, "gpu", "measurements by GPU"))
