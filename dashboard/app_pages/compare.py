"""Compare sweeps: per point, is sweep b faster, slower or the same as sweep a (p20-p80 intervals)?"""

import streamlit as st

from dashboard import cache, charts, frames, texts, widgets
from db import queries

# fmt: off
TABLE_COLUMNS = [
    "timing", "verdict", "ratio", "gpu_name", "variant", "dtype", "m", "n", "k", "config_key",
    "ms_a", "ms_p20_a", "ms_p80_a", "ms_b", "ms_p20_b", "ms_p80_b",
]
# fmt: on

st.title("Compare runs")
sweeps = cache.query(queries.sweeps)
pair = cache.query(queries.default_comparison)
if pair is None:
    st.info(
        "Comparing needs two sweeps with ok rows; this database has fewer. "
        f"Run another: {widgets.sweep_hint()}."
    )
    st.stop()

ids = sweeps.id.tolist()
names = dict(zip(sweeps.id, sweeps.name))
label = lambda i: f"#{i} {names[i]}"
left, right = st.columns(2)
a = left.selectbox("Sweep a (before)", ids, index=ids.index(pair[0]), format_func=label, key="cmp_a")
b = right.selectbox("Sweep b (after)", ids, index=ids.index(pair[1]), format_func=label, key="cmp_b")
cmp = frames.compare_points(cache.query(queries.compare_sweeps, sweep_a=a, sweep_b=b))
if cmp.empty:
    st.info("These sweeps share no ok point (same GPU model, variant, dtype, shape and config).")
    st.stop()

note = widgets.chart_note(*cmp.gpu_name.unique())
if note:
    st.warning(texts.INTERPRETER_NOTE, icon=":material/warning:")
counts = cmp.verdict.value_counts()
cols = st.columns(3)
for col, verdict in zip(cols, ("faster", "slower", "same")):
    col.metric(f"b {verdict}", int(counts.get(verdict, 0)))
st.caption("Same: the p20-p80 intervals overlap (run-to-run noise on an H200 is 2-3%).")
st.altair_chart(charts.compare_scatter(cmp, note))
st.subheader("Points that moved, largest slowdown first")
moved = cmp[cmp.verdict != "same"].sort_values("ratio")
if moved.empty:
    st.caption("None: every point's p20-p80 intervals overlap.")
else:
    st.dataframe(widgets.label_timings(moved)[TABLE_COLUMNS], hide_index=True)
