"""`farm compare`: the regression gate a CI calls, run b against run a.

    farm compare --db results.db                      # the newest two runs that share points
    farm compare --db results.db --runs 3 5           # run 3 (a, before) against run 5 (b, after)
    farm compare --db new.db --baseline old.db        # new.db's newest run against old.db's newest
                                                      # run that shares a point with it

Per point both runs timed ok: b/a, and whether it lies beyond both readings' p20-p80 AND --threshold;
per shape, each run's best config (a changed winner is reported). A point power-capped on either side
whose SM clocks differ by more than 1% is not judged: the power limiter, not the code, set its time
(docs/design.md, "Comparing runs: the regression gate").

Exit status: 1 when a judged point or a shape's best regressed (--by shape: the bests alone), 0
otherwise, 2 on bad input (an unknown run, runs that share no point or ran on different GPUs, a
missing or damaged database). The judgement is db.queries.compare's, the dashboard's Compare runs
page shows the same.
"""

from __future__ import annotations

import argparse
import io
import json
import math
from typing import Any

import pandas as pd

from db.engine import display_target
from db.errors import DatabaseError
from db.export import reading
from db.queries import compare as gate

FORMATS = ("text", "csv", "json", "markdown")
# The text and markdown tables list at most this many points (the CSV and JSON list every one).
POINTS_SHOWN = 20
# One table for both levels (CSV, JSON): a point's variant and config are the same in both runs.
OUTPUT_COLUMNS = (
    "level", "judgement", "ratio_b_over_a", "gpu_name", "dtype", "m", "n", "k", "variant_a", "config_key_a",
    "variant_b", "config_key_b", "ms_a", "ms_p20_a", "ms_p80_a", "sm_clock_mhz_a", "throttled_a", "ms_b",
    "ms_p20_b", "ms_p80_b", "sm_clock_mhz_b", "throttled_b", "reason",
)  # fmt: skip
_SHOWN = {  # text and markdown: column -> heading
    "judgement": "judgement",
    "ratio_b_over_a": "b/a",
    "shape": "shape",
    "dtype": "dtype",
    "config": "config (a -> b)",
    "ms_a": "ms a",
    "ms_b": "ms b",
    "clocks": "MHz a/b",
    "reason": "why",
}


def register(sub, add_db_argument) -> None:
    p = sub.add_parser(
        "compare",
        help="judge run b against run a (a CI regression gate): exit 1 on a regression beyond noise",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_db_argument(p)
    p.add_argument(
        "--runs",
        nargs=2,
        type=int,
        metavar=("A", "B"),
        help="the two runs (sweep ids): A before, B after; with --baseline, A is the baseline's run "
        "(default: the newest two that share points; with --baseline, the newest runs that do)",
    )
    p.add_argument(
        "--baseline",
        metavar="DB",
        help="run a comes from this database (a SQLite path or an SQLAlchemy URL), run b from --db",
    )
    p.add_argument(
        "--threshold",
        type=parse_threshold,
        default=gate.DEFAULT_THRESHOLD,
        metavar="PCT",
        help="a point regressed where b/a exceeds 1 + this (and the p20-p80 intervals part); default 3%%: "
        "the instrument's repeat difference is 0.8%% at the median and 6.8%% at the 90th percentile "
        "(dashboard/demo/h200.db's two grouping runs, 354 points), and a ratio within 3%% of 1 concludes "
        "nothing",
    )
    p.add_argument(
        "--by",
        choices=gate.BY,
        default="point",
        help="point: any judged point or shape best that regressed fails (default); shape: the shapes' "
        "best configs alone decide",
    )
    p.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")
    p.add_argument(
        "--allow-gpu-change",
        action="store_true",
        help="compare runs on different GPU models (points pair without the GPU)",
    )
    p.set_defaults(handler=handle)


def parse_threshold(text: str) -> float:
    """'3%' or '3' -> 0.03: a percentage, above 0 and below 100."""
    try:
        value = float(text.strip().removesuffix("%")) / 100
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"threshold {text!r}: give a percentage between 0 and 100 (e.g. 3%)")
    return value


def handle(args: argparse.Namespace) -> int:
    judgement = judged(args)
    print(render(judgement, args.format), end="")
    return 1 if judgement.failed else 0


def judged(args: argparse.Namespace) -> gate.Judgement:
    """The two runs the options name, judged; DatabaseError (exit 2) for anything a user must fix."""
    options = {"threshold": args.threshold, "by": args.by}
    if args.baseline is None:
        with reading(args.db) as conn:
            run_a, run_b = args.runs or _newest_pair(conn, args.db)
            j = gate.compare(conn, run_a, run_b, allow_gpu_change=args.allow_gpu_change, **options)
    else:
        with reading(args.db) as conn:
            run_b = args.runs[1] if args.runs else gate.newest_run(conn)
            if run_b is None:
                raise DatabaseError(f"{display_target(args.db)} holds no run with an ok point")
            gate.check_runs(conn, [run_b])
            b = gate.run_rows(conn, run_b)
        with reading(args.baseline) as conn:
            j = _against_baseline(conn, args, b, run_b, options)
    if not len(j.points):
        raise DatabaseError(f"{j.verdict()} (the same GPU model, variant, dtype, shape and config)")
    return j


def _against_baseline(conn, args: argparse.Namespace, b: pd.DataFrame, run_b: int, options: dict) -> Any:
    """Run b's rows against the baseline's run --runs names, else its newest run on b's GPU model that
    shares a point with b (the newest run on another GPU where none is on b's: DatabaseError unless
    --allow-gpu-change)."""
    gpus = gate.run_gpus(conn)
    if args.runs:
        gate.check_runs(conn, [args.runs[0]])
    ids = [args.runs[0]] if args.runs else sorted(gpus, reverse=True)
    if not ids:
        raise DatabaseError(f"{display_target(args.baseline)} holds no run with an ok point")
    same_gpu = [i for i in ids if gpus.get(i, set()) & set(b.gpu_name)]
    j = None
    for run_a in same_gpu or ids[:1]:
        a = gate.run_rows(conn, run_a)
        labels = (f"#{run_a} of {display_target(args.baseline)}", f"#{run_b} of {display_target(args.db)}")
        change = gate.differ_in_gpu(a, b, allow_gpu_change=args.allow_gpu_change, labels=labels)
        j = gate.judge(a, b, run_a=run_a, run_b=run_b, gpu_change=change, labels=labels, **options)
        if len(j.points):
            break
    return j


def _newest_pair(conn, target: str) -> tuple[int, int]:
    pair = gate.newest_shared_pair(conn)
    if pair is None:
        raise DatabaseError(
            f"{display_target(target)} holds no two runs that share an ok point: name them with --runs A B"
        )
    return pair


def table(j: gate.Judgement) -> pd.DataFrame:
    """Shapes then points, worst first within each, as OUTPUT_COLUMNS (what CSV and JSON write)."""
    shapes = j.shapes.assign(level="shape")
    points = j.points.assign(
        level="point",
        variant_a=j.points.variant,
        variant_b=j.points.variant,
        config_key_a=j.points.config_key,
        config_key_b=j.points.config_key,
    )
    return pd.concat([shapes, points], ignore_index=True)[list(OUTPUT_COLUMNS)]


def render(j: gate.Judgement, fmt: str) -> str:
    if fmt == "csv":
        out = io.StringIO()
        table(j).to_csv(out, index=False)
        return out.getvalue()
    if fmt == "json":
        rows = table(j)
        doc = {
            "verdict": j.verdict(),
            "failed": j.failed,
            "summary": {k: _plain(v) for k, v in j.summary.items()},
            "shapes": _records(rows[rows.level == "shape"]),
            "points": _records(rows[rows.level == "point"]),
        }
        return json.dumps(doc, indent=1, default=_plain) + "\n"
    markdown = fmt == "markdown"
    s = j.summary
    shown_points = j.points[j.points.judgement != gate.SAME]
    parts = [f"**{j.verdict()}**\n" if markdown else ""]
    parts.append(_heading(f"Shape bests, worst first ({s['n_shapes']} shapes)", markdown))
    parts.append(_grid(_readable(j.shapes, shape=True), markdown))
    what = f"{len(shown_points):,} points not the same (regressed, not judged, improved) of {s['n_points']:,}"
    if len(shown_points) > POINTS_SHOWN:
        what += f"; the worst {POINTS_SHOWN} (--format csv or json lists every point)"
    parts.append(_heading(what, markdown))
    if len(shown_points):
        parts.append(_grid(_readable(shown_points.head(POINTS_SHOWN), shape=False), markdown))
    if not markdown:
        parts.append(j.verdict() + "\n")
    return "\n".join(p for p in parts if p)


def _heading(text: str, markdown: bool) -> str:
    return f"### {text}\n" if markdown else f"{text}:\n"


def _readable(df: pd.DataFrame, *, shape: bool) -> pd.DataFrame:
    out = pd.DataFrame(
        {
            "judgement": df.judgement,
            "ratio_b_over_a": df.ratio_b_over_a.map("{:.3f}".format),
            "shape": [f"{m}x{n}x{k}" for m, n, k in zip(df.m, df.n, df.k)],
            "dtype": df["dtype"],
            "config": [
                f"{va} {ca}" + ("" if (va, ca) == (vb, cb) else f" -> {vb} {cb}")
                for va, ca, vb, cb in zip(df.variant_a, df.config_key_a, df.variant_b, df.config_key_b)
            ]
            if shape
            else [f"{v} {c}" for v, c in zip(df.variant, df.config_key)],
            "ms_a": df.ms_a.map("{:.4g}".format),
            "ms_b": df.ms_b.map("{:.4g}".format),
            "clocks": [f"{_mhz(a)}/{_mhz(b)}" for a, b in zip(df.sm_clock_mhz_a, df.sm_clock_mhz_b)],
            "reason": df.reason,
        }
    )
    return out.rename(columns=_SHOWN)


def _mhz(value: Any) -> str:
    return "-" if pd.isna(value) else f"{int(value)}"


def _grid(df: pd.DataFrame, markdown: bool) -> str:
    if not markdown:
        return df.to_string(index=False) + "\n"
    cells = [[str(v).replace("|", "\\|") for v in row] for row in df.itertuples(index=False)]
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines) + "\n"


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in df.drop(columns="level").to_dict("records")]


def _plain(value: Any) -> Any:
    """A JSON value: numpy and pandas scalars as Python's, NaN and NA as null."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "item"):
        return _plain(value.item())
    return value
