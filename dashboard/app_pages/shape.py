"""Shape: one problem, every config measured on it: the best of each variant, percent of peak, noise."""

import streamlit as st

from dashboard import cache, charts, frames, widgets
from db import queries

# fmt: off
BEST_COLUMNS = ["variant", "config_key", "ms", "ms_p20", "ms_p80", "tflops", "pct_peak", "vs_best",
                "sm_clock_mhz", "throttled"]
ALL_COLUMNS = ["variant", "config_key", "ms", "ms_p20", "ms_p80", "vs_best", "stream_time", "host_time",
               "energy", "power", "timing_regime", "tflops", "pct_peak", "tiles_per_sm", "waves",
               "sm_clock_mhz", "throttled", "throttle_reasons"]
# fmt: on

st.title("Shape")
scope, shapes = widgets.scoped(queries.shape_options, what="ok rows", preset="smoke")
labels = frames.shape_label(shapes)
label = st.sidebar.selectbox("Shape (most measured first)", labels, key="shape_pick")
m, n, k = (int(x) for x in label.split("x"))
widgets.throttle_badge(**scope.filters, shape=(m, n, k))
widgets.regime_badge(**scope.filters, shape=(m, n, k))
peaks = cache.query(queries.gpu_peaks, gpu_name=scope.gpu)
rows = cache.query(queries.results, **scope.filters, m_range=(m, m), n_range=(n, n), k_range=(k, k))
configs = frames.shape_configs(rows, peaks["peak_tflops"])
best = frames.best_per_variant(configs)

peak = (
    f"{peaks['peak_tflops']:g} TFLOP/s dense bf16/fp16 peak" if peaks["peak_tflops"] else "no peak recorded"
)
top = best.iloc[0]
st.caption(
    f"{label} in {scope.dtype} on {widgets.gpu_label(scope.gpu)}: {len(configs)} ok configs. Fastest: "
    f"{top.variant} {top.config_key}, {top.ms:.4g} ms, {top.tflops:.1f} TFLOP/s ({peak})."
)
st.subheader("Best config of each variant")
st.dataframe(best[BEST_COLUMNS], hide_index=True)
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
st.dataframe(configs[ALL_COLUMNS], hide_index=True)
