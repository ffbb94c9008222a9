"""What every page shares: the database target, the cached engine and query results, the GPU and
dtype picker, and the notices (empty database, interpreter rows)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from dashboard import target
from db import queries
from db.engine import describe
from db.schema import open_engine

# Section -> pages as (file in app_pages/ and url path, title, Material icon); DEFAULT_PAGE is at "/".
NAV = {
    "": [("overview", "Overview", "home")],
    "Why a schedule wins": [
        ("shape", "Shape", "straighten"),
        ("splitk", "Split-K", "content_cut"),
        ("grouping", "Grouping / L2", "grid_view"),
        ("cublas", "Versus cuBLAS", "speed"),
    ],
    "Data": [
        ("explorer", "Explorer", "table_view"),
        ("accuracy", "Accuracy", "target"),
        ("sweeps", "Sweeps and environments", "history"),
        ("compare", "Compare sweeps", "compare_arrows"),
    ],
}
DEFAULT_PAGE = "overview"
# Page (file in app_pages/, url path) -> its title, in the sidebar's order.
PAGES = {name: title for pages in NAV.values() for name, title, _ in pages}
# A running sweep commits a batch every few seconds: 30 s keeps the pages close to live, while the
# reruns every widget change causes read the cache (a page on 100k rows: docs/bench/dashboard.md).
TTL_S = 30
INTERPRETER_NOTE = (
    "Rows from Triton's interpreter (TRITON_INTERPRET=1): their times are CPU times, not GPU timings. "
    "Tile and L2 ratios describe a nominal 132-SM GPU; the speedups say nothing about a real one."
)
NOT_GPU = "CPU times, not GPU timings"
INTERPRETER_LABEL = f"interpreter: {NOT_GPU}"  # the `timing` column of interpreter rows
GPU_LABEL = "GPU"


def parse_db(argv: Sequence[str]) -> str:
    """`--db` from the script's arguments (those after `--` of `streamlit run app.py -- --db X`), else
    $FARM_DB (how `farm dashboard` passes it: a URL's password never reaches a command line), else
    results.db if it exists, else the shipped demo database (dashboard.target.resolve)."""
    args = list(argv)
    if "--" in args:
        args = args[args.index("--") + 1 :]
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--db")
    return target.resolve(parser.parse_known_args(args)[0].db)


def db_target() -> str:
    return parse_db(sys.argv[1:])


@st.cache_resource(show_spinner=False)
def engine(target: str) -> Engine:
    """One read-only engine per database for the whole server (a DatabaseError is not cached)."""
    return open_engine(target, readonly=True)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _cached(target: str, module: str, name: str, **filters: Any) -> Any:
    fn = getattr(importlib.import_module(module), name)
    with engine(target).connect() as conn:
        return fn(conn, **filters)


def query(fn: Callable[..., Any], **filters: Any) -> Any:
    """fn(conn, **filters) for a db.queries function, cached for TTL_S seconds."""
    return _cached(db_target(), fn.__module__, fn.__name__, **filters)


def shown_target() -> str:
    """The database as the pages name it: a PostgreSQL URL without its password."""
    return describe(engine(db_target()))


def demo_banner() -> None:
    """On the shipped demo database: say so, with the GPU, versions and dates from its own rows."""
    if target.is_demo(db_target()):
        st.info(target.banner(query(queries.environments), query(queries.sweeps)), icon=":material/science:")


def sweep_hint(preset: str = "smoke") -> str:
    return f"`farm sweep --preset {preset} --db {shown_target()}`"


def interpreter_gpus() -> list[str]:
    return query(queries.interpreter_gpus)


def gpu_label(gpu: str) -> str:
    return f"{gpu} ({NOT_GPU})" if gpu in interpreter_gpus() else gpu


def pick_gpu_dtype() -> tuple[str, str]:
    """The sidebar's GPU and dtype (kept across pages): GPUs before the interpreter, most rows first;
    bfloat16 first.

    A warning says so when the chosen GPU is the interpreter.
    """
    opts = query(queries.filter_options)
    interp = interpreter_gpus()
    rows = query(queries.summary)["by_gpu"]
    gpus = sorted(opts["gpu_names"], key=lambda g: (g in interp, -rows.get(g, 0), g))
    dtypes = sorted(opts["dtypes"], key=lambda d: (d != "bfloat16", d))
    gpu = st.sidebar.selectbox("GPU", gpus, key="gpu", format_func=gpu_label, persist_state="session")
    dtype = st.sidebar.selectbox("dtype", dtypes, key="dtype", persist_state="session")
    if gpu in interp:
        st.warning(INTERPRETER_NOTE, icon=":material/warning:")
    return gpu, dtype


def chart_note(*gpus: str) -> str:
    """A chart subtitle: the interpreter label where it applies, so a screenshot carries it too."""
    return f"Triton's interpreter: {NOT_GPU}" if set(gpus) & set(interpreter_gpus()) else ""


class Scope(NamedTuple):
    gpu: str
    dtype: str
    note: str  # the charts' subtitle: the interpreter label, or ""

    @property
    def filters(self) -> dict[str, str]:
        return {"gpu_name": self.gpu, "dtype": self.dtype}


def scoped(fn: Callable[..., pd.DataFrame], *, what: str, preset: str) -> tuple[Scope, pd.DataFrame]:
    """The sidebar's GPU and dtype, and fn's rows for them. No rows: the page says which sweep
    preset measures `what`, and stops."""
    gpu, dtype = pick_gpu_dtype()
    rows = query(fn, gpu_name=gpu, dtype=dtype)
    if rows.empty:
        st.info(
            f"No {what} on {gpu} in {dtype} yet (only `ok` rows count). "
            f"A sweep that measures it: {sweep_hint(preset)}."
        )
        st.stop()
    return Scope(gpu, dtype, chart_note(gpu)), rows


def sweep_alert(sweep: Mapping[str, Any], *, prefix: str = "Sweep", quiet_if_finished: bool = False) -> None:
    """How a sweep ended, as an alert: failed (error), interrupted or still marked running (warning),
    finished (success, unless quiet_if_finished)."""
    s = sweep
    said = (
        f"{prefix} #{s['id']} {s['name']!r}: {s['status']}, "
        f"{s['n_ok']} ok and {s['n_failed']} failed of {s['n_points']} points."
    )
    if s["status"] == "failed":
        st.error(f"{said} Failed rows keep their error text: Explorer, status filter.")
    elif s["status"] in ("interrupted", "running"):
        # A driver killed outright never marks its sweep, so "running" may be a stopped sweep too.
        st.warning(f"{said} If it is not running, the same command again resumes it.")
    elif not quiet_if_finished:
        st.success(said)


def label_timings(df: pd.DataFrame) -> pd.DataFrame:
    """A copy with a first `timing` column that marks the rows whose times are interpreter CPU times."""
    out = df.copy()
    interp = set(interpreter_gpus())
    out.insert(0, "timing", [INTERPRETER_LABEL if g in interp else GPU_LABEL for g in out.gpu_name])
    return out


def csv_download(fn: Callable[..., pd.DataFrame], **filters: Any) -> Callable[[], bytes]:
    """The CSV of fn(conn, **filters), built only when the download button is clicked."""
    target = db_target()

    def build() -> bytes:
        with engine(target).connect() as conn:
            return fn(conn, **filters).to_csv(index=False).encode()

    return build


def throttle_badge(**filters: Any) -> None:
    """A warning when NVML reported a throttle reason around any of the ok rows a page shows, with how
    many and the lowest SM clock: a throttled row's time is slower than the GPU can do."""
    state = query(queries.throttled_share, **filters)
    if state["n_throttled"]:
        clock = f"; lowest SM clock {state['min_clock_mhz']:,} MHz" if state["min_clock_mhz"] else ""
        st.warning(
            f"Throttled: {state['n_throttled']:,} of {state['n_ok']:,} ok rows here ran while the GPU "
            f"reported a throttle reason{clock}. Their times may be slow; Explorer: throttle_reasons.",
            icon=":material/speed:",
        )


# What each timing regime means for the numbers a page shows (farm.measure; README "What a measurement is").
REGIMES = {
    "steady": "each config in its own steady state under the power limit, as do_bench and Triton's "
    "autotuner see it",
    "interleaved": "every config of a shape launched once per round, sharing one power-limiter state: "
    "where the limiter acts, ratios shrink (group_m 8 at 16384^3 on an H200: 1.01-1.05 against "
    "do_bench's 1.13-1.17)",
    "rest": "single launches, each after 1 s of idle GPU: boost clock, cold limiter",
}


def regime_badge(**filters: Any) -> None:
    """A caption naming the timing regime of the rows a page shows (ok rows unless filters say a status);
    a warning when they mix regimes: a ratio across regimes compares two clock states, not two kernels."""
    # Rows never timed (failures) name no regime: they neither make nor mix one.
    counts = {regime: n for regime, n in query(queries.timing_regimes, **filters).items() if regime}
    if not counts:
        return
    said = [f":blue-badge[{regime}] {REGIMES.get(regime, regime)}" for regime in counts]
    if len(counts) == 1:
        st.caption(f"Timing regime {said[0]}.")
        return
    rows = ", ".join(f"{regime} {n:,}" for regime, n in counts.items())
    st.warning(
        f"These rows mix timing regimes ({rows} rows): a ratio between rows of two regimes compares two "
        "clock states as well as two kernels. Explorer: timing_regime.",
        icon=":material/timer:",
    )
    st.caption(" · ".join(said))
