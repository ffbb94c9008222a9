"""Grouping / L2: what GROUP_SIZE_M > 1 buys as the operands outgrow L2."""

import streamlit as st

from dashboard import charts, common, frames
from db import queries

st.title("Grouping / L2")
st.caption(
    "Grouped program order keeps a band of A's rows and B's columns in L2 while neighbouring "
    "programs reuse them: it can only pay once the operands (A + B + C) no longer fit in L2. "
    "Each dot: one config, its best GROUP_SIZE_M > 1 time against GROUP_SIZE_M = 1 with all else equal. "
    f"Grey band: within {frames.NOISE:.0%} of 1, run-to-run noise on an H200."
)
scope, effect = common.scoped(
    queries.grouping_effect, what="grouped pairs (GROUP_SIZE_M > 1 and = 1, same config)", preset="grouping"
)
common.throttle_badge(**scope.filters)
points = frames.grouping_points(effect)
st.altair_chart(charts.grouping_scatter(points, scope.note))
st.altair_chart(charts.grouping_heatmap(frames.grouping_heatmap(points), scope.note))
