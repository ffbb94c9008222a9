"""Two runs (sweeps) of the same study side by side: which to compare first, and how run b differs from
run a point by point and in its split-K and grouping effects."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Connection, func, select

from db.queries.compare import (
    DEFAULT_THRESHOLD,
    RUN_CONFIG,
    RUN_POINT,
    RUN_SHAPE,
    Judgement,
    check_runs,
    judge,
    shared_rows,
)
from db.queries.frames import frame
from db.queries.select import view
from db.queries.tables import sweeps
from db.splitk_rule import SIDES

RUN_POINT_COLUMNS = (
    *RUN_POINT, "ms_a", "ms_p20_a", "ms_p80_a", "ms_b", "ms_p20_b", "ms_p80_b", "ratio_b_over_a", "verdict",
)  # fmt: skip
_GROUP_PAIR = (*RUN_SHAPE, "variant", *RUN_CONFIG[:-1])


@dataclass(frozen=True)
class RunComparison:
    """compare_runs' answer: run b against run a, every ratio and difference b over (or minus) a, and the
    regression gate's judgement of the same rows (db.queries.compare.judge, what `farm compare` says)."""

    points: pd.DataFrame
    splitk: pd.DataFrame
    grouping: pd.DataFrame
    summary: dict[str, Any]
    judgement: Judgement


def compare_runs(
    conn: Connection, run_a: int, run_b: int, *, threshold: float = DEFAULT_THRESHOLD
) -> RunComparison:
    """Run b against run a (two sweeps, usually of the same study: `farm sweep --repeat`) on every ok
    point both measured, and the split-K and grouping effects of each run over those points.

    Points pair on RUN_POINT (gpu_name, variant, dtype, m, n, k, config_key): not on the environment or
    code version. Each run's row of a point is its own run's (view run_results), whichever run is newest;
    a run over several hosts of one GPU model keeps its fastest row of the point.

    points: one row per common point, sorted by RUN_POINT; columns RUN_POINT_COLUMNS:
      gpu_name, variant, dtype, m, n, k, config_key, ms_a, ms_p20_a, ms_p80_a, ms_b, ms_p20_b, ms_p80_b,
      ratio_b_over_a = ms_b / ms_a (< 1: b is faster), verdict: "same" when the p20-p80 intervals
      overlap (a missing p20 or p80 is taken as ms), else "faster" (ms_b < ms_a) or "slower": run b's.
    splitk: per shape (gpu_name, dtype, m, n, k) with both kinds of row in both runs: speedup_a,
      speedup_b (best unsplit ms / best split ms: split_k = 1 of any variant but cuBLAS and stream-K,
      against split_k > 1; > 1: split-K pays, as splitk_best) and diff_b_minus_a.
    grouping: per shape, variant, block config (block_m, block_n, block_k, split_k, num_warps,
      num_stages) and group_m > 1 with a group_m = 1 row of the same config in both runs: gain_a, gain_b
      (best group_m = 1 ms / best ms of the group_m; > 1: grouping pays, as grouping_effect's speedup)
      and diff_b_minus_a.
    judgement: db.queries.compare.judge of the same rows at `threshold` (what `farm compare` says).
    summary: run_a, run_b; n_points (common), n_same,
      n_faster, n_slower (verdicts), share_same = n_same / n_points (the share within noise);
      median_ratio_b_over_a; n_splitk_shapes, median_splitk_diff_b_minus_a; n_grouping_pairs,
      median_grouping_diff_b_minus_a. Medians and share_same are NaN where nothing pairs.

    A run id that is no sweep raises DatabaseError.
    """
    check_runs(conn, [run_a, run_b])
    # Only the rows at points both runs timed: every effect below is over the common points.
    a, b = shared_rows(conn, int(run_a), int(run_b))
    judgement = judge(a, b, run_a=int(run_a), run_b=int(run_b), threshold=threshold)
    out = a.merge(b[[*RUN_POINT, "ms", "ms_p20", "ms_p80"]], on=list(RUN_POINT), suffixes=("_a", "_b"))
    out["ratio_b_over_a"] = out.ms_b / out.ms_a
    lo_a, hi_a = out.ms_p20_a.fillna(out.ms_a), out.ms_p80_a.fillna(out.ms_a)
    lo_b, hi_b = out.ms_p20_b.fillna(out.ms_b), out.ms_p80_b.fillna(out.ms_b)
    overlap = (lo_a <= hi_b) & (lo_b <= hi_a)
    faster = out.ms_b < out.ms_a
    out["verdict"] = ["same" if o else ("faster" if f else "slower") for o, f in zip(overlap, faster)]
    out = out.sort_values(list(RUN_POINT)).reset_index(drop=True)
    effects = [(_splitk_effect(r), _grouping_effect(r)) for r in (a, b)]
    splitk = _pair_effect(effects[0][0], effects[1][0], list(RUN_SHAPE), "speedup")
    grouping = _pair_effect(effects[0][1], effects[1][1], [*_GROUP_PAIR, "group_m"], "gain")
    n = len(out)
    verdicts = Counter(out.verdict)
    summary = {
        "run_a": int(run_a),
        "run_b": int(run_b),
        "n_points": n,
        "n_same": verdicts["same"],
        "n_faster": verdicts["faster"],
        "n_slower": verdicts["slower"],
        "share_same": verdicts["same"] / n if n else float("nan"),
        "median_ratio_b_over_a": _median(out.ratio_b_over_a),
        "n_splitk_shapes": len(splitk),
        "median_splitk_diff_b_minus_a": _median(splitk.diff_b_minus_a),
        "n_grouping_pairs": len(grouping),
        "median_grouping_diff_b_minus_a": _median(grouping.diff_b_minus_a),
    }
    points = out[list(RUN_POINT_COLUMNS)]
    return RunComparison(
        points=points, splitk=splitk, grouping=grouping, summary=summary, judgement=judgement
    )


def _median(values: pd.Series) -> float:
    return float(values.median()) if len(values) else float("nan")


def _splitk_effect(rows: pd.DataFrame) -> pd.DataFrame:
    """Per shape: best unsplit ms over best split ms (splitk_best's speedup)."""
    best = [rows[rows.splitk_side == s].groupby(list(RUN_SHAPE)).ms.min().rename(s) for s in SIDES]
    both = pd.concat(best, axis=1, join="inner")
    return (both.unsplit / both.split).rename("speedup").reset_index()


def _grouping_effect(rows: pd.DataFrame) -> pd.DataFrame:
    """Per block config and group_m > 1: best group_m = 1 ms over best ms of the group_m."""
    best = rows.groupby([*_GROUP_PAIR, "group_m"]).ms.min().reset_index()
    base = best[best.group_m == 1].drop(columns="group_m").rename(columns={"ms": "ms_group1"})
    pairs = best[best.group_m > 1].merge(base, on=list(_GROUP_PAIR))
    pairs["gain"] = pairs.ms_group1 / pairs.ms
    return pairs[[*_GROUP_PAIR, "group_m", "gain"]]


def _pair_effect(a: pd.DataFrame, b: pd.DataFrame, key: list[str], name: str) -> pd.DataFrame:
    """An effect of both runs side by side: {name}_a, {name}_b, diff_b_minus_a, sorted by key."""
    both = a.merge(b, on=key, suffixes=("_a", "_b"))
    both["diff_b_minus_a"] = both[f"{name}_b"] - both[f"{name}_a"]
    return both.sort_values(key).reset_index(drop=True)


def sweep_gpus(conn: Connection) -> pd.DataFrame:
    """Per sweep and GPU model: its ok rows with a time (what compare_runs can match)."""
    r = view("run_results")
    stmt = (
        select(r.c.sweep_id, r.c.gpu_name, func.count().label("n_ok"))
        .where(r.c.status == "ok", r.c.ms.is_not(None), r.c.sweep_id.is_not(None))
        .group_by(r.c.sweep_id, r.c.gpu_name)
        .order_by(r.c.sweep_id, r.c.gpu_name)
    )
    return frame(conn, stmt)


def default_comparison(conn: Connection) -> tuple[int, int] | None:
    """(a, b) to compare first: two runs of one study where there are (b the newest sweep with ok rows
    that an older sweep of the same name shares a GPU model with, a the newest such older one), else
    two sweeps sharing a GPU model, else the two newest sweeps with ok rows; None with fewer."""
    df = sweep_gpus(conn)
    gpus = {int(i): set(g.gpu_name) for i, g in df.groupby("sweep_id")}
    names = dict(sweeps(conn)[["id", "name"]].itertuples(index=False))
    ids = sorted(gpus, reverse=True)
    if len(ids) < 2:
        return None
    for same_study in (True, False):
        for pos, b in enumerate(ids):
            older = [
                a for a in ids[pos + 1 :] if gpus[a] & gpus[b] and (not same_study or names[a] == names[b])
            ]
            if older:
                return older[0], b
    return ids[1], ids[0]
