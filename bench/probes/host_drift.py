"""Why a Python launcher reads slower eagerly after torch.compile: one process, the same calls timed at
checkpoints, with what could explain a change beside each.

    python bench/probes/host_drift.py --out $OUT/host_drift.csv      # H200, about a minute

Why: in `bench/vs_libraries.py`'s rounds at 495x5333x71 bf16 `grouped` read 20.9-28.4 us eagerly
against 12.9 in the same process's tuning a minute earlier, with 10.6 us of GPU time both times
(visit 111); visit 90 saw its host time go 31.7 -> 44.7-54.7 us after Inductor's compile. do_bench
zeroes 256 MB (about 70 us on an H200) before each call, so a launcher's host time shows only where
the host's loop outlasts the GPU's: this probe times do_bench's own loop twice over, by events (what
do_bench reads) and by the host's clock (what the host spends an iteration), so a reading above the
GPU time says which. Checkpoints: fresh; after a CUDA graph capture of the call; after Inductor's
max-autotune compile of the shape; after 200 calls of Inductor's callable; after a quick tuning's worth
of other configs compiled; after gc.collect and gc.freeze; after torch._dynamo.reset. At each, what
may tax every call: torch function or dispatch modes left active, Triton's launch hooks, a profiler or
trace function, threads, child processes, the garbage collector's generations.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch

from bench.probes import Rows, probe_parser
from kernels.config import MatmulConfig

SHAPE = (495, 5333, 71)
CFG = MatmulConfig(128, 128, 32, group_m=8, num_warps=4, num_stages=3)  # visit 111's tuned `grouped`
OTHER_CFGS = [  # a quick tuning's worth of other kernels compiled between two checkpoints
    MatmulConfig(bm, bn, bk, group_m=8, num_warps=w, num_stages=s)
    for bm, bn, bk, w, s in (
        (64, 128, 32, 4, 2),
        (128, 64, 32, 4, 2),
        (64, 64, 32, 4, 3),
        (128, 128, 64, 8, 3),
    )
]


def loop_times(fn, cache: torch.Tensor, iters: int = 300) -> tuple[float, float, float]:
    """do_bench's measured loop ([zero 256 MB, event, call, event] a time), us: the median event time
    (what do_bench reads), the median host time an iteration, and the zeroing's GPU time alone."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    host = []
    for i in range(iters):
        t = time.perf_counter()
        cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
        host.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    event = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1000
    z0, z1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    z0.record()
    for _ in range(20):
        cache.zero_()
    z1.record()
    z1.synchronize()
    return event, statistics.median(host) * 1e6, z0.elapsed_time(z1) * 1000 / 20


def state() -> str:
    """What may tax every call in this process, on one line."""
    import triton

    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    # Triton 3.6 keeps a HookChain here even when nothing is hooked: how many hooks each chain calls
    hooks = [getattr(runtime, name, None) for name in ("launch_enter_hook", "launch_exit_hook")]
    hooks = tuple(None if h is None else len(getattr(h, "calls", [h])) for h in hooks)
    children = len(os.listdir(f"/proc/{os.getpid()}/task")) if os.path.isdir("/proc") else -1
    kids = 0
    if os.path.isdir("/proc"):
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    kids += f.read().split(") ")[1].split()[1] == str(os.getpid())
            except OSError:
                pass
    return (
        f"function modes {torch._C._len_torch_function_stack()} dispatch modes "
        f"{torch._C._len_torch_dispatch_stack()} launch hooks {hooks} profile {sys.getprofile()} trace "
        f"{sys.gettrace()} threads {threading.active_count()} (tasks {children}) children {kids} "
        f"gc counts {gc.get_count()} objects {len(gc.get_objects())} frozen {gc.get_freeze_count()} "
        f"load {os.getloadavg()[0]:.1f} reserved {torch.cuda.memory_reserved() >> 20} MiB"
    )


def main(argv: list[str] | None = None) -> None:
    from bench.gpu_methods import Flush, do_bench_us, host_us
    from bench.vs_libraries import inductor_compiled
    from kernels import check_accuracy, get_variant, reference_matmul

    args = probe_parser(__doc__, "host_drift.csv").parse_args(argv)
    m, n, k = SHAPE
    a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
    grouped = get_variant("grouped").launch
    if not check_accuracy(grouped(a, b, CFG), reference_matmul(a, b), a.dtype, k).ok:
        sys.exit(f"WRONG grouped {CFG.key}")
    calls = {
        "grouped": lambda: grouped(a, b, CFG),
        "torch.matmul": lambda: torch.matmul(a, b),
        "torch.empty": lambda: torch.empty((m, n), device="cuda", dtype=torch.bfloat16),
    }
    flush = Flush()
    cache = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    header = ("checkpoint", "call", "do_bench_us", "loop_event_us", "loop_host_us", "zero_us", "host_us")
    out = Rows(args.out, (*header, "graph_us"))
    summary = []

    def checkpoint(name: str) -> None:
        print(f"== {name}: {state()}", flush=True)
        summary.append(f"== {name}: {state()}")
        for label, fn in calls.items():
            event, loop_host, zero = loop_times(fn, cache)
            graph = flush.graph_flushed_us(fn) if label != "torch.empty" else float("nan")
            row = (do_bench_us(fn), event, loop_host, zero, host_us(fn), graph)
            out.add(name, label, *row)
            line = f"   {label:13s} do_bench {row[0]:6.1f} loop event {event:6.1f} loop host {loop_host:6.1f}"
            line += f" zero {zero:5.1f} host {row[4]:6.1f} graph {graph:6.1f}"
            print(line, flush=True)
            summary.append(line)
        Path(args.out).with_suffix(".txt").write_text("\n".join(summary) + "\n")

    checkpoint("fresh")
    flush.graph_flushed_us(calls["grouped"])
    checkpoint("after a graph capture")
    inductor = inductor_compiled(a, b)
    checkpoint("after Inductor's compile")
    for _ in range(200):
        inductor()
    torch.cuda.synchronize()
    checkpoint("after 200 Inductor calls")
    for cfg in OTHER_CFGS:
        grouped(a, b, cfg)
    torch.cuda.synchronize()
    checkpoint("after other configs compiled")
    gc.collect()
    gc.freeze()
    checkpoint("after gc.collect and gc.freeze")
    gc.unfreeze()
    torch._dynamo.reset()
    gc.collect()
    checkpoint("after torch._dynamo.reset")


if __name__ == "__main__":
    main()
