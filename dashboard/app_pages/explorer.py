"""Explorer: every measurement, filtered; a sortable table and the CSV of the whole selection."""

import streamlit as st

from dashboard import cache, texts, widgets
from db import conclusions, queries

# The table shows the first ROW_CAP rows (st.dataframe sorts what it holds); the CSV has them all.
ROW_CAP = 5_000
# fmt: off
COLUMNS = [
    "timing", "gpu_name", "variant", "dtype", "m", "n", "k", "ms", "status", "config_key", "ms_p20", "ms_p80",
    "stream_ms", "host_ms", "tflops", "block_m", "block_n", "block_k", "group_m", "split_k", "num_warps",
    "num_stages", "timing_regime", "avg_watts", "joules_per_launch", "power_limit_w", "rel_err",
    "nondeterminism", "sm_clock_mhz", "temperature_c", "throttled", "throttle_reasons", "tiles_per_sm",
    "waves", "occupancy", "operand_bytes", "sweep_id", "host", "error",
]
# fmt: on

st.title("Explorer")
widgets.conclude(widgets.lead(), conclusions.explorer)
opts = cache.query(queries.filter_options)
runs = cache.query(conclusions.run_names)
NEWEST = "each point's newest run"
with st.sidebar:
    run = st.selectbox(
        "Run", [NEWEST, *runs], format_func=lambda r: r if r == NEWEST else runs[r], key="x_run"
    )
    filters = {
        "gpu_name": st.multiselect("GPU", opts["gpu_names"], format_func=widgets.gpu_label, key="x_gpu"),
        "dtype": st.multiselect("dtype", opts["dtypes"], key="x_dtype"),
        "variant": st.multiselect("variant", opts["variants"], key="x_variant"),
        "status": st.multiselect("status", opts["statuses"], key="x_status"),
    }
    filters = {name: chosen or None for name, chosen in filters.items()}
    for d in "mnk":
        lo, hi = (int(v) for v in opts[d])
        chosen = st.slider(f"{d} range", lo, hi, (lo, hi), key=f"x_{d}") if lo < hi else (lo, hi)
        filters[f"{d}_range"] = None if chosen == (lo, hi) else chosen

if run == NEWEST:
    total = cache.query(queries.count_results, **filters)
    rows = widgets.label_timings(cache.query(queries.results, limit=ROW_CAP, **filters))
else:  # an older run's rows too: the sweep's own (view run_results)
    filters["sweep"] = run
    rows = widgets.label_timings(cache.query(queries.results, **filters))
    total = len(rows)
    rows = rows.head(ROW_CAP)
shown = f"the first {ROW_CAP:,} are shown" if total > ROW_CAP else "all shown"
st.caption(f"{total:,} measurements match ({shown}; click a column header to sort).")
if (rows.timing == texts.INTERPRETER_LABEL).any():
    st.warning(texts.INTERPRETER_NOTE, icon=":material/warning:")
n_throttled = int(rows.throttled.fillna(False).sum())
if n_throttled:
    st.warning(
        f"{n_throttled:,} of the rows shown ran while the GPU reported a throttle reason "
        "(columns throttled, throttle_reasons, sm_clock_mhz): their times may be slow.",
        icon=":material/speed:",
    )
widgets.regime_badge(**filters)
# Energy in J (a launch draws 0.001 to 1 J), times in us as on every page (widgets.table); numbers, to
# sort (the CSV keeps the stored units).
widgets.table(
    rows[COLUMNS].assign(operand_bytes=rows.operand_bytes / 2**20),
    avg_watts=st.column_config.NumberColumn("power", format="%.0f W"),
    joules_per_launch=st.column_config.NumberColumn("energy / launch", format="%.3g J"),
    power_limit_w=st.column_config.NumberColumn("power limit", format="%.0f W"),
    operand_bytes=st.column_config.NumberColumn("operands", format="%.1f MiB"),
    sm_clock_mhz=st.column_config.NumberColumn("SM clock", format="%d MHz"),
    temperature_c=st.column_config.NumberColumn("temperature", format="%d °C"),
)
st.download_button(
    f"Download CSV ({total:,} rows, every column)",
    data=cache.csv_download(queries.results, **filters),
    file_name="results.csv",
    mime="text/csv",
    disabled=total == 0,
)
