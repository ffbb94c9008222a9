"""Versus cuBLAS: the best Triton config per shape against cuBLAS and against the GPU's roofs."""

import streamlit as st

from dashboard import charts, common
from db import dashboard_queries as dq

# fmt: off
TABLE_COLUMNS = [
    "shape", "triton_variant", "triton_config_key", "triton_ms", "triton_tflops", "cublas_ms",
    "cublas_tflops", "ratio", "intensity",
]
# fmt: on

st.title("Versus cuBLAS")
scope, points = common.scoped(
    dq.cublas_points, what="shapes with both a Triton and a cuBLAS time", preset="smoke"
)

wins = int((points.ratio > 1).sum())
st.caption(
    f"Triton's best config beats cuBLAS on {wins} of {len(points)} shapes (ratio = cuBLAS ms / Triton ms)."
)
st.altair_chart(charts.cublas_scatter(points, scope.note))

peaks = common.query(dq.gpu_peaks, gpu_name=scope.gpu)
longform = dq.roofline_points(points)
roofs = dq.roof_lines(
    peaks["peak_tflops"], peaks["peak_gbps"], longform.intensity.min(), longform.intensity.max()
)
if roofs.empty:
    st.info(
        f"No peak TFLOP/s or bandwidth is recorded for {scope.gpu}: the roofline is drawn without its roofs."
    )
else:
    st.caption(
        f"Roofs: compute {peaks['peak_tflops']:g} TFLOP/s (dense bf16/fp16 tensor cores), "
        f"bandwidth {peaks['peak_gbps']:g} GB/s; they meet at {roofs.intensity.iloc[1]:.0f} FLOP/B."
    )
    if scope.dtype not in dq.ROOF_DTYPES:
        st.warning(f"The compute roof is the bf16/fp16 tensor-core peak; {scope.dtype} runs below it.")
st.altair_chart(charts.roofline(longform, roofs, scope.note))
st.dataframe(points[TABLE_COLUMNS], hide_index=True)
