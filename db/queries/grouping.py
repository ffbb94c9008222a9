"""Grouped program order (group_m): what it gains over group_m = 1 with the same block config, in time
(the grouping_effect view) and in energy (grouping_gain)."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Connection, func, select

from db.queries.fidelity import ENERGY_COLUMNS, trusted_energy
from db.queries.frames import frame, view_frame
from db.queries.select import SHAPE_ORDER, Filter, Shape, conditions, view
from db.queries.winners import winner_order
from db.views import GROUP_CONFIG

# What a grouping gain pairs on (besides group_m): the shape and the block config.
GAIN_KEY = (*SHAPE_ORDER, *GROUP_CONFIG)
_GAIN_ROW = ("id", "ms", "joules_per_launch", "avg_watts", "timing_regime")


def grouping_effect(
    conn: Connection,
    *,
    gpu_name: Filter = None,
    dtype: Filter = None,
    variant: Filter = None,
    shape: Shape | None = None,
) -> pd.DataFrame:
    """The grouping_effect view: per block config, the best time of each group_m > 1 against group_m = 1."""
    filters = dict(gpu_name=gpu_name, dtype=dtype, variant=variant, shape=shape)
    return view_frame(conn, "grouping_effect", (*GAIN_KEY, "group_m"), **filters)


def grouping_gain(
    conn: Connection, *, gpu_name: Filter = None, dtype: Filter = None, shape: Shape | None = None
) -> pd.DataFrame:
    """Per (gpu_name, dtype, shape, block config) and group_m > 1: what grouped program order gains over
    group_m = 1 with the same block config, in time and in energy.

    Each side is the fastest ok row of its group_m (as the grouping_effect view picks it). Columns: the
    key, group_m, operand_bytes, l2_bytes, operand_to_l2, then for the group_m row (no prefix) and the
    group_m = 1 row (suffix `_group1`): id, ms, joules_per_launch, avg_watts, timing_regime; time_gain =
    ms_group1 / ms (the view's speedup) and energy_gain = joules_group1 / joules, NULL unless both rows
    have a trusted energy reading (`trusted_energy`; > 1: grouping saves).
    """
    r = view("results")
    scope = conditions(r, gpu_name=gpu_name, dtype=dtype, shape=shape, status="ok")
    # Only variants that ran some group_m > 1 can pair: most rows (tiled, split-K) never do. Ranking them
    # too took 0.26 s on the 100k-row sample's H200 bfloat16, this 0.20 s (grouping_effect: 0.16 s).
    grouped = select(r.c.variant).where(*scope, r.c.group_m > 1).distinct()
    ranked = (
        select(
            *(r.c[c] for c in GAIN_KEY),
            r.c.group_m,
            *(trusted_energy(r, c) if c in ENERGY_COLUMNS else r.c[c] for c in _GAIN_ROW),
            r.c.operand_bytes,
            r.c.l2_bytes,
            func.row_number()
            .over(partition_by=[*(r.c[c] for c in GAIN_KEY), r.c.group_m], order_by=winner_order(r))
            .label("rn"),
        )
        .where(*scope, r.c.ms.is_not(None), r.c.variant.in_(grouped))
        .subquery()
    )
    cols = [c for c in ranked.c if c.name != "rn"]
    best = frame(conn, select(*cols).where(ranked.c.rn == 1))
    base = best[best.group_m == 1][[*GAIN_KEY, *_GAIN_ROW]]
    out = best[best.group_m > 1].merge(base, on=list(GAIN_KEY), suffixes=("", "_group1"))
    out = out.rename(columns={"joules_per_launch_group1": "joules_group1"})
    out["operand_to_l2"] = out.operand_bytes.astype("float64") / out.l2_bytes.astype("float64")
    out["time_gain"] = out.ms_group1 / out.ms
    # Rows stored with 0 J (NVML's counter did not tick in a short block) have no known energy.
    metered = (out.joules_group1 > 0) & (out.joules_per_launch > 0)
    out["energy_gain"] = (out.joules_group1 / out.joules_per_launch).where(metered)
    return out.sort_values([*GAIN_KEY, "group_m"]).reset_index(drop=True)
