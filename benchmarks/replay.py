"""How close does each search strategy get to a stored exhaustive sweep's best with a share of its points?

    python benchmarks/replay.py --noise-from dashboard/demo/h200.db --out docs/results/replay.csv

Replays the shipped demo sweeps (dashboard/demo/h200.db, h200-llm.db: 52 (gpu, dtype, shape) groups,
10 to 62 searched configs each) with farm/search/replay.py, every strategy over 10 seeds, at 5%, 10%
and 20% of each group's candidates, under the three protocols: shape_out and family_out over both
databases together; cross_study replaying each database trained on the other alone (both directions
pooled into one row). Where some groups have fewer than --min-candidates (20) searched configs, a
second row per strategy, protocol and budget scores the others alone (budget "10% (groups of >= 20
configs)"): the demo's 28 groups of 10-15 configs get 1-3 points at these budgets, a search that ends
in its first round (docs/design.md, "What replay and the GPU showed"). CPU only; about five minutes
on the 2-core VM, most of it fitting the model once per group and protocol.

    python benchmarks/replay.py --db dashboard/demo/h100-study.db --train dashboard/demo/h200.db \
        dashboard/demo/h200-llm.db --search random tpe model --budget 10% --seeds 3 \
        --out docs/results/replay_h100_study.csv

replays the H100 study (26 shapes, 7,836 configs) the same way; with --train, cross_study trains on
those databases instead of the other --db: the setting of a first search on a new GPU whose database
holds only another card's sweeps (`farm sweep --search model --train ...`).

With --noise-from (the kept file's command: python benchmarks/replay.py --noise-from
dashboard/demo/h200.db), `model` (--noisy) is replayed twice more: seeing the instrument's repeat noise
(the H200 demo's two runs of one study) and with a confirm round of its 3 and 5 fastest (--confirm): rows
model+noise and model+noise+confirm3, what noise costs a search that names its best and what a
confirm round buys.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from farm.search import STRATEGIES, load_observations, parse_budget
from farm.search.replay import RESULT_COLUMNS, STORED_TIMES, RepeatNoise, load_groups, replay, summarize
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
    parser.add_argument("--confirm", type=int, nargs="+", default=[3, 5], help="finalists measured again")
    parser.add_argument(
        "--min-candidates",
        type=int,
        default=20,
        help="also a row of the groups of at least this many searched configs (0: none)",
    )
    parser.add_argument(
        "--noisy", nargs="+", default=["model"], help="the strategies --noise-from replays (default: model)"
    )
    args = parser.parse_args(argv)
    budgets = [parse_budget(b) for b in args.budget]
    seeds = range(args.seeds)
    strategies, measuring = list(args.search), {}
    if args.noise_from:
        noise = RepeatNoise.from_database(args.noise_from)
        for name in args.noisy:  # in the same replay as the others: each group's model is fitted once
            stored = list(STORED_TIMES) if name in strategies else []
            measuring[name] = [*stored, (noise, 0), *((noise, k) for k in args.confirm)]
        strategies += [name for name in args.noisy if name not in strategies]
    outcomes = {}  # protocol -> every group's outcome
    common = dict(strategies=strategies, budgets=budgets, seeds=seeds, measuring=measuring)
    groups, rows = load_groups(args.db)
    for protocol in ("shape_out", "family_out"):
        outcomes[protocol] = replay(groups, rows, protocol=protocol, **common)[1]
    # cross_study: each database replayed, trained on the others (or on --train) alone; directions pooled
    outcomes["cross_study"] = []
    for db in args.db:
        others = args.train or [d for d in args.db if d != db]
        replayed, replayed_rows = load_groups([db])
        found = replay(
            replayed, replayed_rows, protocol="cross_study", train=load_observations(others), **common
        )
        outcomes["cross_study"] += found[1]
    results = []
    for found in outcomes.values():
        for name in dict.fromkeys(o.strategy for o in found):  # with the ways of measuring: model+noise
            for budget in budgets:
                these = [o for o in found if o.strategy == name and o.budget == str(budget)]
                results.append(summarize(these))
                if args.min_candidates:
                    larger = [o for o in these if o.candidates >= args.min_candidates]
                    if larger and len(larger) < len(these):
                        label = f"{budget} (groups of >= {args.min_candidates} configs)"
                        results.append({**summarize(larger), "budget": label})
    for row in results:
        print(row, flush=True)
    write_results(args.out, RESULT_COLUMNS, results)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
