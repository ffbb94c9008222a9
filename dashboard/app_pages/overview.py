"""Overview: what the database holds, how the last sweep ended, and where each question is answered."""

import streamlit as st

from dashboard import cache, charts, navigation, texts, widgets
from db import conclusions, queries

st.title("Overview")
widgets.conclude(widgets.lead(), conclusions.overview)
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

st.subheader("Why a schedule wins")
links = st.columns(len(navigation.NAV["Why a schedule wins"]))
for col, (name, title, icon) in zip(links, navigation.NAV["Why a schedule wins"]):
    col.page_link(f"app_pages/{name}.py", label=title, icon=f":material/{icon}:")

left, right = st.columns(2)
with left:
    st.subheader("By status")
    st.altair_chart(charts.count_bars(by_status, "status", "measurements by status"))
    st.page_link("app_pages/explorer.py", label="Every row, filtered: Explorer", icon=":material/table_view:")
with right:
    st.subheader("By GPU")
    labels = {widgets.gpu_label(g): n for g, n in s["by_gpu"].items()}
    st.altair_chart(charts.count_bars(labels, "gpu", "measurements by GPU"))
    st.page_link("app_pages/sweeps.py", label="Every run: Sweeps and environments", icon=":material/history:")
