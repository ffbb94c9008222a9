"""What a `persistent_tma` tile costs beyond its MMA: time against K at 3000x5000, four epilogues.

    python bench/probes/tile_overhead.py --out $OUT/tile_overhead.csv     # H200, about 2 minutes

Why: at 3000x5000x1000 the kernel takes 67.5 us against cuBLAS's 51.9 (visit 105); its 480 tiles of
128x256 run in four rounds on 132 SMs, and at its 4096^3 rate (745 TFLOP/s) their MMA takes 46 us,
so about 5 us a tile go elsewhere: the pipeline's fill, the epilogue, the stores. A line through
time against K splits a tile's cost into what grows with K and what does not; the epilogues say how
much of the fixed part is storing C:

- `tma2`: as shipped, two TMA stores of BLOCK_N/2 columns staged through shared memory;
- `tma1`: one TMA store of the whole tile (twice the staging buffer);
- `ptr`: pointer stores from registers, masked at M and N, no staging buffer of ours;
- `none`: `ptr` under a mask that is all false at run time (the compiler cannot see it): the main
  loop and the epilogue's registers, no writes; its result is not checked. (A store under an `if`
  on a run-time flag does not compile in the flattened loop: TritonGPUFuseNestedLoops, visit 106.)

cuBLAS beside each shape; every other result checked against fp64, then timed with L2 flushed in
CUDA graphs and by do_bench (bench/gpu_methods.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch
import triton
import triton.language as tl

from bench.probes import Rows, probe_parser, time_checked
from kernels.config import MatmulConfig
from kernels.schedule import cdiv, grouped_tile_jit, multiprocessor_count

SHAPES = [(3000, 5000, k) for k in (256, 512, 1000, 2000, 4000)] + [(3072, 3072, 3072)]
CONFIGS = (
    MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
    MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=4),
)
EPILOGUES = {"tma2": 0, "tma1": 1, "ptr": 2, "none": 3}


@triton.jit
def _kernel(
    a_desc, b_desc, c_desc, c_ptr, M, N, K, stride_cm, skip,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr, EPILOGUE: tl.constexpr,
):  # fmt: skip
    """kernels/persistent_tma.py's kernel (A and B row-major) with its epilogue chosen by EPILOGUE."""
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    tile_c = start - NUM_PROGRAMS
    for tile in tl.range(start, num_tiles, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = grouped_tile_jit(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            off_k = ki * BLOCK_K
            acc = tl.dot(a_desc.load([off_m, off_k]), b_desc.load([off_k, off_n]), acc)
        tile_c += NUM_PROGRAMS
        pid_m, pid_n = grouped_tile_jit(tile_c, num_pid_m, num_pid_n, GROUP_M)
        if EPILOGUE == 0:
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], left.to(c_desc.dtype))
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N + BLOCK_N // 2], right.to(c_desc.dtype))
        elif EPILOGUE == 1:
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))
        elif EPILOGUE == 2:
            rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            mask = (rows[:, None] < M) & (cols[None, :] < N)
            tl.store(
                c_ptr + rows[:, None] * stride_cm + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask
            )
        else:  # the pointer store under a mask that is all false at run time (skip = 2): no writes
            rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            mask = (rows[:, None] < M * (skip - 2)) & (cols[None, :] < N)
            pointers = c_ptr + rows[:, None] * stride_cm + cols[None, :]
            tl.store(pointers, acc.to(c_ptr.dtype.element_ty), mask=mask)


def launcher(epilogue: int, cfg: MatmulConfig, a: torch.Tensor, b: torch.Tensor):
    from triton.tools.tensor_descriptor import TensorDescriptor

    (m, k), n = a.shape, b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    programs = min(multiprocessor_count(a.device), cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n))
    box_n = cfg.block_n // 2 if epilogue == 0 else cfg.block_n
    a_desc = TensorDescriptor(a, list(a.shape), [a.stride(0), 1], [cfg.block_m, cfg.block_k])
    b_desc = TensorDescriptor(b, list(b.shape), [b.stride(0), 1], [cfg.block_k, cfg.block_n])
    c_desc = TensorDescriptor(c, list(c.shape), [c.stride(0), 1], [cfg.block_m, box_n])

    def call() -> torch.Tensor:
        _kernel[(programs,)](
            a_desc, b_desc, c_desc, c, m, n, k, c.stride(0), 2,
            BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
            NUM_PROGRAMS=programs, EPILOGUE=epilogue, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )  # fmt: skip
        return c

    return call


def main(argv: list[str] | None = None) -> None:
    from bench.gpu_methods import Flush
    from kernels import reference_matmul

    parser = probe_parser(__doc__, "tile_overhead.csv", budget_s=150)
    args = parser.parse_args(argv)
    out = Rows(args.out, ("shape", "op", "graph_flush_us", "do_bench_us"))
    flush = Flush()
    for m, n, k in SHAPES:
        shape, stop_at = f"{m}x{n}x{k}", time.time() + args.budget_s / len(SHAPES)
        a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
        ops = [("cublas", lambda a=a, b=b: torch.matmul(a, b))]
        for cfg in CONFIGS:
            for name, epilogue in EPILOGUES.items():
                call = launcher(epilogue, cfg, a, b)
                if name == "none":  # nothing to check: timed as it is
                    call()
                    out.add(shape, f"{name} {cfg.key}", flush.graph_flushed_us(call), float("nan"))
                else:
                    ops.append((f"{name} {cfg.key}", call))
        time_checked(out, shape, ops, reference_matmul(a, b), k, stop_at)
        print(shape, "done", flush=True)
    for row in out.rows:
        print(f"{row[0]:16s} {row[1]:44s} {row[2]:8.1f} {row[3]:8.1f}")


if __name__ == "__main__":
    main()
