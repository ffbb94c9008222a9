"""Split-K: per shape, the best split against the best unsplit kernel, against tiles per SM, in kernel time
and in eager time per call."""

import streamlit as st

from dashboard import cache, frames, splitk_charts, widgets
from db import conclusions, queries

# The why first: the verdict in kernel time and per eager call, then what explains it (tiles per SM,
# waves and occupancy of the unsplit grid: waves = tiles per SM / occupancy; the best SPLIT_K and its
# programs per SM), stream-K's answer, throttling; then the times, configs and energy behind it.
# fmt: off
BEST_COLUMNS = [
    "shape", "verdict", "speedup", "eager_speedup", "tiles_per_sm", "waves", "occupancy", "split_split_k",
    "split_programs_per_sm", "streamk_speedup", "throttled", "speedup_lo", "speedup_hi", "unsplit_ms",
    "split_ms", "streamk_ms", "unsplit_config", "split_config", "streamk_config", "unsplit_eager_config",
    "split_eager_config", "unsplit_joules_per_launch", "split_joules_per_launch", "unsplit_avg_watts",
    "split_avg_watts", "unsplit_joules_per_tflop", "split_joules_per_tflop",
]
# fmt: on
ENERGY = {
    "unsplit_joules_per_launch": "J",
    "split_joules_per_launch": "J",
    "unsplit_avg_watts": "W",
    "split_avg_watts": "W",
    "unsplit_joules_per_tflop": "J/TFLOP",
    "split_joules_per_tflop": "J/TFLOP",
}  # fmt: skip

st.title("Split-K")
lead = widgets.lead()
st.caption(
    "Below one output tile per SM, the unsplit grid leaves SMs idle and splitting K gives them work; "
    "above it, split-K only adds the partial-sum traffic. Speedup = the fastest unsplit kernel "
    "(SPLIT_K = 1, any blocks and variant but cuBLAS and stream-K) over the fastest split one "
    "(SPLIT_K > 1, any blocks): what a shape gains by splitting. One dot per shape, at the tiles per SM "
    "of its fastest unsplit grid, its area the problem's work (2MNK), the largest named; faint dots: each "
    "block shape against its own unsplit time."
)
scope, best = widgets.scoped(
    queries.splitk_best, what="split-K or stream-K rows next to unsplit ones", preset="splitk"
)
lead.markdown(f"**{conclusions.splitk_said(best)}**")  # conclusions.splitk, from the rows held here
widgets.throttle_badge(**scope.filters)
widgets.regime_badge(**scope.filters)
ids = [int(i) for i in (*best.unsplit_id.dropna(), *best.split_id.dropna())]
table = frames.with_launch_geometry(
    frames.splitk_table(
        best,
        cache.query(queries.splitk_eager, **scope.filters),
        cache.query(queries.measurement_details, ids=ids),
    ),
    cache.query(conclusions.launch_geometry, ids=ids),
)
blocks = frames.splitk_blocks(cache.query(queries.splitk_speedup, **scope.filters))
st.caption(
    "Dots: kernel time (the launcher's GPU kernels, what CUDA graphs see). Diamonds: eager time per call, "
    "max(stream time, host time), what a caller without CUDA graphs waits for: split-K's extra zero and "
    "reduce launches cost host time that kernel time leaves out. Each side's best config by that time."
)
if table.eager_speedup.isna().all():
    st.info(
        "No shape here has host times on both sides (rows stored before revision 0002 have none): "
        "the chart shows kernel-time speedups alone."
    )
widgets.picked_shape(
    st.altair_chart(
        splitk_charts.speedup_scatter(table, blocks, scope.note, pick=True),
        on_select="rerun",
        key="splitk_pick",
    )
)
st.caption("Click a dot to open its shape.")
st.subheader("Best split against best unsplit, per shape")
st.caption(
    'speedup_lo..speedup_hi: the speedup from both p20-p80 ranges; "within noise" where it holds 1. '
    "eager_speedup: the same question in eager time per call (configs: the eager caller's picks). "
    "Energy per launch, average power and joules per TFLOP of the kernel-time winners, as NVML measured "
    "them. Stream-K beside it where measured (streamk_speedup = best unsplit / best stream-K)."
)
shown = table.sort_values("speedup", ascending=False)
widgets.energy_table(
    shown[BEST_COLUMNS],
    ENERGY,
    speedup=st.column_config.NumberColumn("speedup", format="%.3g"),
    eager_speedup=st.column_config.NumberColumn("eager speedup", format="%.3g"),
    tiles_per_sm=st.column_config.NumberColumn("tiles / SM", format="%.3g"),
    waves=st.column_config.NumberColumn("waves", format="%.3g"),
    occupancy=st.column_config.NumberColumn("occupancy", format="%.3g", help="programs resident per SM"),
    split_split_k=st.column_config.NumberColumn("best SPLIT_K", format="%d"),
    split_programs_per_sm=st.column_config.NumberColumn("its programs / SM", format="%.3g"),
    streamk_speedup=st.column_config.NumberColumn("stream-K speedup", format="%.3g"),
    unsplit_joules_per_launch="unsplit energy",
    split_joules_per_launch="split energy",
    unsplit_avg_watts="unsplit power",
    split_avg_watts="split power",
    unsplit_joules_per_tflop="unsplit energy / TFLOP",
    split_joules_per_tflop="split energy / TFLOP",
)

shape = st.selectbox("Speedup against SPLIT_K for the shape", shown["shape"].tolist(), key="splitk_shape")
st.page_link("app_pages/shape.py", label=f"Every config of {shape}", query_params={"shape": shape})
row = shown[shown["shape"] == shape].iloc[0]
curve = frames.splitk_curve_band(
    cache.query(queries.splitk_curve, **scope.filters, m=int(row.m), n=int(row.n), k=int(row.k))
)
st.altair_chart(splitk_charts.speedup_curve(curve, shape, row.streamk_speedup, scope.note))
