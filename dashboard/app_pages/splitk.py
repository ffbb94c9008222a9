"""Split-K: the speedup of the best split against output tiles per SM of the unsplit grid."""

import streamlit as st

from dashboard import charts, common
from db import dashboard_queries as dq

# fmt: off
BEST_COLUMNS = [
    "shape", "tiles", "tiles_per_sm", "best_split_k", "block_m", "block_n", "best_split_variant",
    "unsplit_ms", "split_ms", "speedup",
]
# fmt: on

st.title("Split-K")
st.caption(
    "Below one output tile per SM, the unsplit grid leaves SMs idle and splitting K gives them work; "
    "above it, split-K only adds the partial-sum traffic. One dot per shape and block shape; "
    "outlined: the best split of each shape."
)
scope, points = common.scoped(
    dq.splitk_points, what="split-K pairs (split_k > 1 and split_k = 1 with the same blocks)", preset="splitk"
)
st.altair_chart(charts.splitk_scatter(points, scope.note))
st.subheader("Best split per shape")
best = points[points.best_for_shape].sort_values("speedup", ascending=False)
st.dataframe(best[BEST_COLUMNS], hide_index=True)

shape = st.selectbox("Speedup against SPLIT_K for the shape", best["shape"].tolist(), key="splitk_shape")
row = best[best["shape"] == shape].iloc[0]
curve = common.query(dq.splitk_curve_band, **scope.filters, m=int(row.m), n=int(row.n), k=int(row.k))
st.altair_chart(charts.splitk_curve(curve, scope.note))
