"""What the pages show around their charts: the sidebar's GPU and dtype picker, the notices (demo
database, interpreter rows, throttling, timing regimes, how a sweep ended) and the timing labels."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import pandas as pd
import streamlit as st

from dashboard import target
from dashboard.cache import query, shown_target
from dashboard.texts import GPU_LABEL, INTERPRETER_LABEL, INTERPRETER_NOTE, NO_ENERGY, NOT_GPU, REGIMES
from db import queries


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
    """A copy with a first `timing` column that marks the rows whose times are interpreter CPU times."""
    out = df.copy()
    interp = set(interpreter_gpus())
    out.insert(0, "timing", [INTERPRETER_LABEL if g in interp else GPU_LABEL for g in out.gpu_name])
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


# The energy columns' units as tables show them. Energy per launch in mJ: a launch of a few us to a few
# ms at 300-700 W draws about 1 to 1,000 mJ.
ENERGY_FORMATS = {"mJ": "{:.4g} mJ", "W": "{:.0f} W", "J/TFLOP": "{:.4g} J/TFLOP"}


def energy_table(df: pd.DataFrame, energy: Mapping[str, str], **column_config: Any) -> None:
    """df as a table whose `energy` columns (name -> unit of ENERGY_FORMATS; joules already in the unit)
    are text that says NO_ENERGY where a point has no reading. Text, not numbers: Streamlit's table draws
    every missing number as "None" whatever a Styler says, and "None" reads as a bug, not as a meter that
    did not measure (the Explorer keeps them as numbers, to sort and download)."""
    out = df.copy()
    for c, unit in energy.items():
        if c in out:
            out[c] = [NO_ENERGY if pd.isna(v) else ENERGY_FORMATS[unit].format(v) for v in out[c]]
    st.dataframe(out, hide_index=True, column_config=column_config or None)
