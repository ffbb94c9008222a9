"""`farm dashboard`: serve the Streamlit dashboard on a results database (read-only)."""

from __future__ import annotations

import argparse

from dashboard.target import DEMO_DB, resolve


def register(sub, add_db_argument) -> None:
    p = sub.add_parser(
        "dashboard",
        help="open the Streamlit dashboard on a results database (read-only)",
        description="Open the Streamlit dashboard on a results database, read-only. Without --db: $FARM_DB, "
        "else ./results.db if it exists, else the demo database of real H200 sweeps that ships with it.",
    )
    add_db_argument(p)
    # No --db and no $FARM_DB: ./results.db if it exists, else the demo database (dashboard.target).
    p.set_defaults(db=None)
    p.add_argument(
        "--demo", action="store_true", help=f"open the demo database of real H200 sweeps ({DEMO_DB.name})"
    )
    p.add_argument("--port", type=int, default=8501)
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)"
    )
    p.add_argument("--headless", action="store_true", help="do not open a browser")
    p.set_defaults(handler=handle)


def target(args: argparse.Namespace) -> str:
    """The database `farm dashboard` serves: --demo, else --db, else $FARM_DB, ./results.db or the demo."""
    return str(DEMO_DB) if args.demo else resolve(args.db)


def handle(args: argparse.Namespace) -> int:
    from dashboard.launch import run_dashboard

    return run_dashboard(target(args), port=args.port, headless=args.headless, host=args.host)
