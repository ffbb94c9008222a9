"""Accuracy: relative error by variant and dtype; the nondeterminism of atomic split-K."""

import streamlit as st

from dashboard import charts, common
from db import queries

ALL = "all GPUs"

st.title("Accuracy")
st.caption(
    "Over the rows that were checked (ok or wrong): relative Frobenius error against an fp64 "
    "reference of the same inputs, and for atomic split-K the largest difference between repeated runs."
)
opts = common.query(queries.filter_options)
gpu = st.sidebar.selectbox("GPU", [ALL, *opts["gpu_names"]], format_func=common.gpu_label, key="acc_gpu")
acc = common.query(queries.accuracy, gpu_name=None if gpu == ALL else gpu)
if acc.empty:
    st.info(f"No checked rows (ok or wrong) on {gpu}. Failed compiles and crashes are never checked.")
    st.stop()

wrong = acc[acc.n_wrong > 0]
if len(wrong):
    listed = ", ".join(f"{r.variant} / {r.dtype} {r.n_wrong} of {r.n_checked}" for r in wrong.itertuples())
    st.warning(f"Rows that failed the accuracy check (status `wrong`): {listed}.")
st.altair_chart(charts.accuracy_bars(acc, "rel_err_max", "largest relative error", "relative error"))
atomic = acc[acc.nondeterminism_max > 0]
st.subheader("Nondeterminism of atomic split-K")
if atomic.empty:
    st.caption("No variant gave different results on repeated runs.")
else:
    st.altair_chart(
        charts.accuracy_bars(atomic, "nondeterminism_max", "max |c1 - c2| over runs", "nondeterminism")
    )
st.dataframe(acc, hide_index=True)
