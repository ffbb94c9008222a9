"""Selecting from the views: a view by name, and the filters every query takes.

Filters take one value or a list of values; None means no filter. They filter the views by columns the
views partition by, so both databases push the filter down to the `ix_measurements_view` index
(timings on 1M rows in docs/results/db_views.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from sqlalchemy import ColumnElement, column, table
from sqlalchemy.sql.expression import TableClause

from db.errors import DatabaseError
from db.views import SHAPE, VIEW_COLUMNS, VIEW_NAMES

Filter = str | int | Sequence[str] | Sequence[int] | None
Shape = tuple[int, int, int]
Range = tuple[int, int]
# What orders and partitions rows per shape: (gpu_name, dtype, m, n, k).
SHAPE_ORDER = SHAPE


def view(name: str) -> TableClause:
    """A selectable for one of the views; an unknown name is a DatabaseError listing the views."""
    if name not in VIEW_COLUMNS:
        raise DatabaseError(f"unknown view {name!r}; the views are: {', '.join(VIEW_NAMES)}")
    return _view(name)


@cache
def _view(name: str) -> TableClause:
    return table(name, *(column(c) for c in VIEW_COLUMNS[name]))


def _plain(value: Any) -> Any:
    """A Python scalar: numpy scalars (from DataFrames) bind as BLOBs on SQLite and match nothing."""
    return value.item() if hasattr(value, "item") else value


def conditions(v: TableClause, **filters: Any) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    for name, value in filters.items():
        if value is None:
            continue
        if name == "shape":
            conds += [v.c[d] == _plain(x) for d, x in zip("mnk", value)]
        elif name.endswith("_range"):
            col = v.c[name.removesuffix("_range")]
            low, high = _plain(value[0]), _plain(value[1])
            # One value as equality: an index then seeks m, n and k (a range stops the seek at m).
            conds += [col == low] if low == high else [col >= low, col <= high]
        elif isinstance(value, str) or not isinstance(value, Iterable):
            conds.append(v.c[name] == _plain(value))
        else:
            conds.append(v.c[name].in_([_plain(x) for x in value]))
    return conds
