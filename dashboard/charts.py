"""The dashboard's Altair charts: DataFrames from db.dashboard_queries in, layered charts out.

Every layer carries a `description` naming what it draws, so a test can find the data each layer
receives in the rendered spec. `note` is a subtitle (the interpreter label) shown on the chart
itself, so a screenshot of it cannot be mistaken for GPU timings.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

LOG = alt.Scale(type="log")
RULE = {"strokeDash": [5, 4], "color": "#888"}
VERDICT_COLOURS = alt.Scale(domain=["faster", "same", "slower"], range=["#2a9d4b", "#9a9a9a", "#d1495b"])


def _only(df: pd.DataFrame, columns: str) -> pd.DataFrame:
    """The rows with just the columns a chart uses (space-separated names): the spec carries its data,
    so every extra column is Arrow bytes to send and Vega data to parse."""
    return df[columns.split()]


def _title(text: str, note: str) -> alt.Title:
    return alt.Title(text, subtitle=note or alt.Undefined, subtitleColor="#c0392b")


def _rule(channel: str, field: str, value: float, label: str, description: str) -> alt.LayerChart:
    """A dashed reference line at field = value on one axis, with its label."""
    base = alt.Chart(pd.DataFrame({field: [value], "label": [label]}), description=description)
    at = {channel: alt.X(f"{field}:Q") if channel == "x" else alt.Y(f"{field}:Q")}
    rule = base.mark_rule(**RULE).encode(**at)
    # Labels where the two rules cannot meet: the vertical one's at the bottom, the horizontal one's at
    # the left (on log axes both rules often sit at a corner of the data).
    if channel == "x":
        text = base.mark_text(align="left", baseline="bottom", dx=4, dy=-4, color="#666").encode(
            **at, y=alt.value("height"), text="label:N"
        )
    else:
        text = base.mark_text(align="left", baseline="bottom", dx=4, dy=-2, color="#666").encode(
            **at, x=alt.value(0), text="label:N"
        )
    return alt.layer(rule, text)


def _parity(lo: float, hi: float, x: str, y: str, description: str) -> alt.Chart:
    """The y = x line from lo to hi (both axes share the unit)."""
    data = pd.DataFrame({x: [lo, hi], y: [lo, hi]})
    return alt.Chart(data, description=description).mark_line(**RULE).encode(x=f"{x}:Q", y=f"{y}:Q")


# ---- split-K ----

_SPLITK_TIPS = [
    alt.Tooltip("shape:N"),
    alt.Tooltip("best_split_k:Q", title="best SPLIT_K"),
    alt.Tooltip("config:N"),
    alt.Tooltip("speedup:Q", format=".3f"),
    alt.Tooltip("tiles_per_sm:Q", title="tiles / SM", format=".3g"),
    alt.Tooltip("unsplit_ms:Q", title="unsplit ms", format=".4g"),
    alt.Tooltip("split_ms:Q", title="split ms", format=".4g"),
]


def splitk_scatter(points: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Speedup of the best split against tiles per SM of the unsplit grid, one dot per (shape, block
    shape), the best split per shape outlined; rules at one tile per SM and at speedup 1."""
    pts = _only(
        points[(points.tiles_per_sm > 0) & (points.speedup > 0)],
        "shape m n k block_m block_n tiles_per_sm best_split_k config speedup unsplit_ms split_ms "
        "best_for_shape",
    )
    enc = dict(
        x=alt.X("tiles_per_sm:Q", scale=LOG, title="output tiles per SM of the unsplit grid"),
        y=alt.Y("speedup:Q", scale=LOG, title="split-K speedup (best unsplit / best split)"),
        color=alt.Color("k:O", title="K", scale=alt.Scale(scheme="viridis")),
        tooltip=_SPLITK_TIPS,
    )
    every = alt.Chart(pts, description="every block shape").mark_circle(size=35, opacity=0.35).encode(**enc)
    best = (
        alt.Chart(pts[pts.best_for_shape], description="best split per shape")
        .mark_point(filled=True, size=130, opacity=1, stroke="black", strokeWidth=1)
        .encode(**enc)
    )
    return alt.layer(
        every,
        best,
        _rule("x", "tiles_per_sm", 1.0, "1 tile / SM", "one tile per SM"),
        _rule("y", "speedup", 1.0, "speedup 1", "speedup 1"),
    ).properties(title=_title("When split-K pays: fewer output tiles than SMs", note), height=420)


def splitk_curve(curve: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Speedup against SPLIT_K for one shape (best config per SPLIT_K), with the p20-p80 band."""
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
    base = alt.Chart(curve, description="speedup per SPLIT_K")
    line = base.mark_line(point=alt.OverlayMarkDef(size=70)).encode(
        x=x, y=alt.Y("speedup:Q", title="speedup over the best SPLIT_K = 1"), tooltip=tips
    )
    band = base.mark_rule(strokeWidth=2, opacity=0.6).encode(x=x, y="speedup_lo:Q", y2="speedup_hi:Q")
    return alt.layer(band, line, _rule("y", "speedup", 1.0, "speedup 1", "speedup 1")).properties(
        title=_title("Speedup against SPLIT_K (bars: p20-p80)", note), height=320
    )


# ---- grouping / L2 ----


def grouping_scatter(points: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Speedup of GROUP_SIZE_M > 1 over 1 (same config) against operand bytes / L2; a rule at L2."""
    pts = _only(
        points[(points.operand_to_l2 > 0) & points.speedup.notna()],
        "shape m n k config block_m block_n block_k num_warps group_m speedup operand_to_l2 ms ms_group1",
    )
    tips = [
        "shape:N",
        "config:N",
        alt.Tooltip("group_m:Q", title="GROUP_SIZE_M"),
        alt.Tooltip("speedup:Q", format=".3f"),
        alt.Tooltip("operand_to_l2:Q", title="operands / L2", format=".3g"),
        alt.Tooltip("ms:Q", format=".4g"),
        alt.Tooltip("ms_group1:Q", title="ms, GROUP_SIZE_M 1", format=".4g"),
    ]
    dots = (
        alt.Chart(pts, description="speedup per config")
        .mark_circle(size=40, opacity=0.5)
        .encode(
            x=alt.X("operand_to_l2:Q", scale=LOG, title="operand bytes (A + B + C) / L2 size"),
            y=alt.Y("speedup:Q", scale=alt.Scale(zero=False), title="speedup over GROUP_SIZE_M = 1"),
            color=alt.Color("group_m:O", title="GROUP_SIZE_M"),
            tooltip=tips,
        )
    )
    return alt.layer(
        dots,
        _rule("x", "operand_to_l2", 1.0, "operands = L2", "L2 size"),
        _rule("y", "speedup", 1.0, "speedup 1", "speedup 1"),
    ).properties(title=_title("Grouped program order as the operands outgrow L2", note), height=400)


def grouping_heatmap(cells: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Median speedup per (GROUP_SIZE_M, problem size bin), the value written in each cell."""
    # Centred on 1 and at least +-10% wide: run-to-run noise (2-3% on an H200) stays pale.
    spread = max(0.1, float((cells.speedup - 1).abs().max()) if len(cells) else 0.0)
    domain = [1 - spread, 1 + spread]
    base = alt.Chart(cells, description="median speedup per cell").encode(
        x=alt.X("size:O", sort=alt.EncodingSortField("size_lo"), title="operand bytes / L2 (bin)"),
        y=alt.Y("group_m:O", title="GROUP_SIZE_M", sort="descending"),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "speedup:Q", scale=alt.Scale(scheme="blueorange", domain=domain), title="median speedup"
        ),
        tooltip=[
            "size:N",
            alt.Tooltip("group_m:Q", title="GROUP_SIZE_M"),
            alt.Tooltip("speedup:Q", format=".3f", title="median"),
            alt.Tooltip("speedup_min:Q", format=".3f", title="min"),
            alt.Tooltip("speedup_max:Q", format=".3f", title="max"),
            alt.Tooltip("n_configs:Q", title="configs"),
            alt.Tooltip("n_shapes:Q", title="shapes"),
        ],
    )
    text = base.mark_text(fontSize=11).encode(text=alt.Text("speedup:Q", format=".2f"))
    return alt.layer(rect, text).properties(
        title=_title("Speedup over GROUP_SIZE_M = 1 by problem size", note), height=alt.Step(34)
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


def roofline(points: pd.DataFrame, roofs: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """TFLOP/s against arithmetic intensity, log-log, under the GPU's compute and bandwidth roofs."""
    pts = _only(
        points[(points.intensity > 0) & (points.tflops > 0)],
        "shape m n k provider config tflops intensity",
    )
    x = alt.X("intensity:Q", scale=LOG, title="arithmetic intensity, 2MNK / operand bytes (FLOP/B)")
    y = alt.Y("tflops:Q", scale=LOG, title="TFLOP/s")
    dots = (
        alt.Chart(pts, description="best Triton and cuBLAS per shape")
        .mark_point(filled=True, size=60, opacity=0.8)
        .encode(
            x=x,
            y=y,
            color=alt.Color("provider:N", title=None),
            shape=alt.Shape("provider:N", title=None),
            tooltip=[
                "shape:N",
                "provider:N",
                "config:N",
                alt.Tooltip("tflops:Q", format=".1f"),
                alt.Tooltip("intensity:Q", format=".1f"),
            ],
        )
    )
    layers: list = [dots]
    if len(roofs):
        layers.append(
            alt.Chart(roofs, description="roofs")
            .mark_line(color="#444", strokeWidth=2)
            .encode(x=x, y=y, detail="roof:N", tooltip=["roof:N", alt.Tooltip("tflops:Q", format=".1f")])
        )
    return alt.layer(*layers).properties(title=_title("Roofline", note), height=400)


# ---- accuracy, sweeps, overview ----


def accuracy_bars(acc: pd.DataFrame, column: str, title: str, description: str) -> alt.Chart:
    """One bar per (variant, dtype) of a positive accuracy column, on a log axis."""
    data = acc[acc[column] > 0]
    return (
        alt.Chart(data, description=description)
        .mark_bar()
        .encode(
            x=alt.X("variant:N", title=None),
            xOffset="dtype:N",
            y=alt.Y(f"{column}:Q", scale=LOG, title=title),
            color=alt.Color("dtype:N"),
            tooltip=[
                "variant:N",
                "dtype:N",
                alt.Tooltip(f"{column}:Q", format=".3g"),
                "n_checked:Q",
                "n_wrong:Q",
            ],
        )
        .properties(title=title, height=300)
    )


def compare_scatter(cmp: pd.DataFrame, note: str = "") -> alt.LayerChart:
    """Per point, sweep b's time over sweep a's against sweep a's time, coloured by verdict; grey bars:
    a's p20-p80, coloured bars: b's (a point is "same" where they overlap)."""
    cmp = _only(
        cmp,
        "gpu_name variant dtype m n k config_key ms_a ms_b b_over_a a_lo a_hi b_lo b_hi verdict",
    )
    base = alt.Chart(cmp, description="points of both sweeps")
    x = alt.X("ms_a:Q", scale=LOG, title="sweep a: median ms")
    colour = alt.Color("verdict:N", scale=VERDICT_COLOURS, title="sweep b is")
    tips = [
        "gpu_name:N",
        "variant:N",
        "dtype:N",
        "m:Q",
        "n:Q",
        "k:Q",
        "config_key:N",
        alt.Tooltip("ms_a:Q", format=".4g"),
        alt.Tooltip("ms_b:Q", format=".4g"),
        alt.Tooltip("b_over_a:Q", format=".3f", title="b / a"),
        "verdict:N",
    ]
    return alt.layer(
        base.mark_rule(strokeWidth=7, opacity=0.25, color="#777").encode(x=x, y="a_lo:Q", y2="a_hi:Q"),
        base.mark_rule(strokeWidth=2, opacity=0.8).encode(x=x, y="b_lo:Q", y2="b_hi:Q", color=colour),
        base.mark_circle(size=45).encode(
            x=x,
            y=alt.Y("b_over_a:Q", scale=alt.Scale(zero=False), title="sweep b time / sweep a time"),
            color=colour,
            tooltip=tips,
        ),
        _rule("y", "b_over_a", 1.0, "same time", "same time"),
    ).properties(title=_title("Sweep b against sweep a, per point (below 1: b is faster)", note), height=400)


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
        .properties(height=alt.Step(26))
    )
