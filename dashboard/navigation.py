"""The dashboard's pages: their sections, titles and icons in the sidebar's order (dashboard.app's
st.navigation builds the router from them; the browser test and tools/screenshots.py walk them)."""

from __future__ import annotations

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
        ("compare", "Compare runs", "compare_arrows"),
        ("search", "Search", "travel_explore"),
    ],
}
DEFAULT_PAGE = "overview"
# Page (file in app_pages/, url path) -> its title, in the sidebar's order.
PAGES = {name: title for pages in NAV.values() for name, title, _ in pages}
