"""What a search learns from: ok rows of stored sweeps (db/observations.py holds the query), and the
best configs of the measured shapes nearest a group (the first points a model or tpe search tries)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from db.models import CONFIG_COLUMNS
from farm.plan import Point
from kernels import MatmulConfig, get_variant

if TYPE_CHECKING:
    import pandas as pd

# pandas and the database modules load on first use: the driver's path imports this package, and a
# dry run imports no pandas (tests/farm/test_driver_imports.py).


@dataclass(eq=False)
class Observations:
    """ok rows to learn from (columns: db.observations.OBSERVATION_COLUMNS).

    `cache` holds what strategies derive from the rows alone (a model fitted on them): every search
    handed the same Observations shares it, so a replay over many seeds fits once per training set."""

    rows: pd.DataFrame
    cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def empty(cls) -> Observations:
        import pandas as pd

        from db.observations import OBSERVATION_COLUMNS

        return cls(pd.DataFrame(columns=list(OBSERVATION_COLUMNS)))

    def __len__(self) -> int:
        return len(self.rows)

    def without_shapes(self, shapes: Iterable[tuple[int, int, int]]) -> Observations:
        """These rows minus those of the (m, n, k) shapes given (the same object when none is dropped,
        so that its cache stays shared)."""
        drop = {tuple(map(int, s)) for s in shapes}
        if not drop or self.rows.empty:
            return self
        keep = [(m, n, k) not in drop for m, n, k in self.shape_tuples()]
        return self if all(keep) else Observations(self.rows[keep].reset_index(drop=True))

    def for_gpu(self, gpu_name: str | None, dtype: str | None) -> Observations:
        """The rows of one GPU and dtype (None: any)."""
        import pandas as pd

        keep = pd.Series(True, index=self.rows.index)
        if gpu_name is not None:
            keep &= self.rows["gpu_name"] == gpu_name
        if dtype is not None:
            keep &= self.rows["dtype"] == dtype
        return self if keep.all() else Observations(self.rows[keep].reset_index(drop=True))

    def shape_tuples(self) -> list[tuple[int, int, int]]:
        return list(zip(*(self.rows[c].astype(int).tolist() for c in "mnk")))

    def shapes(self) -> set[tuple[int, int, int]]:
        return set(self.shape_tuples())


def load_observations(
    urls: Sequence[str], *, gpu_name: str | None = None, dtype: str | None = None
) -> Observations:
    """ok rows of each point's newest run in every database named (DatabaseError for a bad one)."""
    import pandas as pd

    from db.export import reading
    from db.observations import observation_rows

    frames = []
    for url in urls:
        with reading(url) as conn:
            frames.append(observation_rows(conn, gpu_name=gpu_name, dtype=dtype))
    frames = [f for f in frames if not f.empty]
    if not frames:
        return Observations.empty()
    return Observations(pd.concat(frames, ignore_index=True))


def row_config(row) -> MatmulConfig:
    """The config of an observation row (extras, which only config keys hold, are not needed here)."""
    return MatmulConfig(
        **{c: (str(row[c]) if c == "input_precision" else int(row[c])) for c in CONFIG_COLUMNS}
    )


def shape_distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """Euclidean distance of two shapes in log2 (m, n, k): 2x along one axis is 1."""
    return math.sqrt(sum((math.log2(x) - math.log2(y)) ** 2 for x, y in zip(a, b)))


def nearest_best_points(
    observations: Observations | None,
    group_shape: tuple[int, int, int],
    candidates: Sequence[Point],
    limit: int,
) -> list[Point]:
    """Up to `limit` candidates that were the fastest of their shape among the measured shapes nearest
    this group's: each nearest shape's best candidate first, then their second best, and so on, nearest
    shape first. Library baselines are not candidates."""
    if observations is None or observations.rows.empty or limit <= 0:
        return []
    by_config = {(p.variant, p.config): p for p in candidates}
    rows = observations.rows
    rows = rows[[not _is_baseline(v) for v in rows["variant"]]]
    ranked: list[list[Point]] = []
    for _shape, rows_of_shape in sorted(
        rows.groupby(["m", "n", "k"], sort=False),
        key=lambda item: shape_distance(tuple(map(int, item[0])), group_shape),
    ):
        found = []
        for _, row in rows_of_shape.sort_values("ms", kind="stable").iterrows():
            point = by_config.get((row["variant"], row_config(row)))
            if point is not None and point not in found:
                found.append(point)
            if len(found) >= limit:
                break
        ranked.append(found)
        if len(ranked) >= limit:
            break
    out: list[Point] = []
    for depth in range(limit):
        for found in ranked:
            if depth < len(found) and found[depth] not in out:
                out.append(found[depth])
    return out[:limit]


def _is_baseline(variant: str) -> bool:
    try:
        return get_variant(variant).baseline
    except KeyError:
        return False
