"""Compare runs: two runs of a study (two sweeps kept side by side), every number run b over run a, judged
as `farm compare` judges them (db.queries.compare through compare_runs: one judgement, not two)."""

import math

import streamlit as st

from dashboard import cache, charts, frames, texts, widgets
from db import conclusions, queries

ANY = "any study"
# fmt: off
TABLE_COLUMNS = [
    "timing", "judgement", "verdict", "ratio_b_over_a", "gpu_name", "variant", "dtype", "m", "n", "k",
    "config_key", "ms_a", "ms_p20_a", "ms_p80_a", "ms_b", "ms_p20_b", "ms_p80_b", "sm_clock_mhz_a",
    "sm_clock_mhz_b", "reason",
]
SHAPE_COLUMNS = [
    "judgement", "ratio_b_over_a", "gpu_name", "dtype", "m", "n", "k", "variant_a", "config_key_a",
    "variant_b", "config_key_b", "winner_changed", "ms_a", "ms_b", "sm_clock_mhz_a", "sm_clock_mhz_b",
    "reason",
]
# fmt: on
# Points the chart draws at most: every point of the 100,000-row benchmark's pair (4,629, three marks
# each) took the page to 2.4 s in the browser; past this many it draws the points the gate flagged
# (regressed, not judged, improved) farthest from 1 either way, and the table lists them all.
DRAWN = 500
RATIO = st.column_config.NumberColumn("time b / time a", format="%.4f", help="< 1: run b is faster")

st.title("Compare runs")
lead = widgets.lead()
sweeps = cache.query(queries.sweeps)
gpus = cache.query(queries.sweep_gpus)
with_rows = set(gpus.sweep_id.astype(int))
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
run_gpus = {int(i): tuple(g.gpu_name) for i, g in gpus.groupby("sweep_id")}
pair = cache.query(queries.newest_shared_pair, gpus=run_gpus) or (int(runs.id.iloc[1]), int(runs.id.iloc[0]))
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
judged = cmp.judgement
lead.markdown(f"**{conclusions.compare_sentence(cmp.summary)}**")
if study_of[a] != study_of[b]:
    st.caption(
        f"Runs of two studies ({study_of[a]!r}, {study_of[b]!r}): only the points both measured compare."
    )
if cmp.points.empty:
    st.info("These runs share no ok point (same GPU model, variant, dtype, shape and config).")
    st.stop()
# a regression is the page's finding, not its failure: a warning (an error box means the page broke)
(st.warning if judged.failed else st.success)(
    f"`farm compare --runs {a} {b}`: {judged.verdict()}", icon=":material/rule:"
)
key = list(queries.RUN_POINT)
verdicts = cmp.points[[*key, "verdict"]]
points = frames.compare_points(judged.points.merge(verdicts, on=key))  # worst first, as judged

note = widgets.chart_note(*points.gpu_name.unique())
if note:
    st.warning(texts.INTERPRETER_NOTE, icon=":material/warning:")
s, j = cmp.summary, judged.summary
cols = st.columns(4)
cols[0].metric("points in both runs", f"{s['n_points']:,}")
cols[1].metric("within noise", f"{s['share_same']:.0%}", help="p20-p80 intervals overlap")
cols[2].metric("median time b / a", f"{s['median_ratio_b_over_a']:.4f}", help="< 1: run b is faster")
cols[3].metric("run b faster / slower", f"{s['n_faster']} / {s['n_slower']}")
cols = st.columns(4)
cols[0].metric(
    "regressed / improved",
    f"{j['n_regressed']} / {j['n_improved']}",
    help=f"judged points beyond both p20-p80 and {j['threshold']:.0%}",
)
cols[1].metric(
    "not judged",
    f"{j['n_not_judged']:,}",
    help=f"power-capped on a side, SM clocks over {j['clock_match']:.0%} apart: the limiter set the time",
)
cols[2].metric("shape bests regressed", f"{j['n_shapes_regressed']} of {j['n_shapes_judged']} judged")
cols[3].metric("shapes whose best config changed", f"{j['n_winners_changed']} of {j['n_shapes']}")
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
flagged = points[points.judgement != queries.compare.SAME]
farthest = flagged.ratio_b_over_a.map(math.log).abs().nlargest(DRAWN).index
drawn = points if len(points) <= DRAWN else flagged.loc[farthest]
shown = (
    "every point" if len(drawn) == len(points) else f"the {len(drawn):,} flagged farthest from 1 either way"
)
st.caption(
    f"Every ratio is run b's time over run a's: below 1, run b is faster. Same: the p20-p80 intervals "
    f"overlap, or b / a is within {j['threshold']:.0%} (the instrument's median repeat difference is 0.8%, "
    f"its 90th percentile 6.8%). Drawn: {shown}."
)
st.altair_chart(charts.compare_scatter(drawn, note))
st.subheader("Points the gate flagged, run b's largest slowdown first")
if flagged.empty:
    st.caption("None: every point is the same within noise and threshold.")
else:
    widgets.table(widgets.label_timings(flagged)[TABLE_COLUMNS], ratio_b_over_a=RATIO, verdict="run b is")
st.subheader("Each shape's best config in each run, worst first")
widgets.table(judged.shapes[SHAPE_COLUMNS], ratio_b_over_a=RATIO)
