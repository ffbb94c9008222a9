"""`farm`: one command line for sweeps, the results database and the dashboard.

Every subcommand takes `--db PATH_OR_URL` (default `results.db`, or the FARM_DB variable).
Errors a user can fix (a bad spec, an unknown variant, an unreachable database or Ray cluster)
print one clear line and exit with status 2; nothing is written.

The command line is the top floor: it imports farm, db, kernels and dashboard, and none of them
imports it (tests/test_layering.py checks).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from db.engine import default_target, mask_passwords
from db.errors import DatabaseError
from farm.errors import UserError


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=default_target(),
        help="results database: a SQLite path or an SQLAlchemy URL (default: $FARM_DB or results.db)",
    )


# The subcommands' modules. `farm sweep` and `farm compare` import their own alone: cli.db and
# cli.dashboard import pandas and, through kernels.tuned, torch (`farm sweep --help`: 6.2-7.0 s with
# them, 0.6 s without, on the 2-core VM).
COMMAND_MODULES = ("cli.sweep", "cli.workers", "cli.db", "cli.dashboard", "cli.replay", "cli.compare")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `farm` parser with every subcommand, or with the one of module `only` (e.g. "cli.sweep")."""
    parser = argparse.ArgumentParser(prog="farm", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in [only] if only else COMMAND_MODULES:
        importlib.import_module(name).register(sub, add_db_argument)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    alone = {"sweep": "cli.sweep", "compare": "cli.compare"}.get(argv[0] if argv else "")
    args = (build_parser(alone) if alone else build_parser()).parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (UserError, DatabaseError) as exc:
        print(f"error: {mask_passwords(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
