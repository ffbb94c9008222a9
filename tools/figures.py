"""The figures of README.md and docs/findings.md, drawn from a results database with the dashboard's own
charts (dashboard.charts and dashboard.splitk_charts over dashboard.frames, the frames the pages build)
and saved as PNG by vl-convert (Altair's `save(..., format="png")`).

    python tools/figures.py [--db dashboard/demo/h200.db] [--out docs/figures] [--gpu "NVIDIA H200"]
    python tools/figures.py --db dashboard/demo/h200-llm.db --only cublas splitk --prefix llm_

One PNG per chart: splitk.png (split-K speedup against tiles per SM), grouping.png (grouped-order gain
in time and energy against operand bytes over L2), grouping_heatmap.png, cublas.png (best Triton
against cuBLAS), roofline.png. Each is the chart the dashboard page shows for that GPU in bfloat16.
The llm preset's demo gives llm_cublas.png and llm_splitk.png (the second command).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import altair as alt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dashboard import charts, frames, splitk_charts  # the dashboard's own chart definitions
from dashboard.target import DEMO_DB
from db import queries
from db.schema import open_engine

OUT = Path(__file__).resolve().parents[1] / "docs" / "figures"
# Twice the browser's pixel density: sharp on a README page, 50-150 kB per figure.
SCALE = 2
# The width a page gives a chart in a 1,400 px window (Streamlit's wide layout less the sidebar). The
# charts leave their width to the page ("container"); saved alone, a chart sized "fit-x" (the ones
# sized by rows) fell back to Vega's 200 px and cut its title.
WIDTH_PX = 900


def splitk(conn, scope: dict[str, str]) -> alt.TopLevelMixin:
    best = queries.splitk_best(conn, **scope)
    ids = [int(i) for i in (*best.unsplit_id.dropna(), *best.split_id.dropna())]
    table = frames.splitk_table(
        best, queries.splitk_eager(conn, **scope), queries.measurement_details(conn, ids=ids)
    )
    return splitk_charts.speedup_scatter(table, frames.splitk_blocks(queries.splitk_speedup(conn, **scope)))


def grouping(conn, scope: dict[str, str]) -> alt.TopLevelMixin:
    return charts.grouping_gains(frames.grouping_gains(queries.grouping_gain(conn, **scope)))


def grouping_heatmap(conn, scope: dict[str, str]) -> alt.TopLevelMixin:
    points = frames.grouping_points(queries.grouping_effect(conn, **scope))
    return charts.grouping_heatmap(frames.grouping_heatmap(points))


def cublas(conn, scope: dict[str, str]) -> alt.TopLevelMixin:
    points = frames.with_intensity(queries.vs_cublas(conn, **scope), queries.shape_sizes(conn, **scope))
    return charts.cublas_scatter(points)


def roofline(conn, scope: dict[str, str]) -> alt.TopLevelMixin:
    sizes = queries.shape_sizes(conn, **scope)
    peaks = queries.gpu_peaks(conn, gpu_name=scope["gpu_name"])
    points = frames.roofline_points(queries.best_configs(conn, **scope), sizes, peaks["peak_tflops"])
    roofs = frames.roof_lines(
        peaks["peak_tflops"], peaks["peak_gbps"], points.intensity.min(), points.intensity.max()
    )
    return charts.roofline(points, roofs)


FIGURES: dict[str, Callable] = {
    "splitk": splitk,
    "grouping": grouping,
    "grouping_heatmap": grouping_heatmap,
    "cublas": cublas,
    "roofline": roofline,
}


def draw(
    db: str, out: Path, gpu: str, dtype: str = "bfloat16", names: list[str] | None = None, prefix: str = ""
) -> list[Path]:
    """The figures of FIGURES named (all by default) from `db` into `out` as PREFIXNAME.png; the
    paths written."""
    out.mkdir(parents=True, exist_ok=True)
    engine = open_engine(db, readonly=True)
    written = []
    try:
        with engine.connect() as conn:
            for name in names or FIGURES:
                chart = FIGURES[name]
                path = out / f"{prefix}{name}.png"
                drawn = chart(conn, {"gpu_name": gpu, "dtype": dtype}).properties(width=WIDTH_PX)
                drawn.save(path, format="png", scale_factor=SCALE)
                written.append(path)
    finally:
        engine.dispose()
    return written


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", default=str(DEMO_DB))
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--gpu", default="NVIDIA H200")
    p.add_argument("--only", nargs="+", choices=list(FIGURES), help="these figures (default: all)")
    p.add_argument("--prefix", default="", help="file names PREFIXNAME.png (another database's figures)")
    args = p.parse_args()
    for path in draw(args.db, args.out, args.gpu, names=args.only, prefix=args.prefix):
        print(f"{path}  {path.stat().st_size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
