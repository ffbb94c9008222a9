"""One set of measurement columns: the record's fields (db/records.py) are the model's columns (db/models.py),
the results view's (db/views.py), the columns the migrations create (db/migrations) and the fields the
worker fills (farm/worker.py `_record`, with the timing's columns: farm/timing/samples.py). Each is
written out by hand in its file; this fails the moment one of them gains, loses or
reorders a column the others do not."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy import inspect as reflect

from db.models import Measurement
from db.records import MEASUREMENT_FIELDS, MeasurementRecord
from db.views import ENVIRONMENT_COLUMNS, VIEW_COLUMNS

REPO = Path(__file__).resolve().parents[2]
# Columns of measurements that are not the record's: the row's id, where and in which run it was stored,
# whether it is the newest run of its point, and when it was last written.
ROW_ONLY = ("id", "environment_id", "sweep_id", "latest", "updated_at")
# What the results view adds around the record's columns: the ids and the environment's columns.
VIEW_ONLY = ("id", "environment_id", "sweep_id", *ENVIRONMENT_COLUMNS, "updated_at")


def _function(path: Path, name: str, cls: str | None = None) -> ast.FunctionDef:
    tree = ast.parse(path.read_text())
    scope = tree.body
    if cls is not None:
        scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name)


def _call_keywords(fn: ast.FunctionDef, callee: str) -> set[str]:
    """Keyword names of every call to `callee` (a name or an attribute) in fn."""
    names = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == callee) or (
                isinstance(f, ast.Name) and f.id == callee
            ):
                names |= {k.arg for k in node.keywords if k.arg}
    return names


def worker_fields() -> set[str]:
    """The record fields a worker's record has a value for: what farm/worker.py `_record` passes, what
    farm/plan.py `Point.record` fills (identity and config), what farm/metrics.py `derived` returns, what
    the timing's columns (farm/timing/samples.py `columns`), what the record computes itself (__post_init__)
    and its timestamp (default_factory: when measured)."""
    record = _function(REPO / "farm" / "worker.py", "_record", cls="GpuWorker")
    passed = _call_keywords(record, "record")
    point = _call_keywords(_function(REPO / "farm" / "plan.py", "record", cls="Point"), "MeasurementRecord")
    keys = _call_keywords(_function(REPO / "farm" / "metrics.py", "derived"), "update")
    for fn in (
        _function(REPO / "farm" / "metrics.py", "derived"),
        _function(REPO / "farm" / "timing" / "samples.py", "columns", cls="PointTiming"),
    ):
        for node in ast.walk(fn):
            if isinstance(node, ast.Dict):
                keys |= {k.value for k in node.keys if isinstance(k, ast.Constant)}
    post_init = (
        inspect.getsource(MeasurementRecord.__post_init__)
        if hasattr(MeasurementRecord, "__post_init__")
        else ""
    )
    computed = {
        t.attr
        for node in ast.walk(ast.parse(inspect.cleandoc("\n" + post_init))) if isinstance(node, ast.Assign)
        for t in node.targets if isinstance(t, ast.Attribute)
    }  # fmt: skip
    return (passed - {"error"}) | point | keys | computed | {"created_at"}


def test_record_fields_are_the_models_columns_in_order() -> None:
    model = [c.name for c in Measurement.__table__.c if c.name not in ROW_ONLY]
    assert model == list(MEASUREMENT_FIELDS)


def test_record_fields_are_the_results_views_columns_in_order() -> None:
    for name in ("results", "best_configs"):
        shown = [c for c in VIEW_COLUMNS[name] if c not in VIEW_ONLY]
        assert shown == list(MEASUREMENT_FIELDS), name
    run = [c for c in VIEW_COLUMNS["run_results"] if c not in (*VIEW_ONLY, "latest")]
    assert run == list(MEASUREMENT_FIELDS)


def test_record_fields_are_what_the_worker_fills() -> None:
    assert worker_fields() == set(MEASUREMENT_FIELDS)


def test_migrated_schema_has_the_record_fields(engine: Engine) -> None:
    """The database that the migrations build (the `engine` fixture upgrades an empty one to head) on both
    backends: its measurements table and its views hold the record's columns."""
    found = reflect(engine)
    stored = {c["name"] for c in found.get_columns("measurements")} - set(ROW_ONLY)
    assert stored == set(MEASUREMENT_FIELDS)
    for name in ("results", "run_results", "best_configs"):
        assert [c["name"] for c in found.get_columns(name)] == list(VIEW_COLUMNS[name]), name
