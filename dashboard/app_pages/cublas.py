"""Versus cuBLAS: the best Triton config per shape against cuBLAS and against the GPU's roofs."""

import streamlit as st

from dashboard import cache, charts, frames, widgets
from db import conclusions, queries

# fmt: off
TABLE_COLUMNS = [
    "shape", "triton_variant", "triton_config_key", "triton_ms", "triton_tflops", "cublas_ms",
    "cublas_tflops", "ratio", "intensity",
]
ROOF_COLUMNS = ["shape", "provider", "config", "ms", "tflops", "pct_peak", "intensity"]
# fmt: on

st.title("Versus cuBLAS")
lead = widgets.lead()
scope, best = widgets.scoped(queries.best_configs, what="ok rows", preset="smoke")
widgets.conclude(lead, conclusions.cublas, **scope.filters)
widgets.throttle_badge(**scope.filters)
widgets.regime_badge(**scope.filters)
sizes = cache.query(queries.shape_sizes, **scope.filters)
peaks = cache.query(queries.gpu_peaks, gpu_name=scope.gpu)
vs = cache.query(queries.vs_cublas, **scope.filters)
if vs.empty:
    st.info(
        f"No shape on {scope.gpu} in {scope.dtype} has both a Triton and a cuBLAS time, so there is no "
        f"head-to-head; the roofline below needs none. A sweep with cuBLAS: {widgets.sweep_hint('smoke')}."
    )
else:
    points = frames.with_intensity(vs, sizes)
    wins = int((points.ratio > 1).sum())
    st.caption(
        f"Triton's best config beats cuBLAS on {wins} of {len(points)} shapes "
        "(ratio = cuBLAS time / Triton time)."
    )
    widgets.picked_shape(
        st.altair_chart(
            charts.cublas_scatter(points, scope.note, pick=True), on_select="rerun", key="cublas_pick"
        )
    )
    st.caption("Click a dot to open its shape.")
    widgets.table(points[TABLE_COLUMNS])

longform = frames.roofline_points(best, sizes, peaks["peak_tflops"])
roofs = frames.roof_lines(
    peaks["peak_tflops"], peaks["peak_gbps"], longform.intensity.min(), longform.intensity.max()
)
st.subheader("Roofline")
if roofs.empty:
    st.info(
        f"No peak TFLOP/s or bandwidth is recorded for {scope.gpu}: the roofline is drawn without its roofs."
    )
else:
    st.caption(
        f"Roofs: compute {peaks['peak_tflops']:g} TFLOP/s (dense bf16/fp16 tensor cores), "
        f"bandwidth {peaks['peak_gbps']:g} GB/s; they meet at {roofs.intensity.iloc[1]:.0f} FLOP/B. "
        "Far under the roof: a shape to look at, cuBLAS or not."
    )
    if scope.dtype not in frames.ROOF_DTYPES:
        st.warning(f"The compute roof is the bf16/fp16 tensor-core peak; {scope.dtype} runs below it.")
widgets.picked_shape(
    st.altair_chart(
        charts.roofline(longform, roofs, scope.note, pick=True), on_select="rerun", key="cublas_roof"
    )
)
widgets.table(longform[ROOF_COLUMNS].sort_values("pct_peak"))
