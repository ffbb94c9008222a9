"""Does `kernels.matmul` (the dispatcher) keep up with cuBLAS and torch.compile max-autotune?

Question: on 84 rows (squares 1k-16k, skinny K, LLM projections at 16-8192 tokens, ragged and
held-out shapes; bf16 and fp16), the dispatcher's time against min(cuBLAS, Inductor), eagerly
(do_bench, L2 flushed) and on GPU time alone (CUDA graphs, same flush); and this project's own best
Triton kernel on each shape against cuBLAS. This file holds the question's shapes (`SUITES`) and the
command; the machinery (quick tuning, rounds, graphs: tools/library_bench.py) and the table with its
verdicts (tools/library_table.py) are in tools/, where the tests reach them.

    # a piece per call (each well under 10 minutes on an H200); quick-tunes the tuned suites
    python benchmarks/vs_libraries.py --suite squares --dtypes bfloat16 --out $OUT/squares-bf16.csv \
        --save-best $OUT/best-squares-bf16.json
    # held-out shapes use only what the tuned suites chose (nearest tuned shape, never their own)
    python benchmarks/vs_libraries.py --suite heldout --best best-*.json --out $OUT/heldout.csv
    # join the pieces into the kept table (a shape and dtype measured again: the later file's row)
    python benchmarks/vs_libraries.py merge docs/results/vs_libraries_h200.csv $OUT/*.csv \
        --out docs/results/vs_libraries_h200.csv
    python benchmarks/vs_libraries.py verdicts docs/results/vs_libraries_h200.csv   # prints, writes nothing

Writes: docs/results/vs_libraries_h200.csv (one row per shape and dtype; its columns:
tools/library_table.py) and, beside each run's --out, its provenance line (vs_libraries_h200.csv.meta:
the command, so say there where its --best files came from). Time on one H200: the whole table is
about 40 minutes of GPU, run as pieces of 3-8 minutes (`--budget-s`, `--only`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from tools.library_bench import BenchRun, run
from tools.library_table import read_csv, verdicts, write_csv
from tools.provenance import write_meta

LLM_PROJECTIONS = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]  # (out, in) of an 8B model
SUITES: dict[str, list[tuple[int, int, int]]] = {
    "squares": [(s, s, s) for s in (1024, 2048, 4096, 8192, 16384)],
    "skinny": [
        (512, 512, 32768),
        (256, 256, 65536),
        (1024, 1024, 16384),
        (128, 4096, 14336),
        (64, 8192, 8192),
    ],
    "llm": [(t, n, k) for t in (16, 256, 2048, 8192) for n, k in LLM_PROJECTIONS],
    "ragged": [
        (3000, 5000, 1000),
        (96, 7168, 2048),
        (640, 640, 24576),
        (1536, 1536, 3072),
        (4096, 32001, 4096),  # a 32001-token vocabulary
        (2048, 50257, 768),  # GPT-2's vocabulary
        (495, 5333, 71),
        (4097, 4097, 4097),
    ],
    # never in a tuning grid: served by the nearest tuned shape
    "heldout": [
        (3072, 3072, 3072),
        (6144, 2048, 5120),
        (768, 768, 12288),
        (2000, 3000, 1500),
        (100, 8192, 8192),
        (5000, 5000, 200),
        (1000, 14336, 4096),
        (333, 4444, 5555),
    ],
    # in no shipped database and no suite above, 5 of 12 with rows not 16-byte aligned in bf16: decided
    # from the export of the shipped databases, and from its aligned shapes alone
    "unseen": [
        (2500, 2500, 2500),
        (1000, 3001, 2000),
        (5000, 1234, 3000),
        (777, 7777, 1537),
        (3333, 1111, 4444),
        (1536, 6144, 2048),
        (2560, 2560, 2560),
        (512, 8192, 3072),
        (8192, 1024, 1536),
        (192, 12288, 4096),
        (4608, 4608, 1536),
        (1024, 3072, 8192),
    ],
}
DTYPES = ("bfloat16", "float16")  # kernels.DTYPES names


def shapes_outside(only: list[str], suites: list[str]) -> list[str]:
    """Each `--only` shape that none of `suites` holds, with the suites that do: such a run would time
    nothing for it (a run that asked the skinny suite for 640x640x24576, a ragged row, wrote none)."""

    def holders(shape: str) -> list[str]:
        return [name for name, shapes in SUITES.items() if shape in {f"{m}x{n}x{k}" for m, n, k in shapes}]

    stray = [shape for shape in only if not set(holders(shape)) & set(suites)]
    return [f"{shape} (in {', '.join(holders(shape)) or 'no suite'})" for shape in stray]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("merge", "verdicts"):
        parser = argparse.ArgumentParser(prog=f"vs_libraries.py {argv[0]}")
        parser.add_argument("csvs", nargs="+")
        if argv[0] == "merge":  # no default: a merge must not overwrite the kept table unasked
            parser.add_argument("--out", required=True)
        args = parser.parse_args(argv[1:])
        rows = read_csv(args.csvs)
        if argv[0] == "merge":
            write_csv(Path(args.out), rows)
        print("\n".join(verdicts(rows)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", nargs="+", choices=list(SUITES), default=["ragged"])
    parser.add_argument("--dtypes", nargs="+", choices=list(DTYPES), default=["bfloat16"])
    parser.add_argument(
        "--best", nargs="*", default=[], help="best-configs JSON files (farm export or --save-best)"
    )
    parser.add_argument("--save-best", help="write this run's quick tuning as a best-configs JSON")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "vs_libraries.csv"))
    parser.add_argument(
        "--budget-s", type=float, default=BenchRun.budget_s, help="start no new shape after this"
    )
    parser.add_argument(
        "--no-inductor", action="store_true", help="skip torch.compile (its autotuning is slow)"
    )
    parser.add_argument("--only", nargs="*", default=[], help="shapes MxNxK of the suites to run (pieces)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=BenchRun.rounds,
        help="rotated rounds timing ours, cuBLAS, Inductor, own best",
    )
    parser.add_argument(
        "--rep-ms", type=int, default=BenchRun.rep_ms, help="do_bench's time per measure and round"
    )
    parser.add_argument("--device", default=BenchRun.device)
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.rep_ms < 1:
        parser.error(f"--rounds and --rep-ms must be at least 1 (got {args.rounds} and {args.rep_ms})")
    if stray := shapes_outside(args.only, args.suite):
        parser.error(f"--only names shapes none of --suite {' '.join(args.suite)} holds: {'; '.join(stray)}")
    job = BenchRun(
        {name: SUITES[name] for name in args.suite}, args.dtypes, args.out, args.best, args.save_best,
        args.budget_s, args.no_inductor, args.only, args.rounds, args.rep_ms, args.device,
    )  # fmt: skip
    rows = run(job)
    write_meta(args.out)
    print(f"\nwrote {len(rows)} rows to {args.out} and its provenance, {args.out}.meta")
    print("\n".join(verdicts(rows)))


if __name__ == "__main__":
    main()
