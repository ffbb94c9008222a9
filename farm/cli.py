"""`farm`: one command line for sweeps, the results database and the dashboard.

Every subcommand takes `--db PATH_OR_URL` (default `results.db`, or the FARM_DB variable).
Errors a user can fix (a bad spec, an unknown variant, an unreachable database) print one
clear line and exit with status 2; nothing is written.
"""

from __future__ import annotations

import argparse
import os
import sys

from db.errors import DatabaseError
from farm.errors import UserError

DEFAULT_DB = "results.db"


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=os.environ.get("FARM_DB", DEFAULT_DB),
        help="results database: a SQLite path or an SQLAlchemy URL (default: $FARM_DB or results.db)",
    )


def build_parser() -> argparse.ArgumentParser:
    from db import cli as db_cli
    from farm import sweep

    parser = argparse.ArgumentParser(prog="farm", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sweep.register(sub, add_db_argument)
    db_cli.register(sub, add_db_argument)
    _register_dashboard(sub)
    return parser


def _register_dashboard(sub) -> None:
    p = sub.add_parser("dashboard", help="open the Streamlit dashboard on a results database (read-only)")
    add_db_argument(p)
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--headless", action="store_true", help="do not open a browser")
    p.set_defaults(handler=_run_dashboard)


def _run_dashboard(args: argparse.Namespace) -> int:
    from dashboard.launch import run_dashboard

    return run_dashboard(args.db, port=args.port, headless=args.headless)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (UserError, DatabaseError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
