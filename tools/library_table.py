"""docs/results/vs_libraries_h200.csv: the library bench's table (its one owner) and the issue's verdicts
over it.

Columns: m,n,k,dtype,heldout,ours_ms,triton_ms,cublas_ms,inductor_ms,ours_variant,ours_config, then
each of the four times again as GPU time alone (ours_graph_ms, ...: CUDA graphs, L2 flushed), the
regime the row ran in (sm_clock_mhz, throttle: the lower SM clock read before and after its rounds and
the throttle reasons seen), and triton_graph_config, the own kernel triton_graph_ms timed. Rows of
older files, without the later columns, still read (`read_csv`). `benchmarks/vs_libraries.py` measures the
rows; what each time means is said there.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path


def is_skinny_k(m: int, n: int, k: int) -> bool:
    """The issue's skinny-K class (512x512x32768, 256x256x65536): K 16 times M and N or more."""
    return k >= 16 * max(m, n)


def is_ragged(m: int, n: int, k: int) -> bool:
    """The issue's ragged shapes: N or K not a multiple of 16 (a pointer kernel loses its vector width)."""
    return n % 16 != 0 or k % 16 != 0


CONTENDERS = ("ours", "triton", "cublas", "inductor")  # a row's times, in its columns' order


@dataclass
class Row:
    m: int
    n: int
    k: int
    dtype: str
    heldout: int
    ours_ms: float
    triton_ms: float
    cublas_ms: float
    inductor_ms: float
    ours_variant: str
    ours_config: str
    # The same calls' GPU time alone: captured in CUDA graphs, L2 flushed as do_bench flushes it
    # (`tools.gpu_methods.Flush`). An eager time above its graph time is host time showing: a Python
    # launcher's 40-110 us against the flush's ~70. NaN in rows measured before them.
    ours_graph_ms: float = math.nan
    triton_graph_ms: float = math.nan
    cublas_graph_ms: float = math.nan
    inductor_graph_ms: float = math.nan
    # The GPU's state over the row's rounds, read before and after them through NVML (`farm.gpu`): the
    # lower SM clock and the throttle reasons seen, so each row says which regime it ran in (an H200
    # under sustained load runs power-capped at about 1300-1600 MHz against 1980). Empty in older rows.
    sm_clock_mhz: float = math.nan
    throttle: str = ""
    # Which own kernel triton_graph_ms timed: the tuning's fastest on GPU time alone, which need not be
    # triton_ms's (the fastest eagerly, host time included). Empty in older rows, whose GPU column
    # timed the eager pick.
    triton_graph_config: str = ""

    def times(self, graph: bool) -> tuple[float, ...]:
        """(ours, own Triton, cuBLAS, Inductor) ms: eager (do_bench) or GPU time alone (graphs)."""
        return tuple(getattr(self, f"{name}_graph_ms" if graph else f"{name}_ms") for name in CONTENDERS)


def write_csv(path: Path, rows: list[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([fl.name for fl in fields(Row)])
        for row in rows:
            writer.writerow(list(asdict(row).values()))


def read_csv(paths: list[str]) -> list[Row]:
    """The rows of every file; a shape and dtype a later file holds again takes the later row, in place."""
    rows: dict[tuple, Row] = {}
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                graphs = (float(r.get(f"{name}_graph_ms") or "nan") for name in CONTENDERS)
                row = Row(
                    int(r["m"]), int(r["n"]), int(r["k"]), r["dtype"], int(r["heldout"]),
                    float(r["ours_ms"]), float(r["triton_ms"]), float(r["cublas_ms"]),
                    float(r["inductor_ms"]), r["ours_variant"], r["ours_config"], *graphs,
                    float(r.get("sm_clock_mhz") or "nan"), r.get("throttle") or "",
                    r.get("triton_graph_config") or "",
                )  # fmt: skip
                rows[(row.m, row.n, row.k, row.dtype)] = row
    return list(rows.values())


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and not math.isnan(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def verdicts(rows: list[Row]) -> list[str]:
    """The acceptance numbers on the eager times (do_bench), then the same on GPU time alone (CUDA
    graphs) over the rows that have it: ratios > 1 mean this project is faster."""
    lines = _verdicts(rows, graph=False)
    timed = [r for r in rows if not math.isnan(r.ours_graph_ms)]
    if timed:
        lines += [f"on GPU time alone (CUDA graphs, L2 flushed), {len(timed)} of {len(rows)} rows:"]
        lines += ["  " + line for line in _verdicts(timed, graph=True)]
    return lines


def _verdicts(rows: list[Row], graph: bool) -> list[str]:
    """The own-Triton classes are the issue's, over every row that belongs, tuned or held-out:
    squares of 2048 and up, skinny-K (`is_skinny_k`) and ragged (`is_ragged`: N or K not a multiple
    of 16), each as its worst row."""

    def lib(r: Row) -> float:
        _, _, cublas, inductor = r.times(graph)
        return cublas if math.isnan(inductor) else min(cublas, inductor)

    def vs_lib(r: Row) -> float:
        return lib(r) / r.times(graph)[0]

    def vs_cublas(r: Row, graph: bool = graph) -> float:
        _, triton, cublas, _ = r.times(graph)
        return cublas / triton

    def own(name: str, goal: float, keep: Callable[[Row], bool]) -> str:
        kept = [r for r in rows if keep(r) and not math.isnan(r.times(graph)[1])]
        if not kept:
            return f"own Triton vs cuBLAS, {name} no rows (goal >= {goal})"
        w = min(kept, key=vs_cublas)
        # An eager minimum may be a launcher's host time outlasting do_bench's flush (3072^3 bf16: 132 us
        # eagerly for 83.6 of GPU); the row's own GPU reading says whether it is.
        on_gpu = vs_cublas(w, graph=True)  # nan in rows without GPU times
        gpu_note = "" if graph or math.isnan(on_gpu) else f"; {on_gpu:.3f} there on GPU time"
        return (
            f"own Triton vs cuBLAS, {name} min {vs_cublas(w):.3f} at {w.m}x{w.n}x{w.k}"
            f" {w.dtype} (goal >= {goal}, {len(kept)} rows{gpu_note})"
        )

    tuned = [vs_lib(r) for r in rows if not r.heldout]
    held = [vs_lib(r) for r in rows if r.heldout]
    worst = min(rows, key=vs_lib) if rows else None
    lines = [
        f"geomean lib/ours, tuned suites: {geomean(tuned):.3f} (goal >= 1.0, {len(tuned)} rows)",
        f"geomean lib/ours, held-out:     {geomean(held):.3f} (goal >= 0.95, {len(held)} rows)",
        own("squares >= 2048:", 0.97, lambda r: r.m == r.n == r.k and r.m >= 2048),
        own("skinny-K:       ", 1.0, lambda r: is_skinny_k(r.m, r.n, r.k)),
        own("ragged:         ", 0.85, lambda r: is_ragged(r.m, r.n, r.k)),
    ]
    if worst is not None:
        lines.append(
            f"worst lib/ours: {vs_lib(worst):.3f} at {worst.m}x{worst.n}x{worst.k} {worst.dtype}"
            f" ({worst.ours_variant}) (goal >= 0.80)"
        )
    return lines
