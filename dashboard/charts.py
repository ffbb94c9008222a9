"""The dashboard's Altair charts: DataFrames from dashboard.frames in, layered charts out.

Every layer carries a `description` naming what it draws, so a test can find the data each layer
receives in the rendered spec. `note` is a subtitle (the interpreter label) shown on the chart
itself, so a screenshot of it cannot be mistaken for GPU timings.
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
# Legend swatches at full opacity whatever the marks' (faint dots gave 35% swatches).
LEGEND = alt.Legend(symbolOpacity=1)
NO_TIP = alt.value(None)  # reference marks: no tooltip (Streamlit's theme gives every mark one)
# Streamlit sizes charts with autosize "fit": a height holds the x axis, its title and the chart's
# title too, so a chart of N rows gets N steps plus this much.
AXES_PX = 90
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


def _only(df: pd.DataFrame, columns: str) -> pd.DataFrame:
    """The rows with just the columns a chart uses (space-separated names): the spec carries its data,
    so every extra column is Arrow bytes to send and Vega data to parse."""
    return df[[c for c in columns.split() if c in df.columns]]


# An axis title longer than its axis pushes Vega's layout out of Streamlit's frame: a y title of 70
# characters on a 420 px split-K chart moved the chart's own title above the SVG, where it was clipped.
# At the axis label font (11 px, about 6.5 px a character) 40 characters are 260 px: shorter than any
# chart here is high, so longer titles are broken into lines of 40.
AXIS_TITLE_CHARS = 40


def _lines(text: str) -> str | list[str]:
    """An axis title as lines no longer than AXIS_TITLE_CHARS (one string when it fits on one)."""
    lines = textwrap.wrap(text, AXIS_TITLE_CHARS)
    return lines[0] if len(lines) == 1 else lines


def _title(text: str, note: str) -> alt.Title:
    return alt.Title(text, subtitle=note or alt.Undefined, subtitleColor="#c0392b")


def _rule(channel: str, field: str, value: float, label: str, description: str) -> alt.LayerChart:
    """A dashed reference line at field = value on one axis, with its label (no tooltip)."""
    base = alt.Chart(pd.DataFrame({field: [value], "label": [label]}), description=description)
    at = {channel: alt.X(f"{field}:Q") if channel == "x" else alt.Y(f"{field}:Q")}
    rule = base.mark_rule(**RULE).encode(**at, tooltip=NO_TIP)
    # Labels where the two rules cannot meet: the vertical one's at the bottom, the horizontal one's at
    # the left (on log axes both rules often sit at a corner of the data).
    if channel == "x":
        text = base.mark_text(align="left", baseline="bottom", dx=4, dy=-4, color="#666").encode(
            **at, y=alt.value("height"), text="label:N", tooltip=NO_TIP
        )
    else:
        text = base.mark_text(align="left", baseline="bottom", dx=4, dy=-2, color="#666").encode(
            **at, x=alt.value(0), text="label:N", tooltip=NO_TIP
        )
    return alt.layer(rule, text)


def _noise_band(field: str, description: str = "within noise") -> alt.Chart:
    """A grey band 1 +- NOISE on a ratio axis: a ratio inside it is run-to-run noise (2-3% on an H200)."""
    data = pd.DataFrame({field: [1 - frames.NOISE], f"{field}_top": [1 + frames.NOISE]})
    return (
        alt.Chart(data, description=description)
        .mark_rect(color="#bbb", opacity=0.25)
        .encode(y=alt.Y(f"{field}:Q"), y2=f"{field}_top:Q", tooltip=NO_TIP)
    )


def _parity(lo: float, hi: float, x: str, y: str, description: str) -> alt.Chart:
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


def _fidelity_columns(prefix: str = "") -> str:
    return " ".join(f"{prefix}{c}" for c in ("stream_time", "host_time", "energy", "power", "timing_regime"))


# ---- split-K ----


# The split-K chart writes the shape next to its largest dots: 8 labels stay legible on 600 px.
SHAPE_LABELS = 8


def splitk_scatter(table: pd.DataFrame, blocks: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Per shape, best split over best unsplit against tiles per SM of the fastest unsplit grid (the
    dots the table lists, with p20-p80 bars); faint: each block shape's split against its own unsplit
    time (the splitk_speedup view). Rules at one tile per SM and speedup 1, a band where it is noise."""
    pts = _only(
        table[(table.tiles_per_sm > 0) & (table.speedup > 0)],
        "shape m n k gflop tiles_per_sm speedup speedup_lo speedup_hi verdict unsplit_ms unsplit_config "
        "split_ms split_config split_split_k unsplit_sm_clock_mhz throttled eager_speedup "
        "unsplit_eager_config split_eager_config "
        + _fidelity_columns("unsplit_")
        + " "
        + _fidelity_columns("split_"),
    )
    light = _only(
        blocks[(blocks.tiles_per_sm > 0) & (blocks.speedup > 0)],
        "shape m n k block_m block_n tiles_per_sm best_split_k config speedup unsplit_ms split_ms",
    )
    eager = pts[pts.eager_speedup > 0]
    yscale, yaxis = ratio_scale(
        pd.concat([pts.speedup_lo, pts.speedup_hi, light.speedup, eager.eager_speedup])
    )
    x = alt.X(
        "tiles_per_sm:Q",
        scale=data_log_scale(pd.concat([pts.tiles_per_sm, light.tiles_per_sm, pd.Series([1.0])])),
        title="output tiles per SM of the unsplit grid",
    )
    colour = alt.Color("k:O", title="K", scale=colour_scale(pts.k.nunique()), legend=LEGEND)
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
    bars = base.mark_rule(strokeWidth=2).encode(x=x, y="speedup_lo:Q", y2="speedup_hi:Q", color=colour)
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
            title=_lines("split-K speedup: best unsplit ms / best split ms (faint: same blocks)"),
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
            *fidelity_tips("unsplit_", "unsplit"),
            *fidelity_tips("split_", "split"),
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
    largest = pts.nlargest(SHAPE_LABELS, "gflop", keep="first")
    labels = (
        alt.Chart(largest, description="shape labels")
        .mark_text(align="left", dx=9, dy=-9, fontSize=10, color="#333")
        .encode(x=x, y=alt.Y("speedup:Q", scale=yscale), text="shape:N", tooltip=NO_TIP)
    )
    return alt.layer(
        _noise_band("speedup"),
        per_block,
        bars,
        best,
        labels,
        *([eager_dots] if len(eager) else []),
        _rule("x", "tiles_per_sm", 1.0, "1 tile / SM", "one tile per SM"),
        _rule("y", "speedup", 1.0, "speedup 1", "speedup 1"),
    ).properties(
        title=_title("When split-K pays: fewer output tiles than SMs (diamonds: eager time per call)", note),
        height=420,
    )


def splitk_curve(curve: pd.DataFrame, shape: str, streamk_speedup: float, note: str = "") -> alt.LayerChart:
    """Speedup against SPLIT_K for one shape (best config per SPLIT_K), with the p20-p80 bars; stream-K's
    speedup as a labelled rule where it was measured."""
    x = alt.X(
        "split_k:Q",
        scale=alt.Scale(type="log", base=2),
        axis=alt.Axis(values=[int(s) for s in curve.split_k]),
        title="SPLIT_K",
    )
    tips = [
        "split_k:Q",
        alt.Tooltip("speedup:Q", format=".3f"),
        alt.Tooltip("ms:Q", format=".4g"),
        "variant:N",
        "config_key:N",
    ]
    curve = _only(curve, "split_k speedup speedup_lo speedup_hi ms variant config_key")
    yscale, yaxis = ratio_scale(
        pd.concat([curve.speedup_lo, curve.speedup_hi, pd.Series([streamk_speedup])]), log=False
    )
    base = alt.Chart(curve, description="speedup per SPLIT_K")
    line = base.mark_line(point=alt.OverlayMarkDef(size=70)).encode(
        x=x,
        y=alt.Y(
            "speedup:Q", scale=yscale, axis=yaxis, title=_lines("best unsplit ms / best ms at this SPLIT_K")
        ),
        tooltip=tips,
    )
    band = base.mark_rule(strokeWidth=2, opacity=0.6).encode(x=x, y="speedup_lo:Q", y2="speedup_hi:Q")
    layers = [_noise_band("speedup"), band, line, _rule("y", "speedup", 1.0, "speedup 1", "speedup 1")]
    if pd.notna(streamk_speedup) and streamk_speedup > 0:
        layers.append(
            _rule("y", "speedup", float(streamk_speedup), f"stream-K {streamk_speedup:.2f}", "stream-K")
        )
    return alt.layer(*layers).properties(
        title=_title(f"{shape}: speedup against SPLIT_K (bars: p20-p80)", note), height=320
    )


# ---- grouping / L2 ----


# Up to this many shapes the grouping chart colours its points by shape (tableau20 keeps 12 apart).
SHAPE_COLOURS = 12


ENERGY_GAIN_AXIS = (0.5, 2.0)  # energy gains drawn on the grouping chart (a time gain is always drawn)


def grouping_gains(gains: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Gain of GROUP_SIZE_M > 1 over 1 (same config) in time and in energy (frames.grouping_gains' long
    form: dots for time, triangles for energy) against operand bytes / L2; a rule at L2."""
    pts = _only(
        gains[(gains.operand_to_l2 > 0) & gains.gain.notna()],
        "shape m n k config block_m block_n block_k num_warps group_m measure gain time_gain energy_gain "
        "operand_to_l2 kernel_time kernel_time_group1 energy energy_group1 power power_group1 "
        "energy_per_tflop energy_per_tflop_group1 timing_regime",
    )
    tips = [
        "shape:N",
        "config:N",
        alt.Tooltip("group_m:Q", title="GROUP_SIZE_M"),
        alt.Tooltip("measure:N"),
        alt.Tooltip("time_gain:Q", format=".3f", title="time gain"),
        alt.Tooltip("energy_gain:Q", format=".3f", title="energy gain"),
        alt.Tooltip("operand_to_l2:Q", title="operands / L2", format=".3g"),
        alt.Tooltip("kernel_time:N", title="kernel time"),
        alt.Tooltip("kernel_time_group1:N", title="kernel time, GROUP_SIZE_M 1"),
        alt.Tooltip("energy:N", title="energy / launch"),
        alt.Tooltip("energy_group1:N", title="energy / launch, GROUP_SIZE_M 1"),
        alt.Tooltip("power:N", title="power"),
        alt.Tooltip("power_group1:N", title="power, GROUP_SIZE_M 1"),
        alt.Tooltip("energy_per_tflop:N", title="energy / TFLOP"),
        alt.Tooltip("energy_per_tflop_group1:N", title="energy / TFLOP, GROUP_SIZE_M 1"),
        alt.Tooltip("timing_regime:N", title="regime"),
    ]
    # The y axis over the time gains and the energy gains within 0.5-2: below the power limit an energy
    # gain is a ratio of two rough readings (3.6 for a 1.04 time gain on the H200 demo), and one such
    # outlier squeezed every time gain into a flat line at 1. Outliers are left out, and said so.
    fitted = (pts.measure == "time") | pts.gain.between(*ENERGY_GAIN_AXIS)
    yscale, yaxis = ratio_scale(pts.gain[fitted], log=False)
    if not fitted.all():
        lo, hi = ENERGY_GAIN_AXIS
        outside = f"{int((~fitted).sum())} energy gain(s) outside {lo}-{hi} not drawn"
        note = f"{note}; {outside}" if note else outside
        pts = pts[fitted]
    # The x axis over the data and the L2 line (a fixed log axis rounded out to decades put 648 points of
    # four shapes in four stripes at one end).
    xscale = data_log_scale(pd.concat([pts.operand_to_l2, pd.Series([1.0])]))
    shapes = pts.drop_duplicates("shape").sort_values("operand_to_l2")["shape"].tolist()
    # A few shapes: colour tells them apart (a legend in size order); many: colour by GROUP_SIZE_M and
    # the shape in the tooltip.
    if len(shapes) <= SHAPE_COLOURS:
        colour = alt.Color("shape:N", title="shape", scale=alt.Scale(domain=shapes, scheme="tableau20"))
    else:
        colour = alt.Color("group_m:O", title="GROUP_SIZE_M", scale=colour_scale(pts.group_m.nunique()))
    dots = (
        alt.Chart(pts, description="gain per config")
        .mark_point(filled=True, size=60, opacity=0.6)
        .encode(
            x=alt.X("operand_to_l2:Q", scale=xscale, title="operand bytes (A + B + C) / L2 size"),
            y=alt.Y(
                "gain:Q",
                scale=yscale,
                axis=yaxis,
                title=_lines("gain over GROUP_SIZE_M = 1 (value at 1 / value)"),
            ),
            color=colour.legend(LEGEND),
            shape=alt.Shape(
                "measure:N",
                title="measure",
                scale=alt.Scale(domain=list(frames.GAIN_MEASURES), range=["circle", "triangle-up"]),
                legend=LEGEND,
            ),
            tooltip=tips,
        )
    )
    return alt.layer(
        _noise_band("gain"),
        dots,
        _rule("x", "operand_to_l2", 1.0, "operands = L2", "L2 size"),
        _rule("y", "gain", 1.0, "gain 1", "gain 1"),
    ).properties(
        title=_title("Grouped program order as the operands outgrow L2: time and energy", note), height=400
    )


def grouping_heatmap(cells: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Median speedup per (GROUP_SIZE_M, problem size bin), the value written in each cell (a cell of one
    config says so in its tooltip: one measurement is no median)."""
    # Centred on 1 and at least +-10% wide: run-to-run noise (2-3% on an H200) stays pale.
    spread = max(0.1, float((cells.speedup - 1).abs().max()) if len(cells) else 0.0)
    domain = [1 - spread, 1 + spread]
    base = alt.Chart(cells, description="median speedup per cell").encode(
        # Every bin between the smallest and the largest, empty ones too: the axis is to scale.
        x=alt.X(
            "size:O",
            scale=alt.Scale(domain=frames.heatmap_bins(cells)),
            axis=alt.Axis(labelAngle=0),
            title="operand bytes / L2 (bin)",
        ),
        y=alt.Y("group_m:O", title="GROUP_SIZE_M", sort="descending"),
    )
    # Three rows at least, 40 px each, and the height is the plot's alone (autosize fit-x: Streamlit's
    # default "fit" counts axes, legend and title in the height): with two rows the y axis' title
    # (GROUP_SIZE_M, 80 px) and Vega's 200 px colour bar outgrew a 170 px chart, squeezed the rows to
    # 15 px and pushed the chart's title out of its frame. The colour bar lies under the plot.
    rows_px = 40 * max(3, cells.group_m.nunique())
    legend = alt.Legend(orient="bottom", direction="horizontal", gradientLength=200)
    rect = base.mark_rect().encode(
        color=alt.Color(
            "speedup:Q",
            scale=alt.Scale(scheme="blueorange", domain=domain),
            title="median speedup",
            legend=legend,
        ),
        tooltip=[
            "size:N",
            alt.Tooltip("group_m:Q", title="GROUP_SIZE_M"),
            alt.Tooltip("stat:N", title="value"),
            alt.Tooltip("speedup:Q", format=".3f", title="speedup"),
            alt.Tooltip("speedup_min:Q", format=".3f", title="min"),
            alt.Tooltip("speedup_max:Q", format=".3f", title="max"),
            alt.Tooltip("n_configs:Q", title="configs"),
            alt.Tooltip("n_shapes:Q", title="shapes"),
        ],
    )
    text = base.mark_text(fontSize=11).encode(text=alt.Text("speedup:Q", format=".2f"))
    return alt.layer(rect, text).properties(
        title=_title("Speedup over GROUP_SIZE_M = 1 by problem size", note),
        height=rows_px,
        autosize=alt.AutoSizeParams(type="fit-x", contains="padding"),
    )


# ---- versus cuBLAS ----


def cublas_scatter(points: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Best Triton TFLOP/s per shape against cuBLAS's on the same shape; the parity line y = x."""
    pts = _only(
        points.dropna(subset=["triton_tflops", "cublas_tflops"]),
        "shape m n k triton_variant triton_config_key triton_ms triton_tflops cublas_tflops ratio",
    )
    hi = float(max(pts.triton_tflops.max(), pts.cublas_tflops.max())) if len(pts) else 1.0
    dots = (
        alt.Chart(pts, description="best Triton against cuBLAS per shape")
        .mark_circle(size=70, opacity=0.75)
        .encode(
            x=alt.X("cublas_tflops:Q", title="cuBLAS TFLOP/s"),
            y=alt.Y("triton_tflops:Q", title="best Triton TFLOP/s"),
            color=alt.Color("triton_variant:N", title="Triton variant"),
            tooltip=[
                "shape:N",
                "triton_variant:N",
                "triton_config_key:N",
                alt.Tooltip("triton_tflops:Q", format=".1f"),
                alt.Tooltip("cublas_tflops:Q", format=".1f"),
                alt.Tooltip("ratio:Q", format=".3f", title="cuBLAS ms / Triton ms"),
            ],
        )
    )
    parity = _parity(0.0, hi, "cublas_tflops", "triton_tflops", "parity")
    return alt.layer(dots, parity).properties(
        title=_title("Best Triton config against cuBLAS (above the line: Triton wins)", note), height=380
    )


def roofline(
    points: pd.DataFrame, roofs: pd.DataFrame, note: str = "", highlight: str = ""
) -> alt.LayerChart:
    """TFLOP/s against arithmetic intensity, log-log, under the GPU's compute and bandwidth roofs."""
    pts = _only(
        points[(points.intensity > 0) & (points.tflops > 0)],
        "shape m n k provider config tflops intensity pct_peak",
    )
    both = lambda c: pd.concat([pts[c], roofs[c]]) if len(roofs) else pts[c]
    x = alt.X(
        "intensity:Q",
        scale=data_log_scale(both("intensity")),
        title="arithmetic intensity, 2MNK / operand bytes (FLOP/B)",
    )
    y = alt.Y("tflops:Q", scale=data_log_scale(both("tflops")), title="TFLOP/s")
    dots = (
        alt.Chart(pts, description="best Triton and cuBLAS per shape")
        .mark_point(filled=True, size=60, opacity=0.8)
        .encode(
            x=x,
            y=y,
            color=alt.Color("provider:N", title=None, legend=LEGEND),
            shape=alt.Shape("provider:N", title=None),
            tooltip=[
                "shape:N",
                "provider:N",
                "config:N",
                alt.Tooltip("tflops:Q", format=".1f", title="TFLOP/s"),
                alt.Tooltip("pct_peak:Q", format=".1f", title="% of peak"),
                alt.Tooltip("intensity:Q", format=".1f", title="FLOP/B"),
            ],
        )
    )
    layers: list = [dots]
    if len(roofs):
        layers.append(
            alt.Chart(roofs, description="roofs")
            .mark_line(color="#444", strokeWidth=2)
            .encode(x=x, y=y, detail="roof:N", tooltip=NO_TIP)
        )
    if highlight:
        ring = pts[pts["shape"] == highlight]
        layers.append(
            alt.Chart(ring, description="the chosen shape")
            .mark_point(size=260, color="black", strokeWidth=2)
            .encode(x=x, y=y, tooltip=NO_TIP)
        )
    return alt.layer(*layers).properties(title=_title("Roofline", note), height=400)


# Configs a shape's chart shows (the table below it has them all): 40 bars stay readable.
SHAPE_CHART_CONFIGS = 40


def shape_configs(configs: pd.DataFrame, shape: str, note: str = "") -> alt.LayerChart:
    """One shape's fastest configs: time over the fastest one with its p20-p80 bar, fastest on top; the
    grey band is run-to-run noise."""
    data = _only(
        configs.head(SHAPE_CHART_CONFIGS),
        "config variant ms ms_p20 ms_p80 vs_best rel_lo rel_hi tflops pct_peak sm_clock_mhz throttled "
        + _fidelity_columns(),
    )
    order = data.config.tolist()
    xscale, xaxis = ratio_scale(pd.concat([data.rel_lo, data.rel_hi]), log=False)
    y = alt.Y("config:N", sort=order, title=None, axis=alt.Axis(labelLimit=360))
    base = alt.Chart(data, description="configs of the shape")
    band = (
        alt.Chart(pd.DataFrame({"lo": [1.0], "hi": [1 + frames.NOISE]}), description="within noise")
        .mark_rect(color="#bbb", opacity=0.25)
        .encode(x=alt.X("lo:Q", scale=xscale), x2="hi:Q", tooltip=NO_TIP)
    )
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("rel_lo:Q", scale=xscale),
        x2="rel_hi:Q",
        y=y,
        color=alt.Color("variant:N", scale=CATEGORIES, legend=LEGEND),
    )
    dots = base.mark_point(filled=True, size=60).encode(
        x=alt.X("vs_best:Q", scale=xscale, axis=xaxis, title="time / fastest config's time (bars: p20-p80)"),
        y=y,
        color=alt.Color("variant:N", scale=CATEGORIES, legend=LEGEND),
        tooltip=[
            "config:N",
            alt.Tooltip("ms:Q", format=".4g"),
            alt.Tooltip("ms_p20:Q", format=".4g", title="p20 ms"),
            alt.Tooltip("ms_p80:Q", format=".4g", title="p80 ms"),
            alt.Tooltip("tflops:Q", format=".1f", title="TFLOP/s"),
            alt.Tooltip("pct_peak:Q", format=".1f", title="% of peak"),
            *GPU_STATE_TIPS,
            *fidelity_tips(),
        ],
    )
    return alt.layer(band, bars, dots).properties(
        title=_title(f"{shape}: the fastest {len(data)} configs", note),
        height=22 * max(1, len(data)) + AXES_PX,
    )


# ---- accuracy, sweeps, overview ----


def accuracy_points(acc: pd.DataFrame, column: str, title: str, description: str) -> alt.LayerChart:
    """One point per (variant, dtype) of an accuracy column on a log axis (frames.log_points: zero is
    drawn a decade under the smallest value and labelled "exact")."""
    data = _only(frames.log_points(acc, column), f"variant dtype {column} value shown n_checked n_wrong")
    base = alt.Chart(data, description=description)
    y = alt.Y("value:Q", scale=data_log_scale(data.value), title=title)
    tips = ["variant:N", "dtype:N", alt.Tooltip("shown:N", title=title), "n_checked:Q", "n_wrong:Q"]
    # Variant names run to 25 characters (persistent_tma_bands_pad): Vega's 180 px label limit cut them
    # to "persistent_tma_..." under a crowded axis; at -30 degrees and no limit they read whole.
    x = alt.X("variant:N", title=None, axis=alt.Axis(labelAngle=-30, labelLimit=0, labelAlign="right"))
    dots = base.mark_point(filled=True, size=90).encode(
        x=x,
        xOffset="dtype:N",
        y=y,
        color=alt.Color("dtype:N", scale=CATEGORIES, legend=LEGEND),
        shape=alt.Shape("dtype:N"),
        tooltip=tips,
    )
    exact = (
        base.transform_filter(alt.datum.shown == frames.EXACT)
        .mark_text(dy=-10, fontSize=10, color="#555")
        .encode(x=x, xOffset="dtype:N", y=y, text="shown:N", tooltip=NO_TIP)
    )
    return alt.layer(dots, exact).properties(title=title, height=300)


def compare_scatter(cmp: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Per point, run b's time over run a's (ratio_b_over_a, the table's number) against run a's time,
    coloured by verdict; grey bars: a's p20-p80, coloured bars: b's (a point is "same" where they overlap)."""
    cmp = _only(
        cmp,
        "gpu_name variant dtype m n k config_key ms_a ms_b ratio_b_over_a a_lo a_hi b_lo b_hi verdict",
    )
    base = alt.Chart(cmp, description="points of both runs")
    yscale, yaxis = ratio_scale(pd.concat([cmp.a_lo, cmp.a_hi, cmp.b_lo, cmp.b_hi]), log=False)
    x = alt.X("ms_a:Q", scale=data_log_scale(cmp.ms_a), title="run a: median ms")
    colour = alt.Color("verdict:N", scale=VERDICT_COLOURS, title="run b is")
    tips = [
        "gpu_name:N",
        "variant:N",
        "dtype:N",
        "m:Q",
        "n:Q",
        "k:Q",
        "config_key:N",
        alt.Tooltip("ms_a:Q", format=".4g", title="run a ms"),
        alt.Tooltip("ms_b:Q", format=".4g", title="run b ms"),
        alt.Tooltip("ratio_b_over_a:Q", format=".4f", title="b / a"),
        alt.Tooltip("verdict:N", title="run b is"),
    ]
    return alt.layer(
        _noise_band("ratio_b_over_a"),
        base.mark_rule(strokeWidth=7, opacity=0.25, color="#777").encode(x=x, y="a_lo:Q", y2="a_hi:Q"),
        base.mark_rule(strokeWidth=2, opacity=0.8).encode(x=x, y="b_lo:Q", y2="b_hi:Q", color=colour),
        base.mark_circle(size=45).encode(
            x=x,
            y=alt.Y(
                "ratio_b_over_a:Q",
                scale=yscale,
                axis=yaxis,
                title=_lines("run b time / run a time (below 1: b is faster)"),
            ),
            color=colour,
            tooltip=tips,
        ),
        _rule("y", "ratio_b_over_a", 1.0, "same time", "same time"),
    ).properties(title=_title("Run b over run a, per point (below 1: b is faster)", note), height=400)


def count_bars(counts: dict[str, int], field: str, description: str) -> alt.Chart:
    data = pd.DataFrame({field: list(counts), "measurements": list(counts.values())})
    return (
        alt.Chart(data, description=description)
        .mark_bar()
        .encode(
            x=alt.X("measurements:Q"),
            y=alt.Y(f"{field}:N", sort="-x", title=None),
            tooltip=[f"{field}:N", "measurements:Q"],
        )
        .properties(title=description, height=26 * max(1, len(data)) + AXES_PX)
    )
