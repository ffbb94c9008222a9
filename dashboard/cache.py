"""The dashboard's caches: one read-only engine per database for the whole server, and every
db.queries result for TTL_S seconds."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy import Engine

from dashboard.target import db_target
from db.engine import describe
from db.schema import open_engine

# A running sweep commits a batch every few seconds: 30 s keeps the pages close to live, while the
# reruns every widget change causes read the cache (a page on 100k rows: docs/results/dashboard.md).
TTL_S = 30


@st.cache_resource(show_spinner=False)
def engine(target: str) -> Engine:
    """One read-only engine per database for the whole server (a DatabaseError is not cached)."""
    return open_engine(target, readonly=True)


# Keyed by the function's module and name, not the function: st.cache_data hashes its arguments, and a
# name is what stays the same when Streamlit reloads db.queries after an edit.
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


def csv_download(fn: Callable[..., pd.DataFrame], **filters: Any) -> Callable[[], bytes]:
    """The CSV of fn(conn, **filters), built only when the download button is clicked."""
    target = db_target()

    def build() -> bytes:
        with engine(target).connect() as conn:
            return fn(conn, **filters).to_csv(index=False).encode()

    return build
