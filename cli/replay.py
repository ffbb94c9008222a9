"""`farm replay`: score search strategies on stored exhaustive sweeps (simulation mode).

    farm replay --db dashboard/demo/h200.db --db dashboard/demo/h200-llm.db --search random \\
        --search model --budget 10% --protocol family_out --seeds 10
    farm replay --db mine.db --search model --budget 10% --protocol cross_study --train other.db
    farm replay --db mine.db --search model --search model_prior --protocol other_code

Every (gpu, dtype, shape) group of the databases is searched again against its stored times, once
per seed; a row per strategy and budget says how often the search ended within 1%, 2% and 5% of the
group's exhaustive best, its worst miss, and Kernel Tuner's score (0: random search, 1: the optimum).
other_code replays each code version's groups, trained on the other code versions' rows alone.
The work is farm/search/replay.py's; this module reads the options and prints the table.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from farm.errors import UserError
from farm.search import Observations, load_observations, parse_budget
from farm.search.replay import PROTOCOLS, RESULT_COLUMNS, load_groups, replay
from farm.search.strategies import REPLAY_STRATEGIES, STRATEGIES


def register(sub, add_db_argument) -> None:
    p = sub.add_parser(
        "replay",
        help="score search strategies by replaying stored exhaustive sweeps",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--db",
        action="append",
        required=True,
        metavar="DB",
        help="a database holding exhaustive sweeps to replay (repeat for several)",
    )
    p.add_argument(
        "--search",
        action="append",
        metavar="STRATEGY",
        help=f"a strategy to score: {', '.join(REPLAY_STRATEGIES)} "
        f"(repeat; default: {', '.join(STRATEGIES)})",
    )
    p.add_argument(
        "--budget",
        action="append",
        metavar="BUDGET",
        help="points per group: a share of its candidates (10%%) or a count (20); repeat (default: 10%%)",
    )
    p.add_argument(
        "--protocol",
        action="append",
        metavar="PROTOCOL",
        help=f"what the model may learn from: {', '.join(PROTOCOLS)} (repeat; default: shape_out)",
    )
    p.add_argument(
        "--train",
        action="append",
        default=[],
        metavar="DB",
        help="another database to learn from (cross_study learns from these alone)",
    )
    p.add_argument("--seeds", type=int, default=10, help="searches per group, seeds 0..N-1 (default 10)")
    p.add_argument("--out", type=Path, help="also write the rows as a CSV file")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=handle)


def checked(args: argparse.Namespace) -> tuple[list[str], list, list[str]]:
    """(strategies, budgets, protocols) from the options; UserError with one line for a bad one."""
    strategies = args.search or list(STRATEGIES)
    for name in strategies:
        if name not in REPLAY_STRATEGIES:
            raise UserError(f"unknown search strategy {name!r}; known: {', '.join(REPLAY_STRATEGIES)}")
    try:
        budgets = [parse_budget(b) for b in args.budget or ["10%"]]
    except ValueError as exc:
        raise UserError(str(exc)) from None
    protocols = args.protocol or ["shape_out"]
    for protocol in protocols:
        if protocol not in PROTOCOLS:
            raise UserError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    if "cross_study" in protocols and not args.train:
        raise UserError("--protocol cross_study learns from other databases alone: name them with --train DB")
    if args.seeds < 1:
        raise UserError(f"--seeds {args.seeds}: give at least 1")
    return strategies, budgets, protocols


def handle(args: argparse.Namespace) -> int:
    strategies, budgets, protocols = checked(args)
    groups, replayed_rows = load_groups(args.db)
    by_code = load_groups(args.db, by_code_version=True)[0] if "other_code" in protocols else groups
    if not groups:
        raise UserError(f"no measured group to replay in {', '.join(args.db)}")
    train = load_observations(args.train) if args.train else Observations.empty()
    from tqdm import tqdm

    total = (
        sum(len(by_code if p == "other_code" else groups) for p in protocols) * len(strategies) * len(budgets)
    )
    rows = []
    with tqdm(total=total, unit="group", desc="replay", disable=args.no_progress) as bar:
        for protocol in protocols:
            found, _ = replay(
                by_code if protocol == "other_code" else groups,
                replayed_rows,
                strategies=strategies,
                budgets=budgets,
                protocol=protocol,
                seeds=range(args.seeds),
                train=train,
                progress=lambda: bar.update(1),
            )
            rows += found
    per_code = f" ({len(by_code)} by code version under other_code)" if "other_code" in protocols else ""
    print(f"{len(groups)} groups{per_code} x {args.seeds} seeds")
    print(format_table(rows))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=RESULT_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        print(f"wrote {args.out}")
    return 0


def format_table(rows: list[dict]) -> str:
    def cell(value) -> str:
        if isinstance(value, float):
            return "" if math.isnan(value) else f"{value:.3f}"
        return str(value)

    table = [list(RESULT_COLUMNS)] + [[cell(r[c]) for c in RESULT_COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(RESULT_COLUMNS))]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(line, widths)) for line in table)
