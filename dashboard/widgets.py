"""What the pages show around their charts: the sidebar's GPU and dtype picker, the notices (demo
database, interpreter rows, throttling, timing regimes, how a sweep ended) and the timing labels."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import pandas as pd
import streamlit as st

from dashboard import frames, target
from dashboard.cache import query, shown_target
from dashboard.texts import (
    GPU_LABEL,
    IMPLAUSIBLE_LABEL,
    INTERPRETER_LABEL,
    INTERPRETER_NOTE,
    NO_ENERGY,
    NOT_GPU,
    REGIME_HELP,
    base_regime,
    regime_words,
)
from db import queries
from db.records import Status


def demo_banner() -> None:
    """On the shipped demo database: say so, with the GPU, versions and dates from its own rows."""
    if target.is_demo(target.db_target()):
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
    """A copy with a first `timing` column that marks the rows whose times are interpreter CPU times, and
    those stored `implausible`, whose times physics forbids (kept for inspection, never a time)."""
    out = df.copy()
    interp = set(interpreter_gpus())
    labels = [INTERPRETER_LABEL if g in interp else GPU_LABEL for g in out.gpu_name]
    if "status" in out:
        labels = [IMPLAUSIBLE_LABEL if s == Status.IMPLAUSIBLE else t for s, t in zip(out.status, labels)]
    out.insert(0, "timing", labels)
    return out


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


def regime_badge(**filters: Any) -> None:
    """A caption naming the timing regime of the rows a page shows (ok rows unless filters say a status);
    a warning when they mix regimes: a ratio across regimes compares two clock states, not two kernels."""
    # Rows never timed (failures) name no regime: they neither make nor mix one.
    counts = {regime: n for regime, n in query(queries.timing_regimes, **filters).items() if regime}
    if not counts:
        return
    said = [f":blue-badge[{regime}] {regime_words(regime)}" for regime in counts]
    # A point the early cut stopped ("steady+cut") was timed in the same clock state as its regime's
    # others: a page of steady and steady+cut rows mixes no regimes.
    if len({base_regime(regime) for regime in counts}) == 1:
        st.caption(f"Timing regime {' · '.join(said)}.")
        return
    rows = ", ".join(f"{regime} {n:,}" for regime, n in counts.items())
    st.warning(
        f"These rows mix timing regimes ({rows} rows): a ratio between rows of two regimes compares two "
        "clock states as well as two kernels. Explorer: timing_regime.",
        icon=":material/timer:",
    )
    st.caption(" · ".join(said))


# The units tables show energy in: J (a launch of a few us to a few ms at 300-700 W draws 0.001 to 1 J;
# "1.052e+04 mJ" read as a bug), W and J/TFLOP.
ENERGY_FORMATS = {
    "J": lambda v: f"{v:.3g} J",
    "W": lambda v: f"{v:.0f} W",
    "J/TFLOP": lambda v: f"{v:.4g} J/TFLOP",
}


# Table titles of the time columns frames.in_us makes (any other: its name, spaces for underscores).
TIME_TITLES = {
    "us": "kernel us",
    "us_p20": "p20 us",
    "us_p80": "p80 us",
    "us_group1": "us at GROUP_SIZE_M 1",
    "us_a": "run a us",
    "us_b": "run b us",
    "cublas_us": "cuBLAS us",
    "triton_us": "Triton us",
    "streamk_us": "stream-K us",
}
# 0.1 us: under the run-to-run noise (2-3%) of every kernel over 3 us; "%.4g" wrote 12,500 us as 1.25e+04.
TIME_FORMAT = "%.1f us"


def table(df: pd.DataFrame, **column_config: Any) -> None:
    """df as a table with its times in microseconds (frames.in_us: numbers, to sort) and the regime
    column explained; column_config by the table's column names (a time column by its us name)."""
    for column in filter(None, map(frames.us_column, df.columns)):
        title = TIME_TITLES.get(column, column.replace("_", " "))
        column_config.setdefault(column, st.column_config.NumberColumn(title, format=TIME_FORMAT))
    out = frames.in_us(df)
    if "timing_regime" in out:
        column_config.setdefault("timing_regime", st.column_config.TextColumn("regime", help=REGIME_HELP))
    st.dataframe(out, hide_index=True, column_config=column_config)


def energy_table(df: pd.DataFrame, energy: Mapping[str, str], **column_config: Any) -> None:
    """df as a table whose `energy` columns (name -> unit of ENERGY_FORMATS; joules already in the unit)
    are text that says NO_ENERGY where a point has no reading, its times in us (`table`). Text, not
    numbers: Streamlit's table draws every missing number as "None" whatever a Styler says, and "None"
    reads as a bug, not as a meter that did not measure (the Explorer keeps them as numbers, to sort and
    download)."""
    out = df.copy()
    for c, unit in energy.items():
        if c in out:
            out[c] = [NO_ENERGY if pd.isna(v) else ENERGY_FORMATS[unit](v) for v in out[c]]
    table(out, **column_config)


def lead() -> Any:
    """The slot under a page's title for the sentence it opens with (filled once the sidebar has
    chosen what the page shows)."""
    return st.empty()


def conclude(slot: Any, fn: Callable[..., str], **filters: Any) -> None:
    """Write db.conclusions' sentence for this page (fn over filters) into `slot`, in bold."""
    slot.markdown(f"**{query(fn, **filters)}**")


def local_results_note() -> None:
    """Where `farm dashboard` fell back to ./results.db (no --db, no $FARM_DB): say so, and that the demo
    database is one flag away."""
    if target.opened_local_results():
        st.info(
            f"Showing `{shown_target()}`, the results.db in the working directory (your own sweeps). "
            "The demo database of real H200 sweeps: `farm dashboard --demo`.",
            icon=":material/folder_open:",
        )


def picked_shape(event: Any, name: str = "pick") -> None:
    """Open the Shape page on the shape a chart's selection `name` picked (a query parameter, so the
    view can be shared)."""
    picked = (event.selection.get(name) or [{}]) if event else [{}]
    shape = picked[0].get("shape")
    if shape:
        st.switch_page("app_pages/shape.py", query_params={"shape": shape})
