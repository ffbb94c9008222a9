"""`farm dashboard`: serve the Streamlit dashboard on a results database (read-only)."""

from __future__ import annotations

import argparse


def register(sub, add_db_argument) -> None:
    p = sub.add_parser("dashboard", help="open the Streamlit dashboard on a results database (read-only)")
    add_db_argument(p)
    p.add_argument("--port", type=int, default=8501)
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)"
    )
    p.add_argument("--headless", action="store_true", help="do not open a browser")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from dashboard.launch import run_dashboard

    return run_dashboard(args.db, port=args.port, headless=args.headless, host=args.host)
