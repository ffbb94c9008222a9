"""`persistent_tma` with two or three programs resident on each SM, against one, cuBLAS beside.

    python bench/probes/occupancy.py --out $OUT/occupancy.csv     # H200, about 4 minutes

Why: the persistent kernel runs one program per SM (128x256 tiles, 8 warps, 3 stages: 160 KiB of
shared memory), so each tile's epilogue (convert, stage, TMA store of 64 KiB) and the next tile's
pipeline fill stall its SM's tensor cores. Where K is short those stalls are a large part of a tile:
3000x5000x1000 runs 67 us against cuBLAS's 51.5 (visit 103, 0.77), about 16.8 us a 128x256 tile
for 12 us of MMA at the 4096^3 rate. Two resident programs of 128x128 tiles, 2-3 stages each (80-112
KiB), let one's epilogue run under the other's main loop, as cuBLAS's ping-pong kernels do with two
consumer warp groups; the grid's programs per SM is all that changes (NUM_PROGRAMS, the stride of
each program's walk). Whether Triton's allocation lets two fit is printed beside (registers, shared
memory). Every result checked against fp64, then timed with L2 flushed in CUDA graphs and by
do_bench (bench/gpu_methods.py). Run it last in a visit's call (an LLVM abort ends the process).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch

from bench.probes import Rows, probe_parser, time_checked
from kernels.config import MatmulConfig
from kernels.schedule import cdiv, multiprocessor_count

SHAPES = ((3000, 5000, 1000), (3072, 3072, 3072), (2048, 6144, 4096), (4096, 4096, 4096), (5000, 5000, 200))
# (programs per SM, config); the first two are the shipped ones (one program per SM)
POINTS = (
    (1, MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)),
    (1, MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=4)),
    (2, MatmulConfig(128, 128, 64, group_m=8, num_warps=4, num_stages=2)),
    (2, MatmulConfig(128, 128, 64, group_m=8, num_warps=4, num_stages=3)),
    (2, MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=2)),
    (2, MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3)),
    (2, MatmulConfig(64, 256, 64, group_m=8, num_warps=4, num_stages=3)),
    (2, MatmulConfig(128, 64, 64, group_m=8, num_warps=4, num_stages=4)),
    (3, MatmulConfig(128, 64, 64, group_m=8, num_warps=4, num_stages=3)),
    (2, MatmulConfig(128, 128, 128, group_m=8, num_warps=8, num_stages=2)),
)


def launcher(per_sm: int, cfg: MatmulConfig, a: torch.Tensor, b: torch.Tensor):
    """A call of `persistent_tma`'s kernel with per_sm programs an SM, and its compiled kernel's
    registers a thread and shared memory (through Triton's JIT path: host time is not measured here)."""
    from kernels.persistent_tma import TmaPlan, _persistent_tma_kernel, output_descriptor

    (m, k), n = a.shape, b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    programs = min(per_sm * multiprocessor_count(a.device), cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n))
    plan = TmaPlan.make(a, b, c, output_descriptor(c, cfg), cfg, (programs,), NUM_PROGRAMS=programs)

    def launch():
        return _persistent_tma_kernel[plan.grid](
            *plan.descriptors(a, b, c), m, n, k, **plan.constexprs,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )  # fmt: skip

    def call() -> torch.Tensor:
        launch()
        return c

    compiled = launch()
    if compiled is None:  # the interpreter compiles nothing
        return call, "interpreted"
    return call, f"regs {compiled.n_regs} smem {compiled.metadata.shared // 1024}K"


def main(argv: list[str] | None = None) -> None:
    from kernels import reference_matmul

    parser = probe_parser(__doc__, "occupancy.csv", budget_s=200)
    args = parser.parse_args(argv)
    out = Rows(args.out, ("shape", "op", "graph_flush_us", "do_bench_us"))
    for m, n, k in SHAPES:
        shape, stop_at = f"{m}x{n}x{k}", time.time() + args.budget_s / len(SHAPES)
        a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
        ops = [("cublas", lambda a=a, b=b: torch.matmul(a, b))]
        for per_sm, cfg in POINTS:
            try:
                call, resources = launcher(per_sm, cfg, a, b)
            except Exception as exc:  # out of shared memory: said, skipped
                print(f"skip {shape} x{per_sm} {cfg.key}: {str(exc)[:160]}", flush=True)
                continue
            ops.append((f"x{per_sm} {cfg.key} {resources}", call))
        time_checked(out, shape, ops, reference_matmul(a, b), k, stop_at)
        print(shape, "done", flush=True)
    print("\n".join(out.best_lines(("cublas", "x1", "x2", "x3"))))
    for row in out.rows:
        print(f"{row[0]:18s} {row[1]:64s} {row[2]:8.1f} {row[3]:8.1f}")


if __name__ == "__main__":
    main()
