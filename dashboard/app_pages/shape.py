"""Shape: one problem, every config measured on it: the best of each variant, percent of peak, noise."""

import streamlit as st

from dashboard import cache, charts, frames, widgets
from db import conclusions, queries

# fmt: off
BEST_COLUMNS = ["variant", "config_key", "ms", "ms_p20", "ms_p80", "eager_ms", "tflops", "pct_peak",
                "vs_best", "joules_per_launch", "avg_watts", "joules_per_tflop", "sm_clock_mhz", "throttled"]
ALL_COLUMNS = ["variant", "config_key", "ms", "ms_p20", "ms_p80", "vs_best", "stream_ms", "host_ms",
               "joules_per_launch", "avg_watts", "joules_per_tflop", "timing_regime", "tflops", "pct_peak",
               "tiles_per_sm", "waves", "sm_clock_mhz", "throttled", "throttle_reasons"]
# fmt: on
ENERGY = {
    "joules_per_launch": "J",
    "avg_watts": "W",
    "joules_per_tflop": "J/TFLOP",
}  # fmt: skip
ENERGY_TITLES = {
    "joules_per_launch": "energy / launch", "avg_watts": "power", "joules_per_tflop": "energy / TFLOP",
}  # fmt: skip
# The best table's objective (db.queries.OBJECTIVES): what ranks each variant's best config, and why.
OBJECTIVE_LABELS = {"kernel": "kernel time", "eager": "eager call"}
OBJECTIVE_CAPTIONS = {
    "kernel": "Ranked by kernel time (kernel us): the launcher's GPU kernels alone, what a CUDA graph or "
    "torch.compile replays.",
    "eager": "Ranked by eager call (eager us, the longer of stream time and host time): what a caller "
    "without CUDA graphs waits for per call; variants with no host time are left out.",
}

st.title("Shape")
lead = widgets.lead()
scope, shapes = widgets.scoped(queries.shape_options, what="ok rows", preset="smoke")
labels = frames.shape_label(shapes)
# ?shape=MxNxK (a chart's pick on another page, or a shared link) chooses the shape once; the picker
# then writes its choice back, so the address always names the shape shown.
asked = st.query_params.get("shape")
if asked in labels and asked != st.session_state.get("shape_asked"):
    st.session_state["shape_pick"] = asked
    st.session_state["shape_asked"] = asked
label = st.sidebar.selectbox("Shape (most measured first)", labels, key="shape_pick")
st.query_params["shape"] = label
m, n, k = (int(x) for x in label.split("x"))
widgets.conclude(lead, conclusions.shape, **scope.filters, shape=(m, n, k))
widgets.throttle_badge(**scope.filters, shape=(m, n, k))
widgets.regime_badge(**scope.filters, shape=(m, n, k))
peaks = cache.query(queries.gpu_peaks, gpu_name=scope.gpu)
rows = cache.query(queries.results, **scope.filters, m_range=(m, m), n_range=(n, n), k_range=(k, k))
details = cache.query(queries.measurement_details, ids=[int(i) for i in rows.id])
configs = frames.shape_configs(frames.with_trusted_energy(rows, details), peaks["peak_tflops"])

peak = (
    f"{peaks['peak_tflops']:g} TFLOP/s dense bf16/fp16 peak" if peaks["peak_tflops"] else "no peak recorded"
)
top = configs.iloc[0]
st.caption(
    f"{label} in {scope.dtype} on {widgets.gpu_label(scope.gpu)}: {len(configs)} ok configs. Fastest: "
    f"{top.variant} {top.config_key}, {frames.readable_time(top.ms)}, {top.tflops:.1f} TFLOP/s ({peak})."
)
st.subheader("Best config of each variant")
objective = st.radio(
    "Best by", queries.OBJECTIVES, format_func=OBJECTIVE_LABELS.get, horizontal=True, key="shape_objective"
)
winners = cache.query(queries.best_configs, **scope.filters, shape=(m, n, k), objective=objective)
st.caption(OBJECTIVE_CAPTIONS[objective])
best = frames.winners_of(configs, winners)
widgets.energy_table(best[BEST_COLUMNS], ENERGY, **ENERGY_TITLES)
st.altair_chart(charts.shape_configs(configs, label, scope.note))

sizes = cache.query(queries.shape_sizes, **scope.filters)
longform = frames.roofline_points(
    cache.query(queries.best_configs, **scope.filters), sizes, peaks["peak_tflops"]
)
roofs = frames.roof_lines(
    peaks["peak_tflops"], peaks["peak_gbps"], longform.intensity.min(), longform.intensity.max()
)
widgets.picked_shape(
    st.altair_chart(
        charts.roofline(longform, roofs, scope.note, highlight=label, pick=True),
        on_select="rerun",
        key="shape_roof",
    )
)
st.subheader("Every config, fastest first")
widgets.energy_table(configs[ALL_COLUMNS], ENERGY, **ENERGY_TITLES)
