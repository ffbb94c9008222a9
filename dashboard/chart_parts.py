"""The pieces every dashboard chart is built from: scales and ticks for ratios and log axes, the
palette, reference rules and the noise band, titles with the interpreter note, row-sized heights, the
click selection that opens a shape, and the tooltips of revision 0002's columns.

The per-page builders (dashboard.charts, dashboard.splitk_charts, dashboard.search_charts) use these, so
every page's charts read alike: the same dashed rules, the same grey noise band, the same sizing.
"""

from __future__ import annotations

import textwrap

import altair as alt
import pandas as pd

from dashboard import frames

LOG = alt.Scale(type="log")
RULE = {"strokeDash": [5, 4], "color": "#888"}
VERDICT_COLOURS = alt.Scale(domain=["faster", "same", "slower"], range=["#2a9d4b", "#9a9a9a", "#d1495b"])
# Categorical colours for ordinal values (K, GROUP_SIZE_M): a sequential ramp made K=1000 and K=2048
# nearly the same colour and GROUP_SIZE_M 2 and 4 nearly white.
CATEGORIES = alt.Scale(scheme="tableau10")
# tableau10's colours, for a scale that adds fixed entries after its categories (the roofline's legend).
CATEGORY_COLOURS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6"]
# Legend swatches at full opacity whatever the marks' (faint dots gave 35% swatches).
LEGEND = alt.Legend(symbolOpacity=1)
# Reference marks: no tooltip (Streamlit's theme gives every mark one). Channel objects here, not
# alt.value dicts or "field:type" strings: Altair builds an object of each by hashing its ~570 schema
# classes, 2 ms apiece, 10 of them in a chart's noise band and two reference rules.
NO_TIP = alt.TooltipValue(None)
# Streamlit sizes charts with autosize "fit", where a height holds the x axis, its titles and legends
# too: Overview's bar charts got 26 px a row + 90 px and the title and axis ate all of it (0 px plots).
# Every chart says the plot's own height (ROW_FIT: autosize fit-x, the height is the plot's; a chart of
# rows a step per row, at least MIN_PLOT_PX), so a two-line title takes no plot height: tools/browser.py
# fails any plot under 60 px.
ROW_FIT = alt.AutoSizeParams(type="fit-x", contains="padding")
MIN_PLOT_PX = 72


def rows_px(n_rows: int, step: int) -> int:
    """The plot height of a chart of n_rows rows, `step` px each (a label of 11 px needs 16)."""
    return max(MIN_PLOT_PX, step * max(1, n_rows))


# Ticks a ratio axis may use: 1 always among them when in range (Vega's own log ticks skip it).
RATIO_TICKS = (0.1, 0.2, 0.5, 0.7, 0.8, 0.9, 0.95, 1, 1.05, 1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100)
COARSE_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100)


def ratio_scale(values: pd.Series, *, log: bool = True) -> tuple[alt.Scale, alt.Axis]:
    """A scale over the data and 1 (padded 10%, not rounded out to decades) and an axis with a tick at 1."""
    vals = pd.to_numeric(values, errors="coerce").dropna()
    vals = vals[vals > 0]
    lo = min(float(vals.min()), 1.0) / 1.1 if len(vals) else 0.5
    hi = max(float(vals.max()), 1.0) * 1.1 if len(vals) else 2.0
    # A wide range gets the 1-2-5 ticks only: crowded labels near 1 would be dropped, 1 among them.
    candidates = RATIO_TICKS if hi / lo < 3 else COARSE_TICKS
    ticks = [t for t in candidates if lo <= t <= hi]
    # zero=False only on a linear scale (Vega-Lite warns that a log scale drops it).
    scale = (
        alt.Scale(type="log", domain=[lo, hi], nice=False)
        if log
        else alt.Scale(domain=[lo, hi], nice=False, zero=False)
    )
    # An explicit format: Vega's log axes label only some of the given ticks otherwise. Three
    # significant digits: with a log scale's own precision "~g" drew 1.05 and 1.25 as "1.1" and "1.3".
    return scale, alt.Axis(values=ticks, format=".3~g")


def data_log_scale(values: pd.Series) -> alt.Scale:
    """A log scale over the data alone, padded 20%, not rounded out to whole decades."""
    vals = pd.to_numeric(values, errors="coerce").dropna()
    vals = vals[vals > 0]
    if vals.empty:
        return LOG
    return alt.Scale(type="log", domain=[float(vals.min()) / 1.2, float(vals.max()) * 1.2], nice=False)


def colour_scale(n: int) -> alt.Scale:
    return CATEGORIES if n <= 10 else alt.Scale(scheme="tableau20")


# The selection a chart of shapes carries when its page opens the Shape page on a click
# (widgets.picked_shape reads it back by this name).
PICK = "pick"


def pickable(chart: alt.Chart, pick: bool) -> alt.Chart:
    """chart with a click selection of one shape (named PICK) when `pick`."""
    return chart.add_params(alt.selection_point(name=PICK, fields=["shape"], on="click")) if pick else chart


def only_columns(df: pd.DataFrame, columns: str) -> pd.DataFrame:
    """The rows with just the columns a chart uses (space-separated names): the spec carries its data,
    so every extra column is Arrow bytes to send and Vega data to parse."""
    return df[[c for c in columns.split() if c in df.columns]]


# An axis title longer than its axis pushes Vega's layout out of Streamlit's frame: a y title of 70
# characters on a 420 px split-K chart moved the chart's own title above the SVG, where it was clipped.
# At the axis label font (11 px, about 6.5 px a character) 40 characters are 260 px: shorter than any
# chart here is high, so longer titles are broken into lines of 40.
AXIS_TITLE_CHARS = 40


def wrapped(text: str) -> str | list[str]:
    """An axis title as lines no longer than AXIS_TITLE_CHARS (one string when it fits on one)."""
    lines = textwrap.wrap(text, AXIS_TITLE_CHARS)
    return lines[0] if len(lines) == 1 else lines


def chart_title(text: str, note: str, which: str = "") -> alt.Title:
    """A chart's title, `which` (the run it draws, say) as its second line, and `note` under it in red."""
    return alt.Title(
        [text, which] if which else text, subtitle=note or alt.Undefined, subtitleColor="#c0392b"
    )


def reference_rule(
    channel: str, field: str, value: float, label: str, description: str, *, label_right: bool = False
) -> alt.LayerChart:
    """A dashed reference line at field = value on one axis, with its label (no tooltip). label_right: a
    horizontal rule's label at the right end, where a second rule near it keeps its label at the left."""
    base = alt.Chart(pd.DataFrame({field: [value], "label": [label]}), description=description)
    at = {channel: alt.X(f"{field}:Q") if channel == "x" else alt.Y(f"{field}:Q")}
    rule = base.mark_rule(**RULE).encode(**at, tooltip=NO_TIP)
    # Labels where the two rules cannot meet: the vertical one's at the bottom, the horizontal one's at
    # the left (on log axes both rules often sit at a corner of the data).
    if channel == "x":
        text = base.mark_text(align="left", baseline="bottom", dx=4, dy=-4, color="#666").encode(
            **at, y=alt.YValue("height"), text=alt.Text("label:N"), tooltip=NO_TIP
        )
    else:
        end = {"align": "right", "dx": -4} if label_right else {"align": "left", "dx": 4}
        text = base.mark_text(baseline="bottom", dy=-2, color="#666", **end).encode(
            **at, x=alt.XValue("width" if label_right else 0), text=alt.Text("label:N"), tooltip=NO_TIP
        )
    return alt.layer(rule, text)


def noise_band(field: str, description: str = "within noise") -> alt.Chart:
    """A grey band 1 +- NOISE on a ratio axis: a ratio inside it is run-to-run noise (2-3% on an H200)."""
    data = pd.DataFrame({field: [1 - frames.NOISE], f"{field}_top": [1 + frames.NOISE]})
    return (
        alt.Chart(data, description=description)
        .mark_rect(color="#bbb", opacity=0.25)
        .encode(y=alt.Y(f"{field}:Q"), y2=alt.Y2(f"{field}_top:Q"), tooltip=NO_TIP)
    )


def parity_line(lo: float, hi: float, x: str, y: str, description: str) -> alt.Chart:
    """The y = x line from lo to hi (both axes share the unit)."""
    data = pd.DataFrame({x: [lo, hi], y: [lo, hi]})
    return (
        alt.Chart(data, description=description)
        .mark_line(**RULE)
        .encode(x=f"{x}:Q", y=f"{y}:Q", tooltip=NO_TIP)
    )


GPU_STATE_TIPS = [
    alt.Tooltip("sm_clock_mhz:Q", title="SM clock (MHz)", format=","),
    alt.Tooltip("throttled:N", title="throttled"),
]


def fidelity_tips(prefix: str = "", who: str = "") -> list[alt.Tooltip]:
    """Revision 0002's columns of a row as tooltips, from frames.with_readable's text columns."""
    at = f"{who} " if who else ""
    return [
        alt.Tooltip(f"{prefix}stream_time:N", title=f"{at}stream time"),
        alt.Tooltip(f"{prefix}host_time:N", title=f"{at}host time"),
        alt.Tooltip(f"{prefix}energy:N", title=f"{at}energy / launch"),
        alt.Tooltip(f"{prefix}power:N", title=f"{at}power"),
        alt.Tooltip(f"{prefix}timing_regime:N", title=f"{at}regime"),
    ]


def fidelity_columns(prefix: str = "") -> str:
    return " ".join(f"{prefix}{c}" for c in ("stream_time", "host_time", "energy", "power", "timing_regime"))
