"""The Split-K page's charts: the per-shape speedup against tiles per SM, with its shapes labelled where
their texts do not cross (spaced_labels), and one shape's speedup against SPLIT_K.

Every layer carries a `description` naming what it draws, so a test can find the data each layer
receives in the rendered spec; `note` is the subtitle (the interpreter label).
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from dashboard import chart_parts as parts

# The split-K chart writes the shape next to its headline dot (the largest speedup) and its largest
# dots, up to this many, skipping any whose text would cross one already placed (the rest: on hover).
SHAPE_LABELS = 8
SPLITK_PLOT_PX = 380
# Where spaced_labels places a text: the narrowest plot a 1,400 px window gives the chart (Streamlit's
# wide layout less the sidebar, axes and legend), and a 10 px label's size: 6 px a character, 12 px
# high. A wider plot only moves the dots apart.
ASSUMED_PLOT_WIDTH_PX = 600
LABEL_CHAR_PX, LABEL_LINE_PX, LABEL_OFFSET_PX = 6.0, 12.0, 9


def _log_px(value: float, domain: list[float], length: float) -> float:
    lo, hi = (math.log(v) for v in domain)
    return (math.log(value) - lo) / (hi - lo) * length


def _crosses(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def spaced_labels(
    pts: pd.DataFrame,
    order: list,
    x: tuple[str, list[float]],
    y: tuple[str, list[float]],
    size: tuple[float, float],
    reserved: list[tuple[float, float, float, float]] = (),
    limit: int = SHAPE_LABELS,
) -> pd.DataFrame:
    """The rows of pts (index labels in `order`, most wanted first) whose `shape` text can be written
    beside its point on log axes x and y ((column, domain)) of a plot `size` (width, height) px without
    crossing a text already placed or a `reserved` box: right of the point, else left of it. Adds
    `side` ("right"/"left")."""
    width, height = size
    boxes, chosen, sides = list(reserved), [], []
    for idx in order:
        row = pts.loc[idx]
        px = _log_px(float(row[x[0]]), x[1], width)
        py = height - _log_px(float(row[y[0]]), y[1], height) - LABEL_OFFSET_PX
        w = LABEL_CHAR_PX * len(str(row["shape"]))
        for side, left in (("right", px + LABEL_OFFSET_PX), ("left", px - LABEL_OFFSET_PX - w)):
            box = (left, py - LABEL_LINE_PX / 2, left + w, py + LABEL_LINE_PX / 2)
            inside = box[0] >= 0 and box[2] <= width and box[1] >= 0 and box[3] <= height
            if inside and not any(_crosses(box, b) for b in boxes):
                boxes.append(box)
                chosen.append(idx)
                sides.append(side)
                break
        if len(chosen) == limit:
            break
    return pts.loc[chosen].assign(side=sides)


def speedup_scatter(
    table: pd.DataFrame, blocks: pd.DataFrame, note: str = "", pick: bool = False
) -> alt.LayerChart:
    """Per shape, best split over best unsplit against tiles per SM of the fastest unsplit grid (the
    dots the table lists, with p20-p80 bars); faint: each block shape's split against its own unsplit
    time (the splitk_speedup view). Rules at one tile per SM and speedup 1, a band where it is noise."""
    pts = parts.only_columns(
        table[(table.tiles_per_sm > 0) & (table.speedup > 0)],
        "shape m n k gflop tiles_per_sm speedup speedup_lo speedup_hi verdict unsplit_ms unsplit_config "
        "split_ms split_config split_split_k unsplit_sm_clock_mhz throttled eager_speedup "
        + parts.fidelity_columns("unsplit_")
        + " "
        + parts.fidelity_columns("split_"),
    )
    light = parts.only_columns(
        blocks[(blocks.tiles_per_sm > 0) & (blocks.speedup > 0)],
        "shape m n k block_m block_n tiles_per_sm best_split_k config speedup unsplit_ms split_ms",
    )
    # The diamonds' own rows and columns: a second copy of every column of pts was 94 kB of Arrow.
    eager = parts.only_columns(
        table[(table.tiles_per_sm > 0) & (table.speedup > 0) & (table.eager_speedup > 0)],
        "shape m n k tiles_per_sm eager_speedup speedup unsplit_eager_config split_eager_config",
    )
    yscale, yaxis = parts.ratio_scale(
        pd.concat([pts.speedup_lo, pts.speedup_hi, light.speedup, eager.eager_speedup])
    )
    xscale = parts.data_log_scale(pd.concat([pts.tiles_per_sm, light.tiles_per_sm, pd.Series([1.0])]))
    x = alt.X("tiles_per_sm:Q", scale=xscale, title="output tiles per SM of the unsplit grid")
    colour = alt.Color("k:O", title="K", scale=parts.colour_scale(pts.k.nunique()), legend=parts.LEGEND)
    per_block = (
        alt.Chart(light, description="same blocks")
        .mark_circle(size=30, opacity=0.3)
        .encode(
            x=x,
            y=alt.Y("speedup:Q", scale=yscale, axis=yaxis),
            color=colour,
            tooltip=[
                alt.Tooltip("shape:N"),
                alt.Tooltip("config:N", title="blocks, best split"),
                alt.Tooltip("speedup:Q", format=".3f", title="same-blocks speedup"),
                alt.Tooltip("tiles_per_sm:Q", title="tiles / SM", format=".3g"),
                alt.Tooltip("unsplit_ms:Q", title="unsplit ms, same blocks", format=".4g"),
                alt.Tooltip("split_ms:Q", title="split ms", format=".4g"),
            ],
        )
    )
    base = alt.Chart(pts, description="best split against best unsplit")
    bars = base.mark_rule(strokeWidth=2).encode(
        x=x, y=alt.Y("speedup_lo:Q"), y2=alt.Y2("speedup_hi:Q"), color=colour
    )
    # Dot area by the problem's work: the large shapes, where a speedup saves the most time, stand out
    # and carry their shape as text.
    # No size legend: Vega lists a continuous size in 7 rows, taller than the plot (its GFLOP is in the
    # tooltip, and the page's caption says what the area is).
    size = alt.Size("gflop:Q", title="GFLOP (2MNK)", scale=alt.Scale(range=[50, 500]), legend=None)
    best = base.mark_point(filled=True, opacity=1, stroke="black", strokeWidth=1).encode(
        x=x,
        size=size,
        y=alt.Y(
            "speedup:Q",
            scale=yscale,
            axis=yaxis,
            title=parts.wrapped("split-K speedup: best unsplit ms / best split ms (faint: same blocks)"),
        ),
        color=colour,
        tooltip=[
            alt.Tooltip("shape:N"),
            alt.Tooltip("gflop:Q", format=",.4g", title="GFLOP"),
            alt.Tooltip("verdict:N"),
            alt.Tooltip("speedup:Q", format=".3f"),
            alt.Tooltip("speedup_lo:Q", format=".3f", title="p20-p80 low"),
            alt.Tooltip("speedup_hi:Q", format=".3f", title="p20-p80 high"),
            alt.Tooltip("unsplit_config:N", title="best unsplit"),
            alt.Tooltip("unsplit_ms:Q", title="unsplit ms", format=".4g"),
            alt.Tooltip("split_config:N", title="best split"),
            alt.Tooltip("split_ms:Q", title="split ms", format=".4g"),
            alt.Tooltip("tiles_per_sm:Q", title="tiles / SM", format=".3g"),
            alt.Tooltip("unsplit_sm_clock_mhz:Q", title="SM clock (MHz)", format=","),
            alt.Tooltip("throttled:N"),
            alt.Tooltip("eager_speedup:Q", format=".3f", title="eager speedup"),
            *parts.fidelity_tips("unsplit_", "unsplit"),
            *parts.fidelity_tips("split_", "split"),
        ],
    )
    # The eager caller's speedup beside each kernel-time dot: hollow diamonds at the same tiles per SM.
    eager_dots = (
        alt.Chart(eager, description="eager speedup per shape")
        .mark_point(shape="diamond", filled=False, size=110, strokeWidth=2, opacity=1)
        .encode(
            x=x,
            y=alt.Y("eager_speedup:Q", scale=yscale, axis=yaxis),
            color=colour,
            tooltip=[
                alt.Tooltip("shape:N"),
                alt.Tooltip("eager_speedup:Q", format=".3f", title="eager speedup"),
                alt.Tooltip("speedup:Q", format=".3f", title="kernel-time speedup"),
                alt.Tooltip("unsplit_eager_config:N", title="eager: best unsplit"),
                alt.Tooltip("split_eager_config:N", title="eager: best split"),
            ],
        )
    )
    # The headline (largest speedup) first, then the largest problems.
    order = [pts.speedup.idxmax(), *pts.sort_values("gflop", ascending=False).index] if len(pts) else []
    size_px = (ASSUMED_PLOT_WIDTH_PX, SPLITK_PLOT_PX)
    xdomain, ydomain = xscale.to_dict().get("domain"), yscale.to_dict().get("domain")
    reserved = []  # the rules' own labels, "1 tile / SM" at the bottom and "speedup 1" at the left
    if xdomain and ydomain:
        one_tile = _log_px(1.0, xdomain, size_px[0])
        speedup_one = size_px[1] - _log_px(1.0, ydomain, size_px[1])
        reserved = [
            (one_tile, size_px[1] - 20, one_tile + 80, size_px[1]),
            (0, speedup_one - 16, 70, speedup_one),
        ]
    named = (
        spaced_labels(pts, order, ("tiles_per_sm", xdomain), ("speedup", ydomain), size_px, reserved)
        if len(pts) and xdomain and ydomain
        else pts.assign(side=pd.Series(dtype=str))
    )
    labels = [
        alt.Chart(
            parts.only_columns(named[named.side == side], "shape tiles_per_sm speedup"),
            description=description,
        )
        .mark_text(align=side_align, dx=dx, dy=-LABEL_OFFSET_PX, fontSize=10, color="#333")
        .encode(x=x, y=alt.Y("speedup:Q", scale=yscale), text=alt.Text("shape:N"), tooltip=parts.NO_TIP)
        for side, side_align, dx, description in (
            ("right", "left", LABEL_OFFSET_PX, "shape labels"),
            ("left", "right", -LABEL_OFFSET_PX, "shape labels, left of the dot"),
        )
        if (named.side == side).any()
    ]
    return alt.layer(
        parts.noise_band("speedup"),
        per_block,
        bars,
        parts.pickable(best, pick),
        *labels,
        *([eager_dots] if len(eager) else []),
        parts.reference_rule("x", "tiles_per_sm", 1.0, "1 tile / SM", "one tile per SM"),
        parts.reference_rule("y", "speedup", 1.0, "speedup 1", "speedup 1"),
    ).properties(
        title=parts.chart_title(
            "When split-K pays: fewer output tiles than SMs (diamonds: eager time per call)", note
        ),
        height=SPLITK_PLOT_PX,
        autosize=parts.ROW_FIT,
    )


def speedup_curve(curve: pd.DataFrame, shape: str, streamk_speedup: float, note: str = "") -> alt.LayerChart:
    """Speedup against SPLIT_K for one shape (best config per SPLIT_K), with the p20-p80 bars; stream-K's
    speedup as a labelled rule where it was measured."""
    x = alt.X(
        "split_k:Q",
        scale=alt.Scale(type="log", base=2),
        axis=alt.Axis(values=[int(s) for s in curve.split_k]),
        title="SPLIT_K",
    )
    tips = [
        alt.Tooltip("split_k:Q"),
        alt.Tooltip("speedup:Q", format=".3f"),
        alt.Tooltip("ms:Q", format=".4g"),
        alt.Tooltip("variant:N"),
        alt.Tooltip("config_key:N"),
    ]
    curve = parts.only_columns(curve, "split_k speedup speedup_lo speedup_hi ms variant config_key")
    yscale, yaxis = parts.ratio_scale(
        pd.concat([curve.speedup_lo, curve.speedup_hi, pd.Series([streamk_speedup])]), log=False
    )
    base = alt.Chart(curve, description="speedup per SPLIT_K")
    line = base.mark_line(point=alt.OverlayMarkDef(size=70)).encode(
        x=x,
        y=alt.Y(
            "speedup:Q",
            scale=yscale,
            axis=yaxis,
            title=parts.wrapped("best unsplit ms / best ms at this SPLIT_K"),
        ),
        tooltip=tips,
    )
    band = base.mark_rule(strokeWidth=2, opacity=0.6).encode(
        x=x, y=alt.Y("speedup_lo:Q"), y2=alt.Y2("speedup_hi:Q")
    )
    layers = [
        parts.noise_band("speedup"),
        band,
        line,
        parts.reference_rule("y", "speedup", 1.0, "speedup 1", "speedup 1"),
    ]
    if pd.notna(streamk_speedup) and streamk_speedup > 0:
        layers.append(
            parts.reference_rule(
                "y", "speedup", float(streamk_speedup), f"stream-K {streamk_speedup:.2f}", "stream-K"
            )
        )
    return alt.layer(*layers).properties(
        title=parts.chart_title(f"{shape}: speedup against SPLIT_K (bars: p20-p80)", note),
        height=240,
        autosize=parts.ROW_FIT,
    )
