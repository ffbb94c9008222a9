"""One definition of each rule that several places use.

The split-K baseline rule (what a split is compared against) is db/splitk_rule.py's:
- read from the source with `ast`, no other module of db/ or dashboard/ compares split_k with 1, names
  the stream-K variants in its SQL, or builds its own rule from the rule's variant lists (the SQL of
  released revisions, frozen, excepted: it keeps the rule of its revision); the checker is also run on
  planted trees, so it is seen to report a copy;
- on a crafted database, every place that computes a split-K speedup or a grouping gain computes the
  same number: splitk_best, splitk_curve, the splitk_speedup view (from the writer's summaries) against
  SPLITK_OVER_ROWS, compare_runs' effects, grouping_effect and grouping_gain.
And db.records.FIRST_SUB_BLOCK_S, which the dashboard reads stored specs with, is the timing policy's.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from dbkit import rec, store
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from db import queries
from db.records import FIRST_SUB_BLOCK_S
from db.splitk_rule import NO_SIDE, STREAM_K
from db.views import SPLITK_OVER_ROWS
from db.writes import start_sweep

REPO = Path(__file__).resolve().parents[2]
RULE = Path("db/splitk_rule.py")
SCANNED = ("db", "dashboard")
SKIPPED = ("db/migrations",)  # each revision's frozen SQL
# The views' SQL of released revisions, frozen (db/views.py's docstring): the rule of their revision.
FROZEN = {Path("db/views.py"): {"_SPLIT_PASS", "_SPLITK", "_SPLITK_0003", "_SPLITK_0005"}}
# split_k compared with 1 in SQL text, and the stream-K variants named in SQL.
SQL_COPY = re.compile(r"\bsplit_k\s*(=|==|!=|<>|>=|<=|>|<)\s*1\b|'streamk")
RULE_LISTS = {"STREAM_K", "NO_SIDE", "LIBRARY"}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _frozen_nodes(tree: ast.Module, names: set[str]) -> set[int]:
    found = set()
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id in names for t in targets):
            found.update(id(n) for n in ast.walk(stmt))
    return found


def _is_split_k(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "split_k"
    if isinstance(node, ast.Name):
        return node.id == "split_k"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "split_k"
    return False


def _copies_in(tree: ast.Module, skip: set[int]) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value == "streamk_hybrid" or SQL_COPY.search(node.value):
                found.append((node.lineno, f"SQL or a variant name: {node.value[:60]!r}"))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(map(_is_split_k, sides)) and any(
                isinstance(s, ast.Constant) and s.value == 1 for s in sides
            ):
                found.append((node.lineno, "split_k compared with 1"))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in RULE_LISTS:
            found.append((node.lineno, f"a rule of its own from {node.id}"))
    return found


def copies_of_the_rule(root: Path) -> list[str]:
    """Each place outside db/splitk_rule.py that writes the split-K baseline rule again: 'path:line: what'."""
    out = []
    for package in SCANNED:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if rel == RULE or any(rel.is_relative_to(s) for s in SKIPPED):
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            skip = _docstrings(tree) | _frozen_nodes(tree, FROZEN.get(rel, set()))
            out += [f"{rel}:{line}: {what}" for line, what in _copies_in(tree, skip)]
    return out


def test_the_repository_has_one_split_k_baseline_rule() -> None:
    assert copies_of_the_rule(REPO) == []


def plant(root: Path, files: dict[str, str]) -> Path:
    base = {
        "db/__init__.py": "",
        "db/splitk_rule.py": "STREAM_K = ('streamk',)\nIS_SPLIT = 'CASE WHEN split_k > 1 THEN 1 END'\n",
        "db/views.py": "_SPLITK = 'SELECT * FROM p WHERE p.split_k > 1'\n",
        "db/queries.py": '"""Compares split_k = 1 against split_k > 1."""\nfrom db import splitk_rule\n',
        "dashboard/__init__.py": "",
    }
    for name, body in {**base, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
    return root


def test_a_planted_tree_with_the_rule_once_passes(tmp_path: Path) -> None:
    assert copies_of_the_rule(plant(tmp_path, {})) == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {"db/queries.py": "def f(rows):\n    return rows[rows.split_k == 1]\n"},
            "db/queries.py:2: split_k compared with 1",
            id="pandas-unsplit-side",
        ),
        pytest.param(
            {"dashboard/frames.py": "def f(r):\n    return r.c.split_k > 1\n"},
            "dashboard/frames.py:2: split_k compared with 1",
            id="sqlalchemy-split-side",
        ),
        pytest.param(
            {"db/summaries.py": "FILL = 'SELECT * FROM m WHERE split_k = 1'\n"},
            "db/summaries.py:1: SQL or a variant name: 'SELECT * FROM m WHERE split_k = 1'",
            id="sql-unsplit-side",
        ),
        pytest.param(
            {"db/summaries.py": "FILL = \"variant NOT IN ('cublas', 'streamk')\"\n"},
            "db/summaries.py:1: SQL or a variant name: \"variant NOT IN ('cublas', 'streamk')\"",
            id="sql-stream-k-list",
        ),
        pytest.param(
            {"db/queries.py": "from db.splitk_rule import STREAM_K\nNOT = ('cublas', *STREAM_K)\n"},
            "db/queries.py:2: a rule of its own from STREAM_K",
            id="a-list-of-its-own",
        ),
        pytest.param(
            {"db/views.py": "_SPLITK_0009 = 'SELECT * FROM p WHERE p.split_k > 1'\n"},
            "db/views.py:1: SQL or a variant name: 'SELECT * FROM p WHERE p.split_k > 1'",
            id="a-new-revision-is-no-frozen-copy",
        ),
    ],
)
def test_a_planted_copy_is_reported(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    assert copies_of_the_rule(plant(tmp_path, files)) == [expected]


# ---- the same numbers from every place on a crafted database ----

SHAPE = (256, 256, 65536)
BLOCK_A, BLOCK_B, BLOCK_C = (128, 128, 64), (64, 64, 64), (128, 64, 64)


def _rows(split_factor: float) -> list:
    """cuBLAS and stream-K faster than any tiled row (no baseline: 0.8 ms, tiled on block B, is), splits
    at 0.5-0.6 ms x split_factor, and one grouping pair on block C (1.2 ms against 1.1 ms)."""
    return [
        rec("cublas", SHAPE, ms=0.1),
        rec("streamk", SHAPE, block=BLOCK_A, ms=0.2),
        rec("streamk_hybrid", SHAPE, block=BLOCK_A, ms=0.25),
        rec("tiled", SHAPE, block=BLOCK_A, ms=1.0),
        rec("tiled", SHAPE, block=BLOCK_B, ms=0.8),
        rec("splitk", SHAPE, block=BLOCK_A, split_k=1, ms=0.9),
        rec("splitk", SHAPE, block=BLOCK_A, split_k=4, ms=0.5 * split_factor),
        rec("splitk", SHAPE, block=BLOCK_A, split_k=8, ms=0.4 * split_factor),
        rec("splitk", SHAPE, block=BLOCK_B, split_k=4, ms=0.6 * split_factor),
        rec("grouped", SHAPE, block=BLOCK_C, group_m=1, ms=1.2),
        rec("grouped", SHAPE, block=BLOCK_C, group_m=8, ms=1.1),
    ]


def _two_runs(engine: Engine) -> tuple[int, int]:
    """Run a with splits 10% slower than run b's; run b is every point's newest run."""
    runs = []
    for factor in (1.1, 1.0):
        with Session(engine) as session:
            runs.append(start_sweep(session, name="splitk", spec={}, command="", n_points=11))
            session.commit()
        store(engine, _rows(factor), sweep_id=runs[-1])
    return runs[0], runs[1]


def test_every_place_computes_the_same_speedups_and_gains(engine: Engine) -> None:
    run_a, run_b = _two_runs(engine)
    with engine.connect() as conn:
        best = queries.splitk_best(conn).iloc[0]
        curve = queries.splitk_curve(
            conn, gpu_name=best["gpu_name"], dtype=best["dtype"], m=SHAPE[0], n=SHAPE[1], k=SHAPE[2]
        )
        eager = queries.splitk_eager(conn).iloc[0]
        compared = queries.compare_runs(conn, run_a, run_b)
        per_block = queries.splitk_speedup(conn)
        result = conn.execute(text(SPLITK_OVER_ROWS))
        over_rows = queries.normalize(pd.DataFrame([tuple(r) for r in result], columns=list(result.keys())))
        effect = queries.grouping_effect(conn).iloc[0]
        gain = queries.grouping_gain(conn).iloc[0]

    # The baseline is tiled on block B (0.8 ms): never cuBLAS (0.1) nor stream-K (0.2, 0.25).
    assert (best.unsplit_variant, best.unsplit_ms, best.split_ms) == ("tiled", 0.8, 0.4)
    assert best.speedup == pytest.approx(2.0)
    assert best.streamk_variant in STREAM_K and best.streamk_speedup == pytest.approx(4.0)
    assert curve.speedup.max() == pytest.approx(best.speedup)
    assert list(curve.split_k) == [1, 4, 8]
    assert eager.unsplit_eager_variant not in NO_SIDE and eager.split_eager_split_k > 1

    splitk = compared.splitk.iloc[0]
    assert splitk.speedup_b == pytest.approx(best.speedup)
    assert splitk.speedup_a == pytest.approx(0.8 / 0.44)

    # Per block shape: the writer's summaries (the view) and the rule over every row agree.
    key = ["block_m", "block_n"]
    view_rows = per_block.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(
        view_rows, over_rows.sort_values(key).reset_index(drop=True), check_like=True
    )
    assert set(view_rows.unsplit_variant) <= {"tiled", "splitk"}
    assert list(view_rows.speedup) == pytest.approx([0.8 / 0.6, 0.9 / 0.4])

    grouping = compared.grouping.iloc[0]
    assert effect.speedup == pytest.approx(1.2 / 1.1)
    assert gain.time_gain == pytest.approx(effect.speedup)
    assert grouping.gain_b == pytest.approx(effect.speedup) and grouping.gain_a == pytest.approx(
        effect.speedup
    )


# ---- a constant two floors read ----


def test_the_dashboard_reads_settling_with_the_timing_policys_first_sub_block() -> None:
    """db.records.FIRST_SUB_BLOCK_S, with which the dashboard tells whether a stored spec settled, is the
    length the farm's timing policy gives a steady block's first sub-block."""
    from farm.timing.policy import TimingPolicy

    assert TimingPolicy.model_fields["first_sub_block_s"].default == FIRST_SUB_BLOCK_S
