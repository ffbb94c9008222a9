"""The dashboard's Altair charts for the Grouping / L2, Versus cuBLAS, Shape, Accuracy, Compare and
Overview pages: DataFrames from dashboard.frames in, layered charts out (the Split-K page's are in
dashboard.splitk_charts, the Search page's in dashboard.search_charts; the pieces all of them share in
dashboard.chart_parts).

Every layer carries a `description` naming what it draws, so a test can find the data each layer
receives in the rendered spec. `note` is a subtitle (the interpreter label) shown on the chart
itself, so a screenshot of it cannot be mistaken for GPU timings.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from dashboard import chart_parts as parts
from dashboard import frames

# ---- grouping / L2 ----


# Up to this many shapes the grouping chart colours its points by shape (tableau20 keeps 12 apart).
SHAPE_COLOURS = 12


ENERGY_GAIN_AXIS = (0.5, 2.0)  # energy gains drawn on the grouping chart (a time gain is always drawn)


def grouping_gains(gains: pd.DataFrame, note: str = "", run: str = "") -> alt.LayerChart:
    """Gain of GROUP_SIZE_M > 1 over 1 (same config) per shape, in time and in energy (frames.grouping_gains'
    long form: the median over the shape's configs, dots for time, triangles for energy; a vertical line
    from the worst config's time gain to the best's) against operand bytes / L2; a rule at L2. `run`: the
    run drawn, the title's second line."""
    pts = parts.only_columns(
        gains[(gains.operand_to_l2 > 0) & gains.gain.notna()],
        "shape m n k group_m measure gain gain_lo gain_hi configs best_config time_gain energy_gain "
        "operand_to_l2",
    )
    # Channel objects, never "field:type" strings or dicts: Altair turns each of those into an object by
    # hashing its ~570 schema classes (2 ms a string; half of this chart's 0.12 s build).
    tips = [
        alt.Tooltip("shape:N"),
        alt.Tooltip("group_m:Q", title="GROUP_SIZE_M"),
        alt.Tooltip("measure:N"),
        alt.Tooltip("gain:Q", format=".3f", title="median gain"),
        alt.Tooltip("configs:Q", title="configs"),
        alt.Tooltip("gain_lo:Q", format=".3f", title="worst config's gain"),
        alt.Tooltip("gain_hi:Q", format=".3f", title="best config's gain"),
        alt.Tooltip("best_config:N", title="best config"),
        alt.Tooltip("time_gain:Q", format=".3f", title="median time gain"),
        alt.Tooltip("energy_gain:Q", format=".3f", title="median energy gain"),
        alt.Tooltip("operand_to_l2:Q", title="operands / L2", format=".3g"),
    ]
    # The y axis over the time gains (each shape's worst and best config too) and the energy gains within
    # 0.5-2: below the power limit an energy gain is a ratio of two rough readings (3.6 for a 1.04 time
    # gain on the H200 demo), and one such outlier squeezed every time gain into a flat line at 1.
    # Outliers are left out, and said so.
    time = pts.measure == "time"
    fitted = time | pts.gain.between(*ENERGY_GAIN_AXIS)
    yscale, yaxis = parts.ratio_scale(
        pd.concat([pts.gain[fitted], pts.gain_lo[time], pts.gain_hi[time]]), log=False
    )
    if not fitted.all():
        lo, hi = ENERGY_GAIN_AXIS
        outside = f"{int((~fitted).sum())} energy gain(s) outside {lo}-{hi} not drawn"
        note = f"{note}; {outside}" if note else outside
        pts = pts[fitted]
    # The x axis over the data and the L2 line (a fixed log axis rounded out to decades put 648 points of
    # four shapes in four stripes at one end).
    xscale = parts.data_log_scale(pd.concat([pts.operand_to_l2, pd.Series([1.0])]))
    shapes = pts.drop_duplicates("shape").sort_values("operand_to_l2")["shape"].tolist()
    # A few shapes: colour tells them apart (a legend in size order); many: colour by GROUP_SIZE_M and
    # the shape in the tooltip.
    if len(shapes) <= SHAPE_COLOURS:
        colour = alt.Color("shape:N", title="shape", scale=alt.Scale(domain=shapes, scheme="tableau20"))
    else:
        colour = alt.Color("group_m:O", title="GROUP_SIZE_M", scale=parts.colour_scale(pts.group_m.nunique()))
    x = alt.X("operand_to_l2:Q", scale=xscale, title="operand bytes (A + B + C) / L2 size")
    title = parts.wrapped("gain over GROUP_SIZE_M = 1 (value at 1 / value), median over configs")
    dots = (
        alt.Chart(pts, description="median gain per shape")
        .mark_point(filled=True, size=60, opacity=0.7)
        .encode(
            x=x,
            y=alt.Y("gain:Q", scale=yscale, axis=yaxis, title=title),
            color=colour.legend(parts.LEGEND),
            shape=alt.Shape(
                "measure:N",
                title="measure",
                scale=alt.Scale(domain=list(frames.GAIN_MEASURES), range=["circle", "triangle-up"]),
                legend=parts.LEGEND,
            ),
            tooltip=tips,
        )
    )
    # A shape of one config has no range to draw (a line of no length).
    spread = pts[(pts.measure == "time") & (pts.gain_hi > pts.gain_lo)]
    ranges = (
        alt.Chart(spread, description="time gain range over configs")
        .mark_rule(opacity=0.35)
        .encode(
            x=x,
            # The dots' axis and title: a layer's own title would be joined to theirs ("gain, gain_lo").
            y=alt.Y("gain_lo:Q", scale=yscale, axis=yaxis, title=title),
            y2=alt.Y2("gain_hi:Q"),
            # The dots' legend too: one layer without it hid the merged colour legend.
            color=colour.legend(parts.LEGEND),
            tooltip=tips,
        )
    )
    return alt.layer(
        parts.noise_band("gain"),
        ranges,
        dots,
        parts.reference_rule("x", "operand_to_l2", 1.0, "operands = L2", "L2 size"),
        parts.reference_rule("y", "gain", 1.0, "gain 1", "gain 1"),
    ).properties(
        title=parts.chart_title(
            "Grouped program order as the operands outgrow L2: time and energy", note, run
        ),
        height=320,
        autosize=parts.ROW_FIT,
    )


def grouping_heatmap(cells: pd.DataFrame, note: str = "", run: str = "") -> alt.LayerChart:
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
    plot_px = parts.rows_px(max(3, cells.group_m.nunique()), 40)
    legend = alt.Legend(orient="bottom", direction="horizontal", gradientLength=200)
    rect = base.mark_rect().encode(
        color=alt.Color(
            "speedup:Q",
            scale=alt.Scale(scheme="blueorange", domain=domain),
            title="median speedup",
            legend=legend,
        ),
        tooltip=[
            alt.Tooltip("size:N"),
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
        title=parts.chart_title("Speedup over GROUP_SIZE_M = 1 by problem size", note, run),
        height=plot_px,
        autosize=parts.ROW_FIT,
    )


# ---- versus cuBLAS ----

ROOF_LEGEND = "roofs: compute, bandwidth"  # the roofs' entry in the roofline's one legend


def cublas_scatter(points: pd.DataFrame, note: str = "", pick: bool = False) -> alt.LayerChart:
    """Best Triton TFLOP/s per shape against cuBLAS's on the same shape; the parity line y = x."""
    pts = parts.only_columns(
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
    parity = parts.parity_line(0.0, hi, "cublas_tflops", "triton_tflops", "parity")
    return alt.layer(parts.pickable(dots, pick), parity).properties(
        title=parts.chart_title("Best Triton config against cuBLAS (above the line: Triton wins)", note),
        height=300,
        autosize=parts.ROW_FIT,
    )


def roofline(
    points: pd.DataFrame, roofs: pd.DataFrame, note: str = "", highlight: str = "", pick: bool = False
) -> alt.LayerChart:
    """TFLOP/s against arithmetic intensity, log-log, under the GPU's compute and bandwidth roofs."""
    pts = parts.only_columns(
        points[(points.intensity > 0) & (points.tflops > 0)],
        "shape m n k provider config tflops intensity pct_peak",
    )
    both = lambda c: pd.concat([pts[c], roofs[c]]) if len(roofs) else pts[c]
    x = alt.X(
        "intensity:Q",
        scale=parts.data_log_scale(both("intensity")),
        title="arithmetic intensity, 2MNK / operand bytes (FLOP/B)",
    )
    y = alt.Y("tflops:Q", scale=parts.data_log_scale(both("tflops")), title="TFLOP/s")
    # One legend for every layer: the providers, the roofs and the ring around the chosen shape.
    providers = sorted(pts.provider.unique())
    extra = ([ROOF_LEGEND] if len(roofs) else []) + ([f"{highlight} (chosen)"] if highlight else [])
    colour_scale_ = alt.Scale(
        domain=[*providers, *extra],
        range=[*parts.CATEGORY_COLOURS[: len(providers)], *(["#444"] if len(roofs) else []), "black"][
            : len(providers) + len(extra)
        ],
    )
    dots = (
        alt.Chart(pts, description="best Triton and cuBLAS per shape")
        .mark_point(filled=True, size=60, opacity=0.8)
        .encode(
            x=x,
            y=y,
            color=alt.Color("provider:N", title=None, legend=parts.LEGEND, scale=colour_scale_),
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
    layers: list = [parts.pickable(dots, pick)]
    if len(roofs):
        layers.append(
            alt.Chart(roofs, description="roofs")
            .mark_line(strokeWidth=2)
            .encode(x=x, y=y, detail="roof:N", color=alt.datum(ROOF_LEGEND), tooltip=parts.NO_TIP)
        )
    if highlight:
        ring = pts[pts["shape"] == highlight]
        layers.append(
            alt.Chart(ring, description="the chosen shape")
            .mark_point(size=260, strokeWidth=2)
            .encode(x=x, y=y, color=alt.datum(f"{highlight} (chosen)"), tooltip=parts.NO_TIP)
        )
    return alt.layer(*layers).properties(
        title=parts.chart_title("Roofline", note), height=320, autosize=parts.ROW_FIT
    )


# Configs a shape's chart shows (the table below it has them all): 40 bars stay readable.
SHAPE_CHART_CONFIGS = 40


def shape_configs(configs: pd.DataFrame, shape: str, note: str = "") -> alt.LayerChart:
    """One shape's fastest configs: time over the fastest one with its p20-p80 bar, fastest on top; the
    grey band is run-to-run noise."""
    data = parts.only_columns(
        configs.head(SHAPE_CHART_CONFIGS),
        "config variant ms ms_p20 ms_p80 vs_best rel_lo rel_hi tflops pct_peak sm_clock_mhz throttled "
        + parts.fidelity_columns(),
    )
    order = data.config.tolist()
    xscale, xaxis = parts.ratio_scale(pd.concat([data.rel_lo, data.rel_hi]), log=False)
    y = alt.Y("config:N", sort=order, title=None, axis=alt.Axis(labelLimit=360))
    base = alt.Chart(data, description="configs of the shape")
    band = (
        alt.Chart(pd.DataFrame({"lo": [1.0], "hi": [1 + frames.NOISE]}), description="within noise")
        .mark_rect(color="#bbb", opacity=0.25)
        .encode(x=alt.X("lo:Q", scale=xscale), x2="hi:Q", tooltip=parts.NO_TIP)
    )
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("rel_lo:Q", scale=xscale),
        x2="rel_hi:Q",
        y=y,
        color=alt.Color("variant:N", scale=parts.CATEGORIES, legend=parts.LEGEND),
    )
    dots = base.mark_point(filled=True, size=60).encode(
        x=alt.X("vs_best:Q", scale=xscale, axis=xaxis, title="time / fastest config's time (bars: p20-p80)"),
        y=y,
        color=alt.Color("variant:N", scale=parts.CATEGORIES, legend=parts.LEGEND),
        tooltip=[
            "config:N",
            alt.Tooltip("ms:Q", format=".4g"),
            alt.Tooltip("ms_p20:Q", format=".4g", title="p20 ms"),
            alt.Tooltip("ms_p80:Q", format=".4g", title="p80 ms"),
            alt.Tooltip("tflops:Q", format=".1f", title="TFLOP/s"),
            alt.Tooltip("pct_peak:Q", format=".1f", title="% of peak"),
            *parts.GPU_STATE_TIPS,
            *parts.fidelity_tips(),
        ],
    )
    return alt.layer(band, bars, dots).properties(
        title=parts.chart_title(f"{shape}: the fastest {len(data)} configs", note),
        height=parts.rows_px(len(data), 22),
        autosize=parts.ROW_FIT,
    )


# ---- accuracy, sweeps, overview ----


def accuracy_points(acc: pd.DataFrame, column: str, title: str, description: str) -> alt.LayerChart:
    """One point per (variant, dtype) of an accuracy column on a log axis (frames.log_points: zero is
    drawn a decade under the smallest value and labelled "exact")."""
    data = parts.only_columns(
        frames.log_points(acc, column), f"variant dtype {column} value shown n_checked n_wrong"
    )
    base = alt.Chart(data, description=description)
    y = alt.Y("value:Q", scale=parts.data_log_scale(data.value), title=title)
    tips = ["variant:N", "dtype:N", alt.Tooltip("shown:N", title=title), "n_checked:Q", "n_wrong:Q"]
    # Variant names run to 25 characters (persistent_tma_bands_pad): Vega's 180 px label limit cut them
    # to "persistent_tma_..." under a crowded axis; at -30 degrees and no limit they read whole.
    x = alt.X("variant:N", title=None, axis=alt.Axis(labelAngle=-30, labelLimit=0, labelAlign="right"))
    dots = base.mark_point(filled=True, size=90).encode(
        x=x,
        xOffset="dtype:N",
        y=y,
        color=alt.Color("dtype:N", scale=parts.CATEGORIES, legend=parts.LEGEND),
        shape=alt.Shape("dtype:N"),
        tooltip=tips,
    )
    exact = (
        base.transform_filter(alt.datum.shown == frames.EXACT)
        .mark_text(dy=-10, fontSize=10, color="#555")
        .encode(x=x, xOffset="dtype:N", y=y, text="shown:N", tooltip=parts.NO_TIP)
    )
    return alt.layer(dots, exact).properties(title=title, height=220, autosize=parts.ROW_FIT)


# The regression gate's judgements (db.queries.compare), worst first.
JUDGEMENT_COLOURS = alt.Scale(
    domain=["regressed", "not judged", "same", "improved"], range=["#d1495b", "#e9a03b", "#9a9a9a", "#2a9d4b"]
)


def compare_scatter(cmp: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Per point, run b's time over run a's (ratio_b_over_a, the table's number) against run a's time,
    coloured by the gate's judgement (`farm compare`'s); grey bars: a's p20-p80, coloured bars: b's (a
    point is "same" where they overlap, or where b/a is within the threshold)."""
    cmp = parts.only_columns(
        cmp,
        "gpu_name variant dtype m n k config_key ms_a ms_b ratio_b_over_a a_lo a_hi b_lo b_hi verdict "
        "judgement reason",
    )
    base = alt.Chart(cmp, description="points of both runs")
    yscale, yaxis = parts.ratio_scale(pd.concat([cmp.a_lo, cmp.a_hi, cmp.b_lo, cmp.b_hi]), log=False)
    x = alt.X("ms_a:Q", scale=parts.data_log_scale(cmp.ms_a), title="run a: median ms")
    colour = alt.Color("judgement:N", scale=JUDGEMENT_COLOURS, title="run b")
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
        alt.Tooltip("judgement:N", title="run b"),
        alt.Tooltip("reason:N", title="why"),
    ]
    return alt.layer(
        parts.noise_band("ratio_b_over_a"),
        base.mark_rule(strokeWidth=7, opacity=0.25, color="#777").encode(x=x, y="a_lo:Q", y2="a_hi:Q"),
        base.mark_rule(strokeWidth=2, opacity=0.8).encode(x=x, y="b_lo:Q", y2="b_hi:Q", color=colour),
        base.mark_circle(size=45).encode(
            x=x,
            y=alt.Y(
                "ratio_b_over_a:Q",
                scale=yscale,
                axis=yaxis,
                title=parts.wrapped("run b time / run a time (below 1: b is faster)"),
            ),
            color=colour,
            tooltip=tips,
        ),
        parts.reference_rule("y", "ratio_b_over_a", 1.0, "same time", "same time"),
    ).properties(
        title=parts.chart_title("Run b over run a, per point (below 1: b is faster)", note),
        height=320,
        autosize=parts.ROW_FIT,
    )


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
        .properties(title=description, height=parts.rows_px(len(data), 26), autosize=parts.ROW_FIT)
    )
