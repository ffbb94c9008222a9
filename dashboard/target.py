"""Which database the dashboard opens, and whether it is the demo one shipped with the package.

Without `--db`: $FARM_DB, else results.db in the working directory when it exists (the user's own
sweeps), else the demo database in dashboard/demo/: real sweeps on an H200, so that a first look needs
no GPU and no sweep. The pages say so on every page (dashboard.app's banner).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from db.engine import DEFAULT_TARGET, TARGET_VARIABLE

# tools/demo_db.py builds it from the sweeps named in docs/findings.md.
DEMO_DB = Path(__file__).resolve().with_name("demo") / "h200.db"


def resolve(explicit: str | None = None) -> str:
    """The dashboard's database: `explicit` (--db), else $FARM_DB, else ./results.db if it exists, else
    the demo database. Only the dashboard falls back to the demo: a sweep writes results.db."""
    if explicit:
        return explicit
    if os.environ.get(TARGET_VARIABLE):
        return os.environ[TARGET_VARIABLE]
    if Path(DEFAULT_TARGET).exists():
        return DEFAULT_TARGET
    return str(DEMO_DB)


def parse_db(argv: Sequence[str]) -> str:
    """`--db` from the script's arguments (those after `--` of `streamlit run app.py -- --db X`), else
    $FARM_DB (how `farm dashboard` passes it: a URL's password never reaches a command line), else
    results.db if it exists, else the shipped demo database (resolve)."""
    args = list(argv)
    if "--" in args:
        args = args[args.index("--") + 1 :]
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--db")
    return resolve(parser.parse_known_args(args)[0].db)


def db_target() -> str:
    """The database this server shows: Streamlit reruns the script with the same sys.argv every time."""
    return parse_db(sys.argv[1:])


def is_demo(target: str) -> bool:
    """Whether `target` is one of the shipped demo databases (h200.db, the llm preset's
    h200-llm.db, ...: by folder, however it was reached)."""
    if "://" in target and not target.startswith("sqlite:///"):
        return False
    path = Path(target.removeprefix("sqlite:///")).expanduser()
    return path.exists() and path.resolve().parent == DEMO_DB.parent


def banner(environments: pd.DataFrame, sweeps: pd.DataFrame) -> str:
    """The demo notice every page shows: where the data come from, from the database's own rows."""
    gpus = ", ".join(
        f"{e.gpu_name} (driver {e.driver_version}, CUDA {e.cuda_version}, torch {e.torch_version}, "
        f"Triton {e.triton_version}, code version {e.project_version})"
        for e in environments.itertuples()
    )
    dates = ", ".join(sorted({d.strftime("%Y-%m-%d") for d in pd.to_datetime(sweeps.started_at)}))
    runs = ", ".join(
        f"#{s.id} {s.name} ({s.status}, {s.n_ok} of {s.n_points} points)"
        for s in sweeps.sort_values("id").itertuples()
    )
    return (
        f"**Demo data**, read-only: real sweeps on {gpus}, measured {dates}: {runs}. "
        "Your own results: `farm sweep --preset smoke`, then `farm dashboard` opens results.db. "
        "What these data show and where they fall short: docs/findings.md."
    )


def opened_local_results(target: str | None = None) -> bool:
    """Whether the dashboard shows the results.db of the working directory (`farm dashboard` with no --db
    and no $FARM_DB falls back to it when it exists): a smoke sweep's CPU times may sit there while the
    user expected the demo."""
    target = db_target() if target is None else target
    if "://" in target and not target.startswith("sqlite:///"):
        return False
    path = Path(target.removeprefix("sqlite:///")).expanduser()
    return path.exists() and path.resolve() == Path(DEFAULT_TARGET).resolve()
