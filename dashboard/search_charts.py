"""The Search page's charts (db.search_progress' frames in): every shape's miss against the exhaustive best,
and one shape's best time so far against the points measured. Built from dashboard.chart_parts' pieces (rules,
titles, row heights), so they read like the other pages' charts."""

from __future__ import annotations

import altair as alt
import pandas as pd

from dashboard import chart_parts
from dashboard.frames import readable_time
from db.search_progress import WITHIN

# A line over tens to hundreds of points needs no more: the step it draws is read against two rules.
PROGRESS_PLOT_PX = 300
# Rows of the miss chart: a shape label of 11 px needs 16 (chart_parts.rows_px).
MISS_ROW_PX = 18
OUTCOME_COLOURS = alt.Scale(domain=["within", "missed"], range=["#2a9d4b", "#d1495b"])


def _outcome(miss: pd.Series) -> list[str]:
    return ["within" if m <= WITHIN else "missed" for m in miss]


def misses(shapes: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Per shape with an exhaustive best (db.search_progress.search_shapes' rows, worst first): the
    search's best over the exhaustive best, in percent, with a rule at the WITHIN line and at 0."""
    data = shapes.dropna(subset=["miss"]).copy()
    data["miss_pct"] = data.miss * 100
    data["outcome"] = _outcome(data.miss)
    data = chart_parts.only_columns(
        data, "shape miss_pct outcome points exhaustive_points best_ms exhaustive_ms points_to_within"
    )
    order = data["shape"].tolist()
    pct = pd.concat([data.miss_pct, pd.Series([0.0, WITHIN * 100])])
    span = max(float(pct.max() - pct.min()), 1.0)
    x = alt.X(
        "miss_pct:Q",
        scale=alt.Scale(domain=[float(pct.min()) - span * 0.05, float(pct.max()) + span * 0.05], nice=False),
        title=chart_parts.wrapped("search's best / exhaustive best - 1 (%)"),
    )
    dots = (
        alt.Chart(data, description="miss per shape")
        .mark_point(filled=True, size=70)
        .encode(
            x=x,
            y=alt.Y("shape:N", sort=order, title=None),
            color=alt.Color("outcome:N", scale=OUTCOME_COLOURS, legend=chart_parts.LEGEND, title=None),
            tooltip=[
                "shape:N",
                alt.Tooltip("miss_pct:Q", format=".2f", title="miss %"),
                alt.Tooltip("points:Q", title="points measured"),
                alt.Tooltip("exhaustive_points:Q", title="exhaustive points"),
                alt.Tooltip("best_ms:Q", format=".4g", title="search's best ms"),
                alt.Tooltip("exhaustive_ms:Q", format=".4g", title="exhaustive best ms"),
                alt.Tooltip("points_to_within:Q", title=f"points to within {WITHIN:.0%}"),
            ],
        )
    )
    return alt.layer(
        dots,
        chart_parts.reference_rule("x", "miss_pct", WITHIN * 100, f"{WITHIN:.0%}", f"within {WITHIN:.0%}"),
        chart_parts.reference_rule("x", "miss_pct", 0.0, "", "exhaustive best"),
    ).properties(
        title=chart_parts.chart_title(
            "Each shape: how far the search's best is from the exhaustive best", note
        ),
        height=chart_parts.rows_px(len(data), MISS_ROW_PX),
        autosize=chart_parts.ROW_FIT,
    )


def best_so_far(progress: pd.DataFrame, shape: pd.Series, note: str = "") -> alt.LayerChart:
    """One shape of one search (db.search_progress.search_progress' rows): the best kernel time found after
    each point measured (a step line) over every point's own time (faint dots; those far above the best are
    clipped), with rules at the exhaustive best and at cuBLAS where the database has them. `shape` is the
    shape's search_shapes() row."""
    data = chart_parts.only_columns(progress, "point ms best_ms variant config_key status")
    rules = {
        "exhaustive best": (shape.exhaustive_ms, f"exhaustive best {_ms(shape.exhaustive_ms)}"),
        "cuBLAS": (shape.cublas_ms, f"cuBLAS {_ms(shape.cublas_ms)}"),
    }
    rules = {name: (float(v), label) for name, (v, label) in rules.items() if pd.notna(v)}
    # The y axis spans the best-so-far line and the rules: a config 10x slower than the best would
    # flatten the line that the page is about.
    shown = pd.concat([data.best_ms, pd.Series([v for v, _ in rules.values()], dtype="float64")]).dropna()
    lo, hi = (float(shown.min()), float(shown.max())) if len(shown) else (0.0, 1.0)
    # In us where the chart is under a millisecond, as readable_time writes its labels (16 us, not 0.016).
    unit, per_ms = ("us", 1e3) if hi < 1 else ("ms", 1.0)
    data = data.assign(ms=data.ms * per_ms, best_ms=data.best_ms * per_ms)
    rules = {name: (v * per_ms, label) for name, (v, label) in rules.items()}
    lo, hi = lo * per_ms, hi * per_ms
    pad = max(hi - lo, hi * 0.02) * 0.08
    scale = alt.Scale(domain=[max(lo - pad, 0.0), hi + pad], nice=False, zero=False)
    title = f"kernel {unit} (line: best so far)"
    x = alt.X(
        "point:Q",
        title="points measured",
        scale=alt.Scale(domain=[0, max(1, len(data))], nice=False),
        axis=alt.Axis(format="d", tickMinStep=1),
    )
    tips = [
        "point:Q",
        alt.Tooltip("best_ms:Q", format=".4g", title=f"best so far {unit}"),
        alt.Tooltip("ms:Q", format=".4g", title=f"this point's {unit}"),
        "variant:N",
        "config_key:N",
        "status:N",
    ]
    base = alt.Chart(data, description="points measured")
    dots = base.mark_point(size=30, opacity=0.45, clip=True).encode(
        x=x, y=alt.Y("ms:Q", scale=scale, title=title), tooltip=tips
    )
    line = (
        alt.Chart(data, description="best so far")
        .mark_line(interpolate="step-after", point=alt.OverlayMarkDef(size=25), strokeWidth=2)
        .encode(x=x, y=alt.Y("best_ms:Q", scale=scale, title=title), tooltip=tips)
    )
    layers = [dots, line]
    # The two rules often sit within a few pixels (8192x2048x128 on an H100: 15.8 and 16.0 us), so
    # cuBLAS's label goes to the right end and the exhaustive best's stays at the left.
    layers += [
        chart_parts.reference_rule("y", "best_ms", value, label, name, label_right=name == "cuBLAS")
        for name, (value, label) in rules.items()
    ]
    within = (
        f"; within {WITHIN:.0%} after {shape.points_to_within} points"
        if pd.notna(shape.points_to_within)
        else ""
    )
    return alt.layer(*layers).properties(
        title=chart_parts.chart_title(
            f"{shape['shape']}: best time so far, {len(data)} points measured{within}", note
        ),
        height=PROGRESS_PLOT_PX,
        autosize=chart_parts.ROW_FIT,
    )


def _ms(value: float) -> str:
    return readable_time(value) if pd.notna(value) else "-"
