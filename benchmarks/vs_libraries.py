"""Does `kernels.matmul` (the dispatcher) keep up with cuBLAS and torch.compile max-autotune?

Question: on 84 rows (squares 1k-16k, skinny K, LLM projections at 16-8192 tokens, ragged and
held-out shapes; bf16 and fp16), the dispatcher's time against min(cuBLAS, Inductor), eagerly
(do_bench, L2 flushed) and on GPU time alone (CUDA graphs, same flush); and this project's own best
Triton kernel on each shape against cuBLAS. The machinery (quick tuning, rounds, graphs, merge,
verdicts) is tools/vs_libraries.py, where the tests reach it; this is the command.

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
tools/library_table.py; its provenance line: vs_libraries_h200.csv.meta). Time on one H200: the
whole table is about 40 minutes of GPU, run as pieces of 3-8 minutes (`--budget-s`, `--only`).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from tools.vs_libraries import main

if __name__ == "__main__":
    main()
