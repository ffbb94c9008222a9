"""Compare runs: two runs of a study (two sweeps kept side by side), every number run b over run a."""

import streamlit as st

from dashboard import cache, charts, frames, texts, widgets
from db import conclusions, queries

ANY = "any study"
# fmt: off
TABLE_COLUMNS = [
    "timing", "verdict", "ratio_b_over_a", "gpu_name", "variant", "dtype", "m", "n", "k", "config_key",
    "ms_a", "ms_p20_a", "ms_p80_a", "ms_b", "ms_p20_b", "ms_p80_b",
]
# fmt: on
RATIO = st.column_config.NumberColumn("time b / time a", format="%.4f", help="< 1: run b is faster")

st.title("Compare runs")
lead = widgets.lead()
sweeps = cache.query(queries.sweeps)
with_rows = set(cache.query(queries.sweep_gpus).sweep_id.astype(int))
runs = sweeps[sweeps.id.isin(with_rows)].sort_values("id", ascending=False)  # newest first
if len(runs) < 2:
    st.info(
        "Comparing needs two runs with ok rows; this database has fewer. "
        f"Another run of a study: {widgets.sweep_hint()} (or `farm sweep --repeat`)."
    )
    st.stop()
names = cache.query(conclusions.run_names)
study_of = dict(zip(runs.id, runs.name))
# The newest two runs that share a point; where none do, the two newest runs (the page then says so).
pair = cache.query(conclusions.newest_shared_pair) or (int(runs.id.iloc[1]), int(runs.id.iloc[0]))
studies = [name for name, n in runs.name.value_counts().sort_index().items() if n > 1]
default_study = study_of[pair[1]] if study_of[pair[0]] == study_of[pair[1]] else ANY
study = st.selectbox(
    "Study (runs of one sweep spec)",
    [ANY, *studies],
    index=[ANY, *studies].index(default_study),
    key="cmp_study",
)
ids = [int(i) for i in (runs.id if study == ANY else runs.id[runs.name == study])]
left, right = st.columns(2)
a = left.selectbox(
    "Run a (before)", ids, index=ids.index(pair[0]) if pair[0] in ids else min(1, len(ids) - 1),
    format_func=names.get, key="cmp_a",
)  # fmt: skip
b = right.selectbox(
    "Run b (after)",
    ids,
    index=ids.index(pair[1]) if pair[1] in ids else 0,
    format_func=names.get,
    key="cmp_b",
)
if a == b:
    lead.markdown(f"**{conclusions.compare_itself(a)}**")
    st.warning("Run a and run b are the same run: pick two runs.", icon=":material/compare_arrows:")
    st.stop()
cmp = cache.query(queries.compare_runs, run_a=a, run_b=b)
lead.markdown(f"**{conclusions.compare_sentence(cmp.summary)}**")
if study_of[a] != study_of[b]:
    st.caption(
        f"Runs of two studies ({study_of[a]!r}, {study_of[b]!r}): only the points both measured compare."
    )
points = frames.compare_points(cmp.points)
if points.empty:
    st.info("These runs share no ok point (same GPU model, variant, dtype, shape and config).")
    st.stop()

note = widgets.chart_note(*points.gpu_name.unique())
if note:
    st.warning(texts.INTERPRETER_NOTE, icon=":material/warning:")
s = cmp.summary
cols = st.columns(4)
cols[0].metric("points in both runs", f"{s['n_points']:,}")
cols[1].metric("within noise", f"{s['share_same']:.0%}", help="p20-p80 intervals overlap")
cols[2].metric("median time b / a", f"{s['median_ratio_b_over_a']:.4f}", help="< 1: run b is faster")
cols[3].metric("run b faster / slower", f"{s['n_faster']} / {s['n_slower']}")
cols = st.columns(2)
cols[0].metric(
    "split-K speedup, median b - a",
    "no pair" if s["n_splitk_shapes"] == 0 else f"{s['median_splitk_diff_b_minus_a']:+.3f}",
    help=f"over {s['n_splitk_shapes']} shapes with a split and an unsplit row in both runs",
)
cols[1].metric(
    "grouping gain, median b - a",
    "no pair" if s["n_grouping_pairs"] == 0 else f"{s['median_grouping_diff_b_minus_a']:+.3f}",
    help=f"over {s['n_grouping_pairs']} (config, GROUP_SIZE_M > 1) pairs in both runs",
)
st.caption(
    "Every ratio is run b's time over run a's: below 1, run b is faster. Same: the p20-p80 intervals "
    "overlap (run-to-run noise on an H200 is 2-3%)."
)
st.altair_chart(charts.compare_scatter(points, note))
st.subheader("Points that moved, run b's largest slowdown first")
moved = points[points.verdict != "same"].sort_values("ratio_b_over_a", ascending=False)
if moved.empty:
    st.caption("None: every point's p20-p80 intervals overlap.")
else:
    widgets.table(widgets.label_timings(moved)[TABLE_COLUMNS], ratio_b_over_a=RATIO, verdict="run b is")
