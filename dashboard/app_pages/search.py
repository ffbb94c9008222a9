"""Search: how a searched sweep (`farm sweep --search ...`) closed in on each shape's best, point by point,
against the best the exhaustive sweep of the same shape found."""

import pandas as pd
import streamlit as st

from dashboard import cache, search_charts, widgets
from db import search_progress

TABLE_COLUMNS = [
    "shape", "points", "exhaustive_points", "share_of_exhaustive", "best_ms", "exhaustive_ms", "miss",
    "points_to_within", "cublas_ms",
]  # fmt: skip
COLUMN_CONFIG = {
    "points": st.column_config.NumberColumn("points measured", format="%d"),
    "exhaustive_points": st.column_config.NumberColumn("exhaustive points", format="%d"),
    "share_of_exhaustive": st.column_config.NumberColumn("share of the grid", format="percent"),
    "best_us": st.column_config.NumberColumn("best found us", format=widgets.TIME_FORMAT),
    "exhaustive_us": st.column_config.NumberColumn("exhaustive best us", format=widgets.TIME_FORMAT),
    "miss": st.column_config.NumberColumn(
        "miss", format="percent", help="best found / exhaustive best - 1 (below 0: the search found faster)"
    ),
    "points_to_within": st.column_config.TextColumn(f"points to within {search_progress.WITHIN:.0%}"),
    "cublas_us": st.column_config.NumberColumn("cuBLAS us", format=widgets.TIME_FORMAT),
}

st.title("Search")
lead = widgets.lead()
found = cache.query(search_progress.searches)
if found.empty:
    widgets.conclude(lead, search_progress.conclusion)
    st.info(
        "A search measures a budget of each shape's configs, chosen by a strategy (random, tpe or a cost "
        "model learned from the database), and always cuBLAS: "
        f"`farm sweep --preset llm --search model --budget 10% --db {cache.shown_target()}`. "
        "The same command without --search measures the whole grid: the exhaustive best this page "
        "sets each search against.",
        icon=":material/travel_explore:",
    )
    st.stop()

gpu, dtype = widgets.pick_gpu_dtype()
progress = cache.query(search_progress.search_progress, gpu_name=gpu, dtype=dtype)
if progress.empty:
    widgets.conclude(lead, search_progress.conclusion, gpu_name=gpu, dtype=dtype)
    st.info(f"No search here measured {gpu} in {dtype}: pick another GPU or dtype in the sidebar.")
    st.stop()
commands = dict(zip(found.search, found.command))
ids = sorted({int(i) for i in progress.search}, reverse=True)
search = st.selectbox("Search (newest first)", ids, format_func=lambda i: f"#{i} {commands[i]}", key="search")
widgets.conclude(lead, search_progress.conclusion, gpu_name=gpu, dtype=dtype, search=search)
progress = progress[progress.search == search]
shapes = search_progress.search_shapes(progress)
note = widgets.chart_note(gpu)

if shapes.miss.notna().any():
    st.altair_chart(search_charts.misses(shapes, note))
else:
    st.caption(
        "No exhaustive sweep here measured these shapes: run the same spec without --search for the "
        "exhaustive best to set each search against."
    )
# Worst miss first: the shape the search got most wrong is the one to look at.
shape = st.selectbox("Shape (worst miss first)", shapes["shape"].tolist(), key=f"search_shape_{search}")
row = shapes[shapes["shape"] == shape].iloc[0]
points = progress[(progress.m == row.m) & (progress.n == row.n) & (progress.k == row.k)]
st.altair_chart(search_charts.best_so_far(points, row, note))
st.subheader("Per shape, the worst miss first")
table = shapes[TABLE_COLUMNS].copy()
# Text, not a number: Streamlit draws a missing number as "None", which reads as a bug.
table["points_to_within"] = ["not reached" if pd.isna(n) else str(n) for n in table.points_to_within]
widgets.table(table, **COLUMN_CONFIG)
