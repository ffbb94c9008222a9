"""Accuracy: relative error by variant and dtype; the nondeterminism of atomic split-K."""

import streamlit as st

from dashboard import cache, charts, widgets
from db import conclusions, queries

ALL = "all GPUs"

st.title("Accuracy")
lead = widgets.lead()
st.caption(
    "Over the rows that were checked (ok or wrong): relative Frobenius error against an fp64 "
    "reference of the same inputs, and for atomic variants the largest difference between repeated runs. "
    'Log axes; a bit-exact result is drawn at the bottom and marked "exact".'
)
opts = cache.query(queries.filter_options)
gpu = st.sidebar.selectbox("GPU", [ALL, *opts["gpu_names"]], format_func=widgets.gpu_label, key="acc_gpu")
acc = cache.query(queries.accuracy, gpu_name=None if gpu == ALL else gpu)
widgets.conclude(lead, conclusions.accuracy_verdict, gpu_name=None if gpu == ALL else gpu)
if acc.empty:
    st.info(f"No checked rows (ok or wrong) on {gpu}. Failed compiles and crashes are never checked.")
    st.stop()

wrong = acc[acc.n_wrong > 0]
if len(wrong):
    listed = ", ".join(f"{r.variant} / {r.dtype} {r.n_wrong} of {r.n_checked}" for r in wrong.itertuples())
    st.warning(f"Rows that failed the accuracy check (status `wrong`): {listed}.")
# Errors all within one unit of their dtype's rounding say one thing, which the sentence above says:
# six equal points (0.0017 each on the demo) drawn on a log axis only looked like a finding.
within = (acc.rel_err_max <= acc.dtype.map(conclusions.UNIT_ROUNDOFF).astype("float64")).all()
if len(wrong) or not within:
    st.altair_chart(charts.accuracy_points(acc, "rel_err_max", "largest relative error", "relative error"))
repeated = acc[acc.nondeterminism_max.notna()]
st.subheader("Nondeterminism of atomic variants")
if repeated.empty:
    st.caption("No variant was run repeatedly (only atomic variants are).")
else:
    st.caption(
        "Largest max |c1 - c2| between repeated runs over the output's scale. The scale is not stored; the "
        "inputs are standard normal, so an output element has rms sqrt(K): the value is max |c1 - c2| / "
        "sqrt(K), in units of a typical output element."
    )
    st.altair_chart(
        charts.accuracy_points(
            repeated, "nondeterminism_rel_max", "max |c1 - c2| / sqrt(K)", "nondeterminism"
        )
    )
widgets.table(acc)
