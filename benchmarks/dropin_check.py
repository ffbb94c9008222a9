"""kernels.matmul's decided calls on a GPU: right eagerly, in a CUDA graph and under torch.compile, and
their host time beside torch.matmul's.

    python benchmarks/dropin_check.py --out docs/results/dropin_check.csv

Each case is a product and a best-configs file that serves it one way (`CASES`): cuBLAS at 64^3, on a
3-D A and on a 1-D A (torch.matmul folds them itself: the route is torch.matmul), a pointer kernel
(`grouped`, bound to its compiled kernel: kernels.launching.bound_launch) at 1024^3,
the TMA kernel (`persistent_tma`, bound likewise) on a 3-D A. For each, one row:
- `route`: what serves the decided call (kernels/op.py's `Routes`): `builtin_function_or_method`
  is torch.matmul itself, `BoundCall` a compiled kernel called directly, `ConfiguredLaunch` the
  launcher; `routed`: whether the second eager call took it;
- `eager_ok`, `graph_ok`, `compile_ok`: the result against fp64 (kernels.check_accuracy), eagerly, replayed
  from a CUDA graph that captured the call (the kernel objective's route, decided before capture),
  and from `torch.compile(fullgraph=True)` (the op `farm::matmul`, one node);
- `host_us`, `torch_matmul_host_us`, `ratio`: the host's time a call (200 calls a pass, synchronised
  around the pass), kernels.matmul's and torch.matmul's in 7 rounds that alternate the two
  (tools.gpu_methods.rotated_host_us: each the best round, the ratio the median of the rounds').

The printout's first line names the route key in use (kernels/route_key.py: C++ where built, else
Python). Writes --out and its provenance sidecar (tools/provenance.py). Time: under a minute on an H100 or
H200 (three compiles, one torch.compile per case).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from kernels import MatmulConfig, check_accuracy, reference_matmul
from kernels.config import LIBRARY_CONFIG
from kernels.dispatch import Dispatcher, device_name
from kernels.tuned import TunedConfigs, TunedEntry
from tools.gpu_methods import rotated_host_us
from tools.provenance import write_results

COLUMNS = (
    "case", "variant", "route", "routed", "eager_ok", "graph_ok", "compile_ok",
    "host_us", "torch_matmul_host_us", "ratio",
)  # fmt: skip
TILE = MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3)
# case -> (A's shape, B's shape, the variant the file serves, its config)
CASES = {
    "64x64x64": ((64, 64), (64, 64), "cublas", LIBRARY_CONFIG),
    "8x128x64@64x64": ((8, 128, 64), (64, 64), "cublas", LIBRARY_CONFIG),
    "1024@1024x1024": ((1024,), (1024, 1024), "cublas", LIBRARY_CONFIG),
    "1024x1024x1024": ((1024, 1024), (1024, 1024), "grouped", TILE),
    "8x256x1024@1024x1024": ((8, 256, 1024), (1024, 1024), "persistent_tma", TILE),
}


def dispatcher_serving(variant: str, cfg: MatmulConfig, m: int, n: int, k: int) -> Dispatcher:
    """A Dispatcher whose file holds one entry, `variant` at cfg at this shape on this GPU."""
    entry = TunedEntry(device_name(torch.device("cuda")), "bfloat16", m, n, k, variant, 0.01, cfg)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "best.json"
        TunedConfigs([entry]).save(path)
        return Dispatcher.load(path)


def check(case: str, calls: int, rounds: int) -> dict:
    a_shape, b_shape, variant, cfg = CASES[case]
    a = torch.randn(a_shape, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(b_shape, device="cuda", dtype=torch.bfloat16)
    k = a.shape[-1]
    ref = reference_matmul(a, b)
    d = dispatcher_serving(variant, cfg, a.numel() // k, b.shape[1], k)

    def ok(c: torch.Tensor) -> bool:
        return c.shape == ref.shape and check_accuracy(c, ref, a.dtype, k).ok

    eager_ok = ok(d(a, b)) and ok(d(a, b))  # the first decides, the second takes the route
    routed = d.routes.served == 1
    # a 3-D A's route is a FoldedRoute around its 2-D product's: name the product's
    route = ",".join(sorted({type(getattr(r, "product", r)).__name__ for r in d.routes.values()}))

    d(a, b, objective="kernel")  # decided and compiled before capture: capture only queues
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = d(a, b)  # under capture the kernel objective's route
    graph.replay()
    torch.cuda.synchronize()
    graph_ok = ok(captured)

    torch._dynamo.reset()
    compiled = torch.compile(lambda x, y: d(x, y), fullgraph=True)
    compile_ok = ok(compiled(a, b))

    ours, theirs = rotated_host_us([lambda: d(a, b), lambda: torch.matmul(a, b)], calls, rounds)
    return {
        "case": case, "variant": variant, "route": route, "routed": routed, "eager_ok": eager_ok,
        "graph_ok": graph_ok, "compile_ok": compile_ok, "host_us": round(min(ours), 1),
        "torch_matmul_host_us": round(min(theirs), 1),
        "ratio": round(statistics.median(x / y for x, y in zip(ours, theirs)), 2),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "dropin_check.csv"))
    args = parser.parse_args(argv)

    import triton

    from kernels import route_key

    key = "C++" if route_key.built_key() else "Python"  # kernels/route_key.py: C++ where built
    versions = f"triton {triton.__version__}, torch {torch.__version__}"
    print(f"{torch.cuda.get_device_name()}, {versions}, route key {key}")
    rows = []
    for case in CASES:
        try:
            rows.append(check(case, args.calls, args.rounds))
        except Exception as exc:  # one case's failure is a row; the others still run
            rows.append({"case": case, "variant": CASES[case][2], "route": f"error: {exc!r}"[:300]})
    write_results(args.out, COLUMNS, rows)
    print(f"wrote {args.out}")
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in COLUMNS]
    print("  ".join(c.rjust(w) for c, w in zip(COLUMNS, widths)))
    for r in rows:
        print("  ".join(str(r.get(c, "")).rjust(w) for c, w in zip(COLUMNS, widths)))


if __name__ == "__main__":
    main()
