"""The dashboard's pages: scripts that app.py's st.navigation runs, never imported.

Not named `pages/`: Streamlit treats a `pages/` folder next to the entry script as a v1 multipage
app and runs its files directly, skipping app.py's router (and its database checks) on a page switch.
A package, so an installed wheel ships these files.
"""
