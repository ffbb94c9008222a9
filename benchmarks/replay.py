"""How close does each search strategy get to a stored exhaustive sweep's best with a share of its points?

    python benchmarks/replay.py --out docs/results/replay.csv

Replays the shipped demo sweeps (dashboard/demo/h200.db, h200-llm.db: 52 (gpu, dtype, shape) groups,
10 to 62 searched configs each) with farm/search/replay.py, every strategy over 10 seeds, at 5%, 10%
and 20% of each group's candidates, under the three protocols: shape_out and family_out over both
databases together; cross_study replaying each database trained on the other alone (both directions
pooled into one row). CPU only; about five minutes on the 2-core VM, most of it fitting the model
once per group and protocol.

    python benchmarks/replay.py --db dashboard/demo/h100-study.db --train dashboard/demo/h200.db \
        dashboard/demo/h200-llm.db --search random tpe model --budget 10% --seeds 3 \
        --out docs/results/replay_h100_study.csv

replays the H100 study (26 shapes, 7,836 configs) the same way; with --train, cross_study trains on
those databases instead of the other --db: the setting of a first search on a new GPU whose database
holds only another card's sweeps (`farm sweep --search model --train ...`).

    python benchmarks/replay.py --search model --budget 10% --noise-from dashboard/demo/h200.db \
        --confirm 3 5 --out docs/results/replay_noise.csv

replays `model` on the stored times, then seeing the instrument's repeat noise (the H200 demo's two
runs of one study), then with a confirm round of its 3 and 5 fastest (strategies model+noise,
model+noise+confirm3): what noise costs a search that names its best, and what a confirm round buys.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from farm.search import STRATEGIES, load_observations, parse_budget
from farm.search.replay import RESULT_COLUMNS, RepeatNoise, load_groups, replay, summarize
from tools.provenance import write_results

DEMO = ("dashboard/demo/h200.db", "dashboard/demo/h200-llm.db")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", nargs="+", default=list(DEMO), help="exhaustive sweeps (default: the demo's)")
    parser.add_argument("--budget", nargs="+", default=["5%", "10%", "20%"])
    parser.add_argument("--search", nargs="+", default=list(STRATEGIES))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--train", nargs="+", default=None, help="cross_study trains on these (default: the other --db)"
    )
    parser.add_argument("--out", type=Path, default=Path("docs/results/replay.csv"))
    parser.add_argument(
        "--noise-from",
        help="also replay each search seeing the repeat noise of this database's runs (farm.search.replay"
        ".RepeatNoise), and with a confirm round of each --confirm",
    )
    parser.add_argument("--confirm", type=int, nargs="+", default=[3], help="finalists measured again")
    args = parser.parse_args(argv)
    budgets = [parse_budget(b) for b in args.budget]
    seeds = range(args.seeds)
    measuring = [(None, 0)]
    if args.noise_from:
        noise = RepeatNoise.from_database(args.noise_from)
        measuring += [(noise, 0), *((noise, k) for k in args.confirm)]
    groups, rows = load_groups(args.db)
    results = []
    for protocol in ("shape_out", "family_out"):
        found, _ = replay(
            groups,
            rows,
            strategies=args.search,
            budgets=budgets,
            protocol=protocol,
            seeds=seeds,
            measuring=measuring,
        )
        results += found
        for r in found:
            print(r, flush=True)
    # cross_study: each database replayed, trained on the others (or on --train) alone; directions pooled
    outcomes = []
    for db in args.db:
        others = args.train or [d for d in args.db if d != db]
        replayed, replayed_rows = load_groups([db])
        _, found = replay(
            replayed,
            replayed_rows,
            strategies=args.search,
            budgets=budgets,
            protocol="cross_study",
            seeds=seeds,
            train=load_observations(others),
            measuring=measuring,
        )
        outcomes += found
    for name in dict.fromkeys(o.strategy for o in outcomes):  # with the ways of measuring: model+noise
        for budget in budgets:
            row = summarize([o for o in outcomes if o.strategy == name and o.budget == str(budget)])
            results.append(row)
            print(row, flush=True)
    write_results(args.out, RESULT_COLUMNS, results)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
