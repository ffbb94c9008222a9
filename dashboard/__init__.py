"""Streamlit dashboard over the results database (read-only; pages call `db.queries`)."""
