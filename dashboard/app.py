"""The dashboard's router: `streamlit run dashboard/app.py -- --db PATH_OR_URL` or `farm dashboard --db ...`.

Opens the database read-only (default $FARM_DB, else results.db if it exists, else the demo database
shipped in dashboard/demo/, with a banner on every page); every page below is layout over
db.queries through dashboard.cache.
"""

import sys
from pathlib import Path

import streamlit as st
from sqlalchemy.exc import SQLAlchemyError

# `streamlit run` puts this file's folder on sys.path, not the checkout: make `dashboard` and `db`
# importable from a checkout that was not pip-installed.
ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from dashboard import cache, navigation, widgets  # noqa: E402
from db import queries  # noqa: E402
from db.errors import DatabaseError  # noqa: E402

# A local favicon: with a Material icon (the page's or page_icon's) the browser fetches it from
# fonts.gstatic.com, a failed request on a machine without internet access.
st.set_page_config(
    page_title="Matmul farm", page_icon=str(Path(__file__).with_name("favicon.png")), layout="wide"
)

# Registered first, so that even an error page below keeps the sidebar's navigation.
page = st.navigation(
    {
        section: [
            st.Page(
                f"app_pages/{name}.py",
                title=title,
                icon=f":material/{icon}:",
                url_path=None if name == navigation.DEFAULT_PAGE else name,
                default=name == navigation.DEFAULT_PAGE,
            )
            for name, title, icon in pages
        ]
        for section, pages in navigation.NAV.items()
    }
)
try:
    st.sidebar.caption(f"Database (read-only): `{cache.shown_target()}`")
    widgets.demo_banner()
    widgets.local_results_note()
except DatabaseError as exc:
    st.error(f"Cannot open the results database: {exc}")
    st.stop()

summary = cache.query(queries.summary)
if not summary["measurements"]:
    st.title(page.title)
    st.info(
        f"The results database `{cache.shown_target()}` holds no measurements yet. Run a sweep into it, "
        f"e.g. {widgets.sweep_hint()} (a minute on a CPU; a few seconds on a GPU), then reload this page."
    )
    if summary["last_sweep"] is not None:
        last = summary["last_sweep"]
        st.warning(f"Its last sweep, #{last['id']} {last['name']!r}, is {last['status']} and stored no rows.")
    st.stop()

try:
    page.run()
except (DatabaseError, SQLAlchemyError) as exc:
    st.error(f"A query on `{cache.shown_target()}` failed: {exc}")
