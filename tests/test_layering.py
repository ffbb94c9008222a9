"""The import layering, read from the source with `ast` (every import, function-level ones included):

- `kernels` and `db` import nothing of farm, dashboard or the command line;
- `dashboard` imports `db` (and `kernels` at most);
- `farm` imports neither `dashboard` nor the command line;
- the command line (`cli`, and the script farm/sweep.py that `ray submit` runs) is imported by none;
- `tools` (builders of the shipped files, helpers the benchmarks and tests share) imports the product
  but not `benchmarks`; `benchmarks` (the maintained studies) may import anything but the tests; the
  tests import no benchmark (a study is run, not imported: what a test needs lives in `tools`), and
  the product imports neither;
- within `db`, the writer's modules (db.writes, db.claims, db.merge, db.summaries) import nothing of the
  read side (`db.queries` and its modules): what a writer reads before it writes (done_keys) is its own;
- no import cycles between modules.

The checker runs on any tree, so the tests below also plant violations and see them reported.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("kernels", "db", "farm", "dashboard", "cli")
PACKAGES = (*PRODUCT, "tools", "benchmarks", "tests")
# Modules of a package that are command-line scripts, not part of the package's layer: farm/sweep.py
# stays at that path because `ray submit cluster.yaml farm/sweep.py` names it.
SCRIPTS = {"farm.sweep": "cli"}
MAY_IMPORT = {
    "kernels": {"kernels"},
    "db": {"db"},
    "farm": {"farm", "kernels", "db"},
    "dashboard": {"dashboard", "db", "kernels"},
    "cli": set(PRODUCT),
    "tools": {*PRODUCT, "tools"},
    "benchmarks": {*PRODUCT, "tools", "benchmarks"},
    "tests": {*PRODUCT, "tools", "tests"},
}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module name an import statement anywhere in the file may refer to (absolute)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, up level - 1 more
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(
                    package[: len(package) - node.level + 1] + ([node.module] if node.module else [])
                )
            else:
                base = node.module or ""
            # `from pkg import name`: pkg.name where that is a module, else pkg (module_graph decides).
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def module_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of the tree it imports (a `from pkg import name` counts as pkg.name
    where that is a module, else as pkg)."""
    files = {
        module_name(root, path): path
        for package in PACKAGES
        if (root / package).is_dir()
        for path in sorted((root / package).rglob("*.py"))
    }
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        targets = set()
        for name in imported_names(tree, module, path.name == "__init__.py"):
            # The longest prefix that is a module of the tree: `db.queries.view` -> db.queries.
            parts = name.split(".")
            for n in range(len(parts), 0, -1):
                candidate = ".".join(parts[:n])
                if candidate in files:
                    targets.add(candidate)
                    break
        targets.discard(module)
        graph[module] = targets
    return graph


# The writer's side of db and the read side it may not import (db/queries/__init__.py says which is which).
WRITE_SIDE = ("db.writes", "db.claims", "db.merge", "db.summaries")
READ_SIDE = "db.queries"


def layer(module: str) -> str:
    return SCRIPTS.get(module, module.split(".")[0])


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if layer(target) not in MAY_IMPORT[layer(module)]:
                found.append(f"{module} imports {target}: {layer(module)} may not import {layer(target)}")
            elif layer(target) == "cli" and layer(module) == "cli" and target in SCRIPTS:
                found.append(f"{module} imports {target}: a script is imported by nothing")
    return found


def side_violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module in WRITE_SIDE:
        for target in sorted(graph.get(module, ())):
            if target == READ_SIDE or target.startswith(f"{READ_SIDE}."):
                found.append(f"{module} imports {target}: the write side may not import the read side")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def check(root: Path) -> list[str]:
    """Every layering problem of the tree at `root`, one line each (empty: all good)."""
    graph = module_graph(root)
    cycle_lines = [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    return layer_violations(graph) + side_violations(graph) + cycle_lines


# ---- the repository ----


def test_the_repository_is_layered() -> None:
    graph = module_graph(REPO)
    assert {"kernels.tuned", "db.engine", "farm.driver", "dashboard.widgets", "cli.db"} <= set(graph)
    assert {"db.queries.splitk", "db.splitk_rule", "db.fetch", "kernels.sizes"} <= set(graph)
    assert "db.queries.frames" in graph["db.queries.splitk"] and "db.fetch" in graph["db.writes"]
    assert check(REPO) == []


# ---- the checker itself, on planted trees ----


def plant(root: Path, files: dict[str, str]) -> Path:
    base = {
        "kernels/__init__.py": "",
        "kernels/config.py": "",
        "db/__init__.py": "",
        "db/engine.py": "",
        "farm/__init__.py": "",
        "farm/driver.py": "from db import engine\nfrom kernels.config import X\n",
        "farm/sweep.py": "def main():\n    from cli import main\n",
        "dashboard/__init__.py": "",
        "dashboard/common.py": "from db.engine import default_target\n",
        "cli/__init__.py": "from farm import driver\nimport dashboard.common\n",
    }
    for name, text in {**base, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_a_clean_planted_tree_passes(tmp_path: Path) -> None:
    assert check(plant(tmp_path, {})) == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {"db/engine.py": "def f():\n    from farm import run\n"},
            "db.engine imports farm: db may not import farm",
            id="function-level-import-upward",
        ),
        pytest.param(
            {"kernels/config.py": "import db.engine\n"},
            "kernels.config imports db.engine: kernels may not import db",
            id="kernels-imports-db",
        ),
        pytest.param(
            {"farm/driver.py": "from dashboard.common import x\n"},
            "farm.driver imports dashboard.common: farm may not import dashboard",
            id="farm-imports-dashboard",
        ),
        pytest.param(
            {"farm/plan.py": "from cli import main\n"},
            "farm.plan imports cli: farm may not import cli",
            id="farm-imports-cli",
        ),
        pytest.param(
            {"dashboard/common.py": "from farm import driver\n"},
            "dashboard.common imports farm.driver: dashboard may not import farm",
            id="dashboard-imports-farm",
        ),
        pytest.param(
            {"farm/plan.py": "from farm.sweep import main\n"},
            "farm.plan imports farm.sweep: farm may not import cli",
            id="farm-imports-the-script",
        ),
        pytest.param(
            {"db/views.py": "from .engine import make_engine\n", "db/engine.py": "from . import views\n"},
            "import cycle: db.engine -> db.views",
            id="relative-import-cycle",
        ),
        pytest.param(
            {
                "farm/a.py": "import farm.b\n",
                "farm/b.py": "from farm import c\n",
                "farm/c.py": "def f():\n    from farm.a import g\n",
            },
            "import cycle: farm.a -> farm.b -> farm.c",
            id="three-module-cycle",
        ),
        pytest.param(
            {"benchmarks/fidelity.py": "", "tests/kernels/test_x.py": "from benchmarks.fidelity import f\n"},
            "tests.kernels.test_x imports benchmarks.fidelity: tests may not import benchmarks",
            id="test-imports-a-benchmark",
        ),
        pytest.param(
            {"benchmarks/fidelity.py": "", "tools/gpu_methods.py": "import benchmarks.fidelity\n"},
            "tools.gpu_methods imports benchmarks.fidelity: tools may not import benchmarks",
            id="tool-imports-a-benchmark",
        ),
        pytest.param(
            {"tools/ports.py": "", "farm/driver.py": "from tools.ports import free_port\n"},
            "farm.driver imports tools.ports: farm may not import tools",
            id="product-imports-a-tool",
        ),
        pytest.param(
            {
                "db/queries/__init__.py": "",
                "db/queries/frames.py": "",
                "db/writes.py": "from db.queries import frames\n",
            },
            "db.writes imports db.queries.frames: the write side may not import the read side",
            id="writer-imports-the-read-side",
        ),
        pytest.param(
            {
                "db/queries/__init__.py": "",
                "db/claims.py": "def f():\n    from db.queries import done_keys\n",
            },
            "db.claims imports db.queries: the write side may not import the read side",
            id="claims-import-the-read-side-package",
        ),
        pytest.param(
            {
                "db/queries/__init__.py": "from db.queries.splitk import best\n",
                "db/queries/splitk.py": "from db.queries import view\n",
            },
            "import cycle: db.queries -> db.queries.splitk",
            id="a-query-module-imports-its-package",
        ),
        pytest.param(
            {"tools/ports.py": "", "cli/__init__.py": "import tools.ports\n"},
            "cli imports tools.ports: cli may not import tools",
            id="cli-imports-a-tool",
        ),
    ],
)
def test_a_planted_violation_is_reported(tmp_path: Path, files: dict, expected: str) -> None:
    assert check(plant(tmp_path, files)) == [expected]
