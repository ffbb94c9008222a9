"""The rows a search learns from and replays: each point's newest row (the `results` view) with the
GPU's SM count and L2 size beside it.

`observation_rows` reads ok rows with a time, what farm.search's cost model trains on;
`sweep_rows` reads every status, what a replay (farm.search.replay) treats as a stored sweep: an ok
row's time is its measurement, any other row a failure.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from sqlalchemy import Connection, select

from db.models import CONFIG_COLUMNS
from db.queries import conditions, frame, view

# Identity, config and the environment's limits: what a model needs to rebuild a point and its
# derived numbers (farm.metrics), and the time to learn.
OBSERVATION_COLUMNS: tuple[str, ...] = (
    "gpu_name", "sm_count", "l2_bytes", "dtype", "m", "n", "k", "variant", *CONFIG_COLUMNS, "ms",
)  # fmt: skip
SWEEP_COLUMNS: tuple[str, ...] = (*OBSERVATION_COLUMNS, "config_key", "status")


def observation_rows(
    conn: Connection, *, gpu_name: str | None = None, dtype: str | Sequence[str] | None = None
) -> pd.DataFrame:
    """ok rows with a time of each point's newest run, optionally of one GPU and dtype."""
    v = view("results")
    stmt = (
        select(*(v.c[c] for c in OBSERVATION_COLUMNS))
        .where(v.c.status == "ok", v.c.ms.is_not(None), *conditions(v, gpu_name=gpu_name, dtype=dtype))
        .order_by(v.c.id)
    )
    return frame(conn, stmt)


def sweep_rows(conn: Connection) -> pd.DataFrame:
    """Every row of each point's newest run, whatever its status (ms is null where none was measured)."""
    v = view("results")
    return frame(conn, select(*(v.c[c] for c in SWEEP_COLUMNS)).order_by(v.c.id))
