"""How a searched sweep closed in on each shape's best: the best kernel time it had found after each
point it measured, against the best an exhaustive sweep of the same shape found (the Search page).

A search is the sweeps of one `farm sweep --search S` command line (S other than grid): running the same
command again resumes the search under a new sweep id, counting what the first one stored against the
budget (farm/source.py), so its sweeps are one curve. An exhaustive best comes from every other sweep
that is no search (a grid sweep, rows written without a sweep): the fastest ok row of a non-baseline
variant of the same GPU model, dtype and shape, with how many such points were measured. Library
baselines (cuBLAS) are measured by every search outside its budget: they are the yardstick, not points.
"""

from __future__ import annotations

import math
import shlex

import pandas as pd
from sqlalchemy import Connection, case, func, select, tuple_
from sqlalchemy.sql.expression import TableClause

from db.conclusions import readable_ms, short_command
from db.queries import conditions, frame, sweeps, view
from db.splitk_rule import is_library

# Within this of the exhaustive best a search found the shape's best: the same config measured in two
# runs differs by 0.8% at the median and 6.8% at the 90th percentile (docs/design.md, "Search").
WITHIN = 0.02
# What `farm sweep` searches with when --search or --budget is not given (cli/sweep.py's defaults).
GRID = "grid"
DEFAULT_BUDGET = "10%"

SHAPE_KEY = ["gpu_name", "dtype", "m", "n", "k"]
SEARCH_KEY = ["search", *SHAPE_KEY]
PROGRESS_COLUMNS = (
    "search", "strategy", "budget", "command", *SHAPE_KEY, "point", "id", "sweep_id", "variant",
    "config_key", "status", "ms", "best_ms", "exhaustive_ms", "exhaustive_points", "cublas_ms",
)  # fmt: skip
SHAPE_COLUMNS = (
    "search", "strategy", "budget", *SHAPE_KEY, "shape", "points", "best_ms", "exhaustive_ms",
    "exhaustive_points", "share_of_exhaustive", "miss", "points_to_within", "cublas_ms",
)  # fmt: skip


def parse_search(command: str | None) -> tuple[str, str] | None:
    """(strategy, budget) of a stored `farm sweep` command line that searches (--search other than grid),
    with farm sweep's default budget where it gives none; None for an exhaustive sweep or no command."""
    try:
        words = shlex.split(command or "")
    except ValueError:  # an unbalanced quote: no command line farm sweep stored
        return None
    found: dict[str, str] = {}
    for i, word in enumerate(words):
        for flag in ("--search", "--budget"):
            if word == flag and i + 1 < len(words):
                found[flag] = words[i + 1]
            elif word.startswith(f"{flag}="):
                found[flag] = word.split("=", 1)[1]
    strategy = found.get("--search", GRID)
    if strategy == GRID:
        return None
    return strategy, found.get("--budget", DEFAULT_BUDGET)


def searches(conn: Connection) -> pd.DataFrame:
    """The searches of the database, newest first: search (its first sweep's id), strategy, budget,
    command (as typed: db.conclusions.short_command), sweep_ids (ascending) and started_at (the first
    sweep's start)."""
    rows = []
    for command, group in sweeps(conn).sort_values("id").groupby("command", sort=False):
        parsed = parse_search(command)
        if parsed is None:
            continue
        ids = [int(i) for i in group.id]
        rows.append(
            {
                "search": ids[0],
                "strategy": parsed[0],
                "budget": parsed[1],
                "command": short_command(command),
                "sweep_ids": ids,
                "started_at": group.started_at.iloc[0],
            }
        )
    columns = ["search", "strategy", "budget", "command", "sweep_ids", "started_at"]
    return pd.DataFrame(rows, columns=columns).sort_values("search", ascending=False).reset_index(drop=True)


def search_progress(
    conn: Connection, *, gpu_name: str | None = None, dtype: str | None = None, search: int | None = None
) -> pd.DataFrame:
    """Every non-baseline point each search measured (of one GPU model, dtype and search where given), in
    measurement order (measurements.id) per (search, gpu_name, dtype, m, n, k), one row each.

    Columns PROGRESS_COLUMNS: search, strategy, budget, command (searches()); the shape; point (1, 2, ...:
    points measured so far, failed ones included, as they cost their time); id, sweep_id, variant,
    config_key, status, ms (ms only where ok); best_ms, the fastest ok ms up to this point (NaN before the
    first ok one); exhaustive_ms and exhaustive_points, the fastest ok ms of a non-baseline variant in
    the sweeps that are no search and the number of non-baseline points they measured (NaN and 0 where
    none measured the shape); cublas_ms, the search's own fastest cuBLAS row, else any sweep's.
    """
    every = searches(conn)
    every_search = [s for ids in every.sweep_ids for s in ids]
    found = every if search is None else every[every.search == int(search)]
    empty = pd.DataFrame(columns=list(PROGRESS_COLUMNS))
    if found.empty:
        return empty
    sweep_of = {sweep: row for row in found.itertuples(index=False) for sweep in row.sweep_ids}
    r = view("run_results")
    filters = conditions(r, gpu_name=gpu_name, dtype=dtype)
    cols = ("id", "sweep_id", *SHAPE_KEY, "variant", "config_key", "status", "ms")
    rows = frame(conn, select(*(r.c[c] for c in cols)).where(r.c.sweep_id.in_(list(sweep_of)), *filters))
    if rows.empty:
        return empty
    for c in ("search", "strategy", "budget", "command"):
        rows[c] = [getattr(sweep_of[int(s)], c) for s in rows.sweep_id]
    rows = rows.sort_values("id", kind="stable").reset_index(drop=True)
    rows["ms"] = rows.ms.where(rows.status == "ok")
    library = rows.variant.map(is_library).astype(bool)
    own_cublas = rows[library].groupby(SEARCH_KEY).ms.min().rename("cublas_ms")
    points = rows[~library].copy()
    by_shape = points.groupby(SEARCH_KEY, sort=False)
    points["point"] = by_shape.cumcount() + 1
    points["best_ms"] = by_shape.ms.cummin()  # NaN where the point failed: carried from the last ok
    points["best_ms"] = points.groupby(SEARCH_KEY, sort=False).best_ms.ffill()

    shapes = points[SHAPE_KEY].drop_duplicates()
    exhaustive = _exhaustive(conn, r, shapes, every_search)
    points = points.merge(exhaustive, on=SHAPE_KEY, how="left").merge(
        own_cublas.reset_index(), on=SEARCH_KEY, how="left"
    )
    points["cublas_ms"] = points.cublas_ms.fillna(points.any_cublas_ms)
    points["exhaustive_points"] = points.exhaustive_points.fillna(0).astype("Int64")
    points = points.sort_values([*SEARCH_KEY, "point"]).reset_index(drop=True)
    return points[list(PROGRESS_COLUMNS)]


def _exhaustive(conn: Connection, r: TableClause, shapes: pd.DataFrame, searched: list[int]) -> pd.DataFrame:
    """Per shape of `shapes`, from the rows of every sweep not in `searched`: exhaustive_ms,
    exhaustive_points (non-baseline points, any status) and any_cublas_ms (the fastest ok cuBLAS row)."""
    ok_ms = func.min(case((r.c.status == "ok", r.c.ms)))
    point = (*SHAPE_KEY, "variant", "config_key")
    mnk = sorted({(int(m), int(n), int(k)) for m, n, k in shapes[["m", "n", "k"]].itertuples(index=False)})
    stmt = (
        select(*(r.c[c] for c in point), ok_ms.label("ms"))
        .where(
            tuple_(r.c.m, r.c.n, r.c.k).in_(mnk),
            r.c.gpu_name.in_(sorted(set(shapes.gpu_name))),
            r.c.dtype.in_(sorted(set(shapes.dtype))),
            r.c.sweep_id.not_in(searched),
        )
        .group_by(*(r.c[c] for c in point))
    )
    rows = frame(conn, stmt)
    library = rows.variant.map(is_library).astype(bool)
    kernels = rows[~library].groupby(SHAPE_KEY)
    out = pd.concat(
        [
            kernels.ms.min().rename("exhaustive_ms"),
            kernels.size().rename("exhaustive_points"),
            rows[library].groupby(SHAPE_KEY).ms.min().rename("any_cublas_ms"),
        ],
        axis=1,
    ).reset_index()
    return (
        shapes.merge(out, on=SHAPE_KEY, how="left")
        if len(out)
        else shapes.assign(exhaustive_ms=math.nan, exhaustive_points=0, any_cublas_ms=math.nan)
    )


def search_shapes(progress: pd.DataFrame) -> pd.DataFrame:
    """search_progress() per (search, shape): columns SHAPE_COLUMNS, the worst miss first.

    shape "MxNxK"; points measured; best_ms (the last best so far); exhaustive_ms and exhaustive_points;
    share_of_exhaustive = points / exhaustive_points (NaN without one); miss = best_ms / exhaustive_ms - 1
    (below 0: the search found a faster time than the exhaustive sweep, in noise or in fact; NaN where
    either is missing); points_to_within, the first point whose best so far was within WITHIN of the
    exhaustive best (NA where it never was); cublas_ms.
    """
    if progress.empty:
        return pd.DataFrame(columns=list(SHAPE_COLUMNS))
    last = progress.groupby(SEARCH_KEY, sort=False).tail(1).copy()
    last["points"] = last.point.astype("Int64")
    last["shape"] = [f"{int(m)}x{int(n)}x{int(k)}" for m, n, k in zip(last.m, last.n, last.k)]
    exhaustive_points = last.exhaustive_points.astype("float64")
    last["share_of_exhaustive"] = last.points.astype("float64") / exhaustive_points.where(
        exhaustive_points > 0
    )
    last["miss"] = last.best_ms / last.exhaustive_ms - 1
    within = progress[progress.best_ms <= progress.exhaustive_ms * (1 + WITHIN)]
    first = within.groupby(SEARCH_KEY).point.min().rename("points_to_within").reset_index()
    out = last.drop(columns="point").merge(first, on=SEARCH_KEY, how="left")
    out["points_to_within"] = out.points_to_within.astype("Int64")
    out = out.sort_values(["miss", *SEARCH_KEY], ascending=[False, True, True, True, True, True, True])
    return out[list(SHAPE_COLUMNS)].reset_index(drop=True)


def _percent(share: float) -> str:
    return f"{share * 100:.1f}%" if abs(share) >= 0.001 else f"{share * 100:.2g}%"


def conclusion(
    conn: Connection, *, gpu_name: str | None = None, dtype: str | None = None, search: int | None = None
) -> str:
    """What the Search page concludes: on how many shapes the search (the newest one where none is given)
    landed within WITHIN of the exhaustive best, with what share of the points, and its worst miss."""
    found = searches(conn)
    if found.empty:
        return "This database holds no searched sweep: nothing to set against an exhaustive one yet."
    if search is None:
        search = int(found.search.iloc[0])
    row = found[found.search == int(search)]
    if row.empty:
        return f"No search #{search} in this database."
    strategy, budget = row.strategy.iloc[0], row.budget.iloc[0]
    shapes = search_shapes(search_progress(conn, gpu_name=gpu_name, dtype=dtype, search=search))
    who = f"The {strategy} search #{search} (budget {budget})"
    if shapes.empty:
        scope = f" on {gpu_name} in {dtype}" if gpu_name and dtype else ""
        return f"{who} measured no kernel point{scope}."
    compared = shapes[shapes.exhaustive_ms.notna()]
    if compared.empty:
        return (
            f"{who} measured {len(shapes)} shapes, {int(shapes.points.sum()):,} points in all; no exhaustive "
            "sweep here measured them, so its best cannot be set against the grid's."
        )
    within = compared[compared.miss <= WITHIN]
    share = float(compared.points.sum()) / float(compared.exhaustive_points.astype("float64").sum())
    said = (
        f"{who} found within {WITHIN:.0%} of the exhaustive best on {len(within)} of "
        f"{len(compared)} shapes with {_percent(share)} of the points"
    )
    misses = compared.dropna(subset=["miss"])
    if len(misses) < len(compared):
        said += f"; no ok point on {len(compared) - len(misses)} of them"
    if len(misses):
        worst = misses.iloc[0]  # search_shapes sorts the worst miss first
        if worst.miss > 0:
            said += f"; worst miss {_percent(worst.miss)} at {worst['shape']} ({readable_ms(worst.best_ms)} "
            said += f"against {readable_ms(worst.exhaustive_ms)})"
        else:
            said += "; it matched or beat the exhaustive best on every one"
    if len(compared) < len(shapes):
        said += f" ({len(shapes) - len(compared)} more shapes have no exhaustive sweep)"
    return said + "."
