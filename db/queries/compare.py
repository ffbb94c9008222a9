"""The regression gate: run b against run a, point by point and per shape's best config, judged against
the readings' own spread, a threshold and the power limiter (docs/design.md, "Comparing runs: the
regression gate"). `farm compare` and the dashboard's Compare runs page (through compare_runs) both ask
`judge`, so they say the same thing.

A pair of readings (a point both runs timed ok, or a shape's best in each run) is judged unless a power
cap may have moved it: either row throttled and the two SM clocks more than CLOCK_MATCH apart. A judged
pair is `regressed` (or `improved`) where its p20-p80 intervals do not overlap AND b/a lies beyond the
threshold; else `same`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, and_, func, select

from db.errors import DatabaseError
from db.fetch import fetch
from db.models import Measurement, Sweep
from db.queries.frames import frame, normalize
from db.queries.select import view
from db.queries.splitk import side

# What pairs two runs' rows: the point without its environment and code version (a run on another host
# of the same GPU model, or of changed code, is what one compares).
RUN_POINT = ("gpu_name", "variant", "dtype", "m", "n", "k", "config_key")
RUN_CONFIG = ("block_m", "block_n", "block_k", "split_k", "num_warps", "num_stages", "group_m")
RUN_SHAPE = ("gpu_name", "dtype", "m", "n", "k")
# A run's row as the comparison reads it: the point, its config, the time and its spread, and the
# power state it was read in.
READING = ("ms", "ms_p20", "ms_p80", "sm_clock_mhz", "throttled", "throttle_reasons")
_ROW = (*RUN_POINT, *RUN_CONFIG, *READING, "id")

# The instrument's repeat difference on an H200: the same config differs by 0.8% between two runs at the
# median and 6.8% at the 90th percentile (dashboard/demo/h200.db's two grouping runs, 354 points;
# docs/design.md, "Search"); db.conclusions.NOISE reads a ratio within 3% of 1 as concluding nothing.
DEFAULT_THRESHOLD = 0.03
# Two power-capped readings compare where their SM clocks agree within 1%: on the demo's two grouping runs
# the 78 points capped at clocks within 1% repeat to 0.6% at the median and 1.3% at the 90th percentile
# (max 3.5%), as unthrottled points do (0.3%, 0.7%); capped points 1-2% apart already reach 14%
# (docs/design.md, "Comparing runs: the regression gate").
CLOCK_MATCH = 0.01

REGRESSED, NOT_JUDGED, SAME, IMPROVED = "regressed", "not judged", "same", "improved"
JUDGEMENTS = (REGRESSED, NOT_JUDGED, SAME, IMPROVED)  # worst first: the tables' order
BY = ("point", "shape")

_SIDE = (*READING[:4], "throttled")
POINT_COLUMNS = (
    *RUN_POINT,
    *(f"{c}_a" for c in _SIDE),
    *(f"{c}_b" for c in _SIDE),
    "ratio_b_over_a",
    "judgement",
    "reason",
)
SHAPE_COLUMNS = (
    *RUN_SHAPE,
    "variant_a",
    "config_key_a",
    "variant_b",
    "config_key_b",
    "winner_changed",
    *(f"{c}_a" for c in _SIDE),
    *(f"{c}_b" for c in _SIDE),
    "ratio_b_over_a",
    "judgement",
    "reason",
)


@dataclass(frozen=True)
class Judgement:
    """judge's answer. points: POINT_COLUMNS per point both runs timed ok; shapes: SHAPE_COLUMNS per shape
    (each run's best config over those points); both worst first (JUDGEMENTS' order, then b/a
    descending). summary: the counts, the threshold and `failed` (what `farm compare` exits 1 on)."""

    points: pd.DataFrame
    shapes: pd.DataFrame
    summary: dict[str, Any]

    @property
    def failed(self) -> bool:
        return bool(self.summary["failed"])

    def verdict(self) -> str:
        """One line: whether run b regressed, on what, and what was not judged."""
        return verdict(self.summary)


def check_runs(conn: Connection, runs: list[int]) -> None:
    """DatabaseError naming the run ids that are no sweep of this database."""
    s = Sweep.__table__
    known = set(conn.scalars(select(s.c.id).where(s.c.id.in_([int(r) for r in runs]))))
    missing = [str(r) for r in runs if int(r) not in known]
    if missing:
        raise DatabaseError(f"no sweep with id {', '.join(missing)}")


def run_rows(conn: Connection, sweep_id: int) -> pd.DataFrame:
    """A run's ok rows with a time, one per RUN_POINT (the fastest, then the lowest id: a run over
    several hosts of one GPU model keeps its fastest row), with each row's split-K side."""
    r = view("run_results")
    stmt = select(*(r.c[c] for c in _ROW), side(r).label("splitk_side")).where(
        r.c.sweep_id == int(sweep_id), r.c.status == "ok", r.c.ms.is_not(None)
    )
    return _one_per_point(frame(conn, stmt))


def shared_rows(conn: Connection, run_a: int, run_b: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """run_rows of each run at the points both timed ok, read in one join driven from the run with fewer
    rows (_pairing): on the 100,000-row benchmark's runs of 50,736 and 4,629 ok rows, all 4,629 shared,
    0.08 s where reading both runs whole took 0.41 s."""
    small, big, s, g, on = _pairing(conn, run_a, run_b)
    stmt = _paired(small, big, s, g, on).with_only_columns(
        *(s.c[c].label(f"s__{c}") for c in _ROW),
        side(s).label("s__splitk_side"),
        *(g.c[c].label(f"g__{c}") for c in _ROW),
        side(g).label("g__splitk_side"),
    )
    keys, rows = fetch(conn, stmt)
    raw = pd.DataFrame(rows, columns=keys)
    sides = {}
    for prefix, run in (("s__", small), ("g__", big)):
        part = raw[[k for k in keys if k.startswith(prefix)]].copy()
        part.columns = [k[len(prefix) :] for k in part.columns]
        sides[run] = _one_per_point(normalize(part.drop_duplicates("id")))
    return sides[int(run_a)], sides[int(run_b)]


def _one_per_point(df: pd.DataFrame) -> pd.DataFrame:
    df = df.sort_values(["ms", "id"]).drop_duplicates(list(RUN_POINT))
    return df.drop(columns="id").reset_index(drop=True)


def run_gpus(conn: Connection) -> dict[int, set[str]]:
    """Per run with ok rows: the GPU models it timed."""
    r = view("run_results")
    stmt = (
        select(r.c.sweep_id, r.c.gpu_name)
        .where(r.c.status == "ok", r.c.ms.is_not(None), r.c.sweep_id.is_not(None))
        .distinct()
    )
    out: dict[int, set[str]] = {}
    for sweep_id, gpu in conn.execute(stmt):
        out.setdefault(int(sweep_id), set()).add(gpu)
    return out


def share_a_point(conn: Connection, run_a: int, run_b: int) -> bool:
    """Whether two runs timed any point both ok (the join stops at its first row)."""
    small, big, s, g, on = _pairing(conn, run_a, run_b)
    return conn.execute(_paired(small, big, s, g, on).limit(1)).first() is not None


def _pairing(conn: Connection, run_a: int, run_b: int) -> tuple[int, int, Any, Any, Any]:
    """(smaller run, bigger run, s, g, on): two aliases of run_results and the condition that pairs a row
    of s with g's rows of its point. Besides RUN_POINT it names every column of the index
    ix_measurements_view (the config's, which config_key spells, and status and latest), so each row of
    the smaller run finds its point in the bigger by two index seeks: 0.08 s for the benchmark's 4,629
    points, 0.37 s when the seek stopped at the variant and stepped through every config of the shape."""
    m = Measurement.__table__
    rows = select(m.c.sweep_id, func.count()).where(m.c.sweep_id.in_([int(run_a), int(run_b)]))
    counts = {int(i): int(n) for i, n in conn.execute(rows.group_by(m.c.sweep_id))}
    small, big = sorted((int(run_a), int(run_b)), key=lambda r: (counts.get(r, 0), r))
    s, g = view("run_results").alias("s"), view("run_results").alias("g")
    on = and_(
        *(g.c[c] == s.c[c] for c in RUN_POINT),
        *(g.c[c].is_not_distinct_from(s.c[c]) for c in RUN_CONFIG),
        g.c.status == "ok",
        g.c.latest.in_([0, 1]),
    )
    return small, big, s, g, on


def _paired(small: int, big: int, s: Any, g: Any, on: Any) -> Any:
    return (
        select(s.c.id)
        .select_from(s.join(g, on))
        .where(
            s.c.sweep_id == small,
            # `+ 0`: no index on g's sweep_id, so the planner seeks g's rows by the point instead of
            # stepping through the bigger run for every row of the smaller (minutes at 100,000 rows).
            g.c.sweep_id + 0 == big,
            s.c.status == "ok",
            s.c.ms.is_not(None),
            g.c.ms.is_not(None),
        )
    )


def newest_shared_pair(conn: Connection, gpus: dict[int, Any] | None = None) -> tuple[int, int] | None:
    """(a, b): the newest two runs that share an ok point (b the newest run that shares one with an older
    run, a the newest such older run); None where no two runs share a point. Only runs that timed a GPU
    model in common are asked (gpus: run id -> its GPU models, where the caller holds them; else
    run_gpus), each pair with one join that stops at its first shared row: the 100,000-row benchmark's
    pair (1, 3) in 2 ms, where reading every run's 92,709 points took 0.43 s."""
    gpus = run_gpus(conn) if gpus is None else {int(i): set(g) for i, g in gpus.items()}
    ids = sorted(gpus, reverse=True)
    for pos, b in enumerate(ids):
        for a in ids[pos + 1 :]:
            if gpus[a] & gpus[b] and share_a_point(conn, a, b):
                return a, b
    return None


def newest_run(conn: Connection) -> int | None:
    """The newest run with an ok row."""
    ids = run_gpus(conn)
    return max(ids) if ids else None


def differ_in_gpu(
    a: pd.DataFrame, b: pd.DataFrame, *, allow_gpu_change: bool, labels: tuple[str, str]
) -> bool:
    """Whether two runs' rows share no GPU model (then they pair without it). DatabaseError unless
    allow_gpu_change: a time on another GPU is no regression of the code."""
    ga, gb = set(a.gpu_name), set(b.gpu_name)
    if not ga or not gb or ga & gb:
        return False
    if not allow_gpu_change:
        raise DatabaseError(
            f"run {labels[0]} ran on {', '.join(sorted(ga))} and run {labels[1]} on {', '.join(sorted(gb))}: "
            "different GPUs; pass --allow-gpu-change to compare them anyway"
        )
    return True


def judge(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    run_a: int,
    run_b: int,
    threshold: float = DEFAULT_THRESHOLD,
    by: str = "point",
    gpu_change: bool = False,
    labels: tuple[str, str] | None = None,
) -> Judgement:
    """Run b's rows against run a's (run_rows or shared_rows frames): every point both timed ok, and per
    shape each run's best config over those points, judged as the module says. by="shape": only the
    shapes' bests decide `failed`. gpu_change: pair rows without their GPU model (differ_in_gpu);
    gpu_name then reads "A -> B". labels: how the verdict names the runs (default "#id")."""
    if by not in BY:
        raise DatabaseError(f"--by {by!r}: one of {', '.join(BY)}")
    labels = labels or (f"#{run_a}", f"#{run_b}")
    key = [c for c in RUN_POINT if c != "gpu_name"] if gpu_change else list(RUN_POINT)
    cols = [*RUN_POINT, *READING]
    both = a[cols].merge(b[cols], on=key, suffixes=("_a", "_b"))
    if gpu_change:
        both.insert(0, "gpu_name", both.gpu_name_a + " -> " + both.gpu_name_b)
        both = both.drop(columns=["gpu_name_a", "gpu_name_b"])
    points = _judged(both, threshold)
    points = _worst_first(points)[list(POINT_COLUMNS)]
    shapes = _worst_first(_judged(_bests(both), threshold))[list(SHAPE_COLUMNS)]
    summary = _summary(points, shapes, run_a=run_a, run_b=run_b, threshold=threshold, by=by, labels=labels)
    return Judgement(
        points=points.reset_index(drop=True), shapes=shapes.reset_index(drop=True), summary=summary
    )


def compare(
    conn: Connection,
    run_a: int,
    run_b: int,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    by: str = "point",
    allow_gpu_change: bool = False,
) -> Judgement:
    """judge two runs of one database (unknown run ids and different GPUs raise DatabaseError)."""
    check_runs(conn, [run_a, run_b])
    labels = (f"#{run_a}", f"#{run_b}")
    a, b = shared_rows(conn, run_a, run_b)
    change = False
    if a.empty:  # nothing shared on one GPU model: the runs may still share points on two
        whole_a, whole_b = run_rows(conn, run_a), run_rows(conn, run_b)
        change = differ_in_gpu(whole_a, whole_b, allow_gpu_change=allow_gpu_change, labels=labels)
        if change:
            a, b = whole_a, whole_b
    return judge(a, b, run_a=run_a, run_b=run_b, threshold=threshold, by=by, gpu_change=change, labels=labels)


def _judged(df: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """df (both sides' READING columns, _a and _b) with ratio_b_over_a, judgement and reason."""
    df = df.copy()
    df["ratio_b_over_a"] = df.ms_b / df.ms_a
    lo_a, hi_a = df.ms_p20_a.fillna(df.ms_a), df.ms_p80_a.fillna(df.ms_a)
    lo_b, hi_b = df.ms_p20_b.fillna(df.ms_b), df.ms_p80_b.fillna(df.ms_b)
    apart = ~((lo_a <= hi_b) & (lo_b <= hi_a))
    capped = df.throttled_a.fillna(False).astype(bool) | df.throttled_b.fillna(False).astype(bool)
    clock_a = df.sm_clock_mhz_a.astype("float64")
    clock_b = df.sm_clock_mhz_b.astype("float64")
    clocks_agree = ((clock_b / clock_a - 1).abs() <= CLOCK_MATCH).fillna(False).astype(bool)
    judged = ~capped | clocks_agree
    ratio = df.ratio_b_over_a
    judgement = np.select(
        [~judged, apart & (ratio > 1 + threshold), apart & (ratio < 1 - threshold)],
        [NOT_JUDGED, REGRESSED, IMPROVED],
        SAME,
    )
    df["judgement"] = judgement
    reasons = []
    for j, cap, ap, ra, rb, ca, cb in zip(
        judgement, capped, apart, df.throttle_reasons_a, df.throttle_reasons_b, clock_a, clock_b
    ):
        clocks = f"{_mhz(ca)} vs {_mhz(cb)} MHz"
        if j == NOT_JUDGED:
            why = ", ".join(sorted({w for w in (ra, rb) if isinstance(w, str) and w})) or "throttled"
            reasons.append(f"power-capped ({why}) at {clocks}: clocks over {CLOCK_MATCH:.0%} apart")
        elif j == SAME:
            reasons.append("p20-p80 overlap" if not ap else f"inside {threshold:.1%}")
        else:
            reasons.append("beyond p20-p80 and threshold")
        if cap and j != NOT_JUDGED:
            reasons[-1] += f"; capped alike at {clocks}"
    df["reason"] = reasons
    return df.drop(columns=["throttle_reasons_a", "throttle_reasons_b"])


def _mhz(value: float) -> str:
    return "?" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.0f}"


def _bests(both: pd.DataFrame) -> pd.DataFrame:
    """Per shape, each run's best (least ms) point over the shared points, side by side."""
    shape = list(RUN_SHAPE)
    sides = []
    for s in "ab":
        cols = [*shape, "variant", "config_key", *(f"{c}_{s}" for c in READING)]
        best = both[cols].sort_values([f"ms_{s}", "variant", "config_key"]).drop_duplicates(shape)
        sides.append(best.rename(columns={"variant": f"variant_{s}", "config_key": f"config_key_{s}"}))
    out = sides[0].merge(sides[1], on=shape)
    out["winner_changed"] = (out.variant_a != out.variant_b) | (out.config_key_a != out.config_key_b)
    return out


def _worst_first(df: pd.DataFrame) -> pd.DataFrame:
    rank = df.judgement.map({j: i for i, j in enumerate(JUDGEMENTS)})
    return (
        df.assign(_rank=rank)
        .sort_values(["_rank", "ratio_b_over_a"], ascending=[True, False])
        .drop(columns="_rank")
    )


def _summary(
    points: pd.DataFrame,
    shapes: pd.DataFrame,
    *,
    run_a: int,
    run_b: int,
    threshold: float,
    by: str,
    labels: tuple[str, str],
) -> dict[str, Any]:
    p, s = Counter(points.judgement), Counter(shapes.judgement)
    judged_points = points[points.judgement != NOT_JUDGED]
    worst = points[points.judgement == REGRESSED].head(1)
    worst_shape = shapes[shapes.judgement == REGRESSED].head(1)
    failed = s[REGRESSED] > 0 if by == "shape" else (p[REGRESSED] + s[REGRESSED]) > 0
    return {
        "run_a": int(run_a),
        "run_b": int(run_b),
        "label_a": labels[0],
        "label_b": labels[1],
        "threshold": float(threshold),
        "clock_match": CLOCK_MATCH,
        "by": by,
        "n_points": len(points),
        "n_judged": len(judged_points),
        **{f"n_{j.replace(' ', '_')}": p[j] for j in JUDGEMENTS},
        "n_shapes": len(shapes),
        "n_shapes_judged": len(shapes) - s[NOT_JUDGED],
        **{f"n_shapes_{j.replace(' ', '_')}": s[j] for j in JUDGEMENTS},
        "n_winners_changed": int(shapes.winner_changed.sum()) if len(shapes) else 0,
        "median_ratio_judged": float(judged_points.ratio_b_over_a.median())
        if len(judged_points)
        else math.nan,
        "worst_point": _named(worst, "variant") if len(worst) else None,
        "worst_shape": _named(worst_shape, "variant_b") if len(worst_shape) else None,
        "failed": bool(failed),
    }


def _named(row: pd.DataFrame, variant: str) -> str:
    r = row.iloc[0]
    return f"{r[variant]} {int(r.m)}x{int(r.n)}x{int(r.k)} {r['dtype']} b/a {r.ratio_b_over_a:.3f}"


def verdict(s: dict[str, Any]) -> str:
    """The one-line verdict of a judge summary."""
    a, b, t = s["label_a"], s["label_b"], s["threshold"]
    if not s["n_points"]:
        return f"run {b} and run {a} share no ok point: nothing to compare"
    judged = (
        f"{s['n_judged']:,} of {s['n_points']:,} points and {s['n_shapes_judged']} of {s['n_shapes']} "
        "shape bests judged"
    )
    if s["by"] == "shape":
        judged = f"{s['n_shapes_judged']} of {s['n_shapes']} shape bests judged"
    unjudged = s["n_not_judged"] if s["by"] == "point" else s["n_shapes_not_judged"]
    tail = (
        f"; {unjudged:,} not judged (power-capped at clocks over {CLOCK_MATCH:.0%} apart)" if unjudged else ""
    )
    tail += f"; {s['n_winners_changed']} shapes changed winner" if s["n_winners_changed"] else ""
    if s["failed"]:
        what = (
            [f"{s['n_shapes_regressed']} shape bests (worst: {s['worst_shape']})"] if s["worst_shape"] else []
        )
        if s["by"] == "point" and s["n_regressed"]:
            what.insert(0, f"{s['n_regressed']:,} points (worst: {s['worst_point']})")
        return (
            f"REGRESSED: run {b} against run {a}: {' and '.join(what)} slower beyond their p20-p80 and "
            f"{t:.1%}; {judged}{tail}"
        )
    return (
        f"OK: run {b} against run {a}: nothing judged slower beyond its p20-p80 and {t:.1%}; {judged}{tail}"
    )
