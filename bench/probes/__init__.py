"""One-off GPU probes kept so that a visit's numbers can be measured again (docs/perf-notes.md)."""

from __future__ import annotations

import argparse
import csv
import os
import time
from collections.abc import Callable
from pathlib import Path


def probe_parser(doc: str, out_name: str, budget_s: float | None = None) -> argparse.ArgumentParser:
    """A probe's command line: its docstring's first line, `--out` (out_name under $OUT, where the device
    machine collects files, else here) and, given a default, `--budget-s` shared by its shapes."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), out_name))
    if budget_s is not None:
        parser.add_argument("--budget-s", type=float, default=budget_s, help="shared by the shapes equally")
    return parser


class Rows:
    """A probe's rows, the whole CSV written again after each one: a run killed at its time limit
    keeps what it had measured (a visit lost a table that was written only at the end, visit 72)."""

    def __init__(self, path: str, header: tuple[str, ...]) -> None:
        self.path, self.header, self.rows = Path(path), header, []

    def add(self, *row) -> None:
        self.rows.append(row)
        with self.path.open("w", newline="") as f:
            csv.writer(f).writerows([self.header, *self.rows])

    def best_lines(self, prefixes: tuple[str, ...]) -> list[str]:
        """For each shape (the first column), the row of each op prefix (the second column) with the
        least time (the third), under a header: a probe's summary, the fastest of each kind it compared."""
        lines = [
            f"{self.header[0]:25s} {self.header[1]:44s} " + " ".join(f"{h:>9s}" for h in self.header[2:])
        ]
        for shape in dict.fromkeys(r[0] for r in self.rows):
            for prefix in prefixes:
                mine = [r for r in self.rows if r[0] == shape and r[1].startswith(prefix)]
                best = min(mine, key=lambda r: r[2], default=None)
                if best:
                    lines.append(f"{best[0]:25s} {best[1]:44s} " + " ".join(f"{v:9.1f}" for v in best[2:]))
        return lines


def time_checked(out: Rows, shape: str, ops: list[tuple[str, Callable]], ref, k: int, stop_at: float) -> None:
    """Each (name, call) of `ops` until `stop_at`: its result checked against `ref` (fp64, a K of `k`),
    then timed with L2 flushed in CUDA graphs and by do_bench, a row of `out` each (shape, name, graph
    us, do_bench us). A wrong result is a row too, marked WRONG; a call that raises (out of resources,
    a layout Triton cannot compile) is said and skipped."""
    from bench.gpu_methods import Flush, do_bench_us
    from kernels import check_accuracy

    flush = Flush()
    for name, fn in ops:
        if time.time() > stop_at:
            break
        try:
            result = fn()
            ok = check_accuracy(result, ref, result.dtype, k).ok
        except Exception as exc:
            print(f"skip {shape} {name}: {str(exc)[:160]}", flush=True)
            continue
        if ok:
            out.add(shape, name, flush.graph_flushed_us(fn), do_bench_us(fn))
        else:
            out.add(shape, f"WRONG {name}", float("nan"), float("nan"))
