"""Dashboard fixtures: dashkit's databases and samples.big_db, built once per session (100k rows in ~6 s)."""

from __future__ import annotations

import sys
from pathlib import Path

import dashkit
import pytest
import samples


@pytest.fixture(autouse=True)
def _keep_main_module():
    """Streamlit's AppTest runs each page as `__main__` and leaves it in sys.modules; a later test
    in this process that spawns workers (tests/db) would have them run the page. Put it back."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture(scope="session")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The small databases by name: empty, small, interpreter, failed_sweep."""
    folder = tmp_path_factory.mktemp("dashboard-dbs")
    return {
        "empty": dashkit.empty_db(folder / "empty.db"),
        "small": dashkit.small_db(folder / "small.db"),
        "interpreter": dashkit.interpreter_db(folder / "interpreter.db"),
        "failed_sweep": dashkit.failed_sweep_db(folder / "failed_sweep.db"),
    }


@pytest.fixture(scope="session")
def big_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return samples.big_db(tmp_path_factory.mktemp("dashboard-big") / "big.db", 100_000)
