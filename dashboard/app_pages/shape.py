"""Shape: one problem, every config measured on it: the best of each variant, percent of peak, noise."""

import streamlit as st

from dashboard import cache, charts, frames, widgets
from db import queries

# fmt: off
BEST_COLUMNS = ["variant", "config_key", "ms", "ms_p20", "ms_p80", "eager_ms", "tflops", "pct_peak",
                "vs_best", "joules_per_launch", "avg_watts", "joules_per_tflop", "sm_clock_mhz", "throttled"]
ALL_COLUMNS = ["variant", "config_key", "ms", "ms_p20", "ms_p80", "vs_best", "stream_time", "host_time",
               "joules_per_launch", "avg_watts", "joules_per_tflop", "timing_regime", "tflops", "pct_peak",
               "tiles_per_sm", "waves", "sm_clock_mhz", "throttled", "throttle_reasons"]
# fmt: on
ENERGY = {"joules_per_launch": "mJ", "avg_watts": "W", "joules_per_tflop": "J/TFLOP"}
ENERGY_TITLES = {
    "joules_per_launch": "energy / launch", "avg_watts": "power", "joules_per_tflop": "energy / TFLOP",
}  # fmt: skip
# The best table's objective (db.queries.OBJECTIVES): what ranks each variant's best config, and why.
OBJECTIVE_LABELS = {"kernel": "kernel time", "eager": "eager call"}
OBJECTIVE_CAPTIONS = {
    "kernel": "Ranked by kernel time (ms): the launcher's GPU kernels alone, what a CUDA graph or "
    "torch.compile replays.",
    "eager": "Ranked by eager call (eager_ms, the longer of stream time and host time): what a caller "
    "without CUDA graphs waits for per call; variants with no host time are left out.",
}

st.title("Shape")
scope, shapes = widgets.scoped(queries.shape_options, what="ok rows", preset="smoke")
labels = frames.shape_label(shapes)
label = st.sidebar.selectbox("Shape (most measured first)", labels, key="shape_pick")
m, n, k = (int(x) for x in label.split("x"))
widgets.throttle_badge(**scope.filters, shape=(m, n, k))
widgets.regime_badge(**scope.filters, shape=(m, n, k))
peaks = cache.query(queries.gpu_peaks, gpu_name=scope.gpu)
rows = cache.query(queries.results, **scope.filters, m_range=(m, m), n_range=(n, n), k_range=(k, k))
details = cache.query(queries.measurement_details, ids=[int(i) for i in rows.id])
configs = frames.shape_configs(frames.with_trusted_energy(rows, details), peaks["peak_tflops"])
in_mj = lambda df: df.assign(joules_per_launch=df.joules_per_launch * 1e3)

peak = (
    f"{peaks['peak_tflops']:g} TFLOP/s dense bf16/fp16 peak" if peaks["peak_tflops"] else "no peak recorded"
)
top = configs.iloc[0]
st.caption(
    f"{label} in {scope.dtype} on {widgets.gpu_label(scope.gpu)}: {len(configs)} ok configs. Fastest: "
    f"{top.variant} {top.config_key}, {top.ms:.4g} ms, {top.tflops:.1f} TFLOP/s ({peak})."
)
st.subheader("Best config of each variant")
objective = st.radio(
    "Best by", queries.OBJECTIVES, format_func=OBJECTIVE_LABELS.get, horizontal=True, key="shape_objective"
)
winners = cache.query(queries.best_configs, **scope.filters, shape=(m, n, k), objective=objective)
st.caption(OBJECTIVE_CAPTIONS[objective])
best = frames.winners_of(configs, winners)
widgets.energy_table(in_mj(best[BEST_COLUMNS]), ENERGY, **ENERGY_TITLES)
st.altair_chart(charts.shape_configs(configs, label, scope.note))

sizes = cache.query(queries.shape_sizes, **scope.filters)
longform = frames.roofline_points(
    cache.query(queries.best_configs, **scope.filters), sizes, peaks["peak_tflops"]
)
roofs = frames.roof_lines(
    peaks["peak_tflops"], peaks["peak_gbps"], longform.intensity.min(), longform.intensity.max()
)
st.altair_chart(charts.roofline(longform, roofs, scope.note, highlight=label))
st.subheader("Every config, fastest first")
widgets.energy_table(in_mj(configs[ALL_COLUMNS]), ENERGY, **ENERGY_TITLES)
