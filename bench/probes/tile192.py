"""3072^3 in 128x192 tiles, cuBLAS's kernels, and host time over a process's life.

    python bench/probes/tile192.py --out $OUT/tile192.csv      # H200, about 1 minute

cuBLAS runs 3072^3 in 192x192 tiles (1.94 waves on 132 SMs); Triton's blocks are powers of two. A
128x192 tile (384 tiles, 2.91 waves, against 128x256's 2.18) is built here from three 64-wide
accumulators, or from a 128- and a 64-wide one (`wide`), in a persistent TMA kernel, and timed four
ways (bench/gpu_methods.py) against cuBLAS, `persistent_tma` and `persistent_tma_bands`. Then the
names and times of cuBLAS's kernels at 3072^3 and the skinny-K shapes (torch.profiler), and the host
time of a few calls (a 31-frame Python call, torch.empty, a Triton no-op launch, persistent_tma's
launcher, a 2x2 torch.matmul) at checkpoints: the start, after the graphs and the profiler, after
Inductor's max-autotune compile, after its compile workers are shut down. Visit 93's run:
docs/bench/tile192_host-visit93.csv, cublas_kernels-visit93.txt.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from bench.probes import Rows, probe_parser
from kernels.config import MatmulConfig
from kernels.schedule import grouped_tile_jit, multiprocessor_count

MAIN = MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)
SKINNY = ((512, 512, 32768), (256, 256, 65536), (640, 640, 24576), (1024, 1024, 16384))


@triton.jit
def _tile192_kernel(
    a_desc, b_desc, bw_desc, c_desc, M, N, K,
    BLOCK_M: tl.constexpr, SUB_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr, WIDE_FIRST: tl.constexpr, FLATTEN: tl.constexpr,
):  # fmt: skip
    """Persistent, in GROUP_M order, BLOCK_M x (3 * SUB_N) tiles: three SUB_N-wide accumulators, or
    (WIDE_FIRST) a 2 * SUB_N-wide one and a SUB_N-wide one. b_desc's box is [BLOCK_K, SUB_N], bw_desc's
    [BLOCK_K, 2 * SUB_N]; C is stored in [BLOCK_M, SUB_N] boxes."""
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, 3 * SUB_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    tile_c = start - NUM_PROGRAMS
    for tile in tl.range(start, num_tiles, NUM_PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = grouped_tile_jit(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * 3 * SUB_N
        if WIDE_FIRST:
            acc0 = tl.zeros((BLOCK_M, 2 * SUB_N), dtype=tl.float32)
            acc2 = tl.zeros((BLOCK_M, SUB_N), dtype=tl.float32)
            for ki in range(k_tiles):
                off_k = ki * BLOCK_K
                a = a_desc.load([off_m, off_k])
                acc0 = tl.dot(a, bw_desc.load([off_k, off_n]), acc0)
                acc2 = tl.dot(a, b_desc.load([off_k, off_n + 2 * SUB_N]), acc2)
            tile_c += NUM_PROGRAMS
            pid_m, pid_n = grouped_tile_jit(tile_c, num_pid_m, num_pid_n, GROUP_M)
            om = pid_m * BLOCK_M
            on = pid_n * 3 * SUB_N
            left, right = tl.split(tl.permute(tl.reshape(acc0, (BLOCK_M, 2, SUB_N)), (0, 2, 1)))
            c_desc.store([om, on], left.to(c_desc.dtype))
            c_desc.store([om, on + SUB_N], right.to(c_desc.dtype))
            c_desc.store([om, on + 2 * SUB_N], acc2.to(c_desc.dtype))
        else:
            acc0 = tl.zeros((BLOCK_M, SUB_N), dtype=tl.float32)
            acc1 = tl.zeros((BLOCK_M, SUB_N), dtype=tl.float32)
            acc2 = tl.zeros((BLOCK_M, SUB_N), dtype=tl.float32)
            for ki in range(k_tiles):
                off_k = ki * BLOCK_K
                a = a_desc.load([off_m, off_k])
                acc0 = tl.dot(a, b_desc.load([off_k, off_n]), acc0)
                acc1 = tl.dot(a, b_desc.load([off_k, off_n + SUB_N]), acc1)
                acc2 = tl.dot(a, b_desc.load([off_k, off_n + 2 * SUB_N]), acc2)
            tile_c += NUM_PROGRAMS
            pid_m, pid_n = grouped_tile_jit(tile_c, num_pid_m, num_pid_n, GROUP_M)
            om = pid_m * BLOCK_M
            on = pid_n * 3 * SUB_N
            c_desc.store([om, on], acc0.to(c_desc.dtype))
            c_desc.store([om, on + SUB_N], acc1.to(c_desc.dtype))
            c_desc.store([om, on + 2 * SUB_N], acc2.to(c_desc.dtype))


def tile192(
    a, b, c, bm=128, sub=64, bk=64, warps=8, stages=3, group=8, wide=False, flatten=True, programs=None
):
    """c = a @ b in bm x (3 * sub) tiles, on one program per SM (or `programs`)."""
    m, k = a.shape
    n = b.shape[1]
    a_desc = TensorDescriptor(a, list(a.shape), [a.stride(0), 1], [bm, bk])
    b_desc = TensorDescriptor(b, list(b.shape), [b.stride(0), 1], [bk, sub])
    bw_desc = TensorDescriptor(b, list(b.shape), [b.stride(0), 1], [bk, 2 * sub])
    c_desc = TensorDescriptor(c, list(c.shape), [c.stride(0), 1], [bm, sub])
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, 3 * sub)
    grid = (min(programs or multiprocessor_count(a.device), tiles),)
    _tile192_kernel[grid](
        a_desc, b_desc, bw_desc, c_desc, m, n, k, BLOCK_M=bm, SUB_N=sub, BLOCK_K=bk, GROUP_M=group,
        NUM_PROGRAMS=grid[0], WIDE_FIRST=wide, FLATTEN=flatten, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return c


def _f0(x):
    return x


def _f1(x):
    return _f0(x) + 1


def _f2(x):
    return _f1(x) + _f1(x)


def _f3(x):
    return _f2(x) + _f2(x)


def python31(x):
    """31 Python calls: the interpreter's own speed."""
    return _f3(x) + _f3(x)


@triton.jit
def _noop(x_ptr):
    pass


def host_point(label: str, emit) -> None:
    from bench.gpu_methods import host_us
    from kernels.persistent_tma import launch_into

    x = torch.empty(16, device="cuda")
    a = torch.randn((3072, 3072), device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    for name, fn, calls in (
        ("python31", lambda: python31(1), 2000),
        ("torch_empty", lambda: torch.empty((3072, 3072), device="cuda", dtype=torch.bfloat16), 200),
        ("noop_launch", lambda: _noop[(1,)](x), 200),
        ("tma_launch", lambda: launch_into(a, a, c, MAIN), 20),
        ("matmul_2x2", lambda: torch.matmul(x[:4].view(2, 2), x[4:8].view(2, 2)), 200),
    ):
        fn()
        emit(label, name, "host_us_min", host_us(fn, calls, passes=5))


def tiles_192(emit) -> None:
    from bench.gpu_methods import Flush, do_bench_us, graph_warm_us
    from kernels.persistent_bands import persistent_tma_bands
    from kernels.persistent_tma import launch_into

    flush = Flush()
    methods = {"graph_warm": graph_warm_us, "graph_flush": flush.graph_flushed_us, "do_bench": do_bench_us}
    for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        gen = torch.Generator(device="cuda").manual_seed(93)
        a = torch.randn((3072, 3072), device="cuda", dtype=dtype, generator=gen)
        b = torch.randn((3072, 3072), device="cuda", dtype=dtype, generator=gen)
        c = torch.empty_like(a)
        ref = torch.matmul(a.float(), b.float())
        ops = {
            "cublas": lambda a=a, b=b: torch.matmul(a, b),
            "tma_128x256": lambda a=a, b=b, c=c: launch_into(a, b, c, MAIN),
            "bands_shipped": lambda a=a, b=b: persistent_tma_bands(a, b, MAIN),
        }
        for wide in (False, True):
            for stages in (3, 4):
                for flatten in (True, False):
                    name = f"t192_{'128+64' if wide else '3x64'}_s{stages}_{'flat' if flatten else 'loop'}"
                    ops[name] = lambda a=a, b=b, c=c, w=wide, s=stages, f=flatten: tile192(
                        a, b, c, stages=s, wide=w, flatten=f
                    )
        for name, fn in ops.items():
            out = fn()
            err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
            emit(dname, name, "max_rel_err", err)
            if err > 1e-2:  # a dropped tile reads ~1
                sys.exit(f"WRONG {dname} {name}: max relative error {err}")
            for method, measure in methods.items():
                emit(dname, name, method, measure(fn))


def cublas_kernels(out_dir: str) -> None:
    from torch.profiler import ProfilerActivity, profile

    with open(os.path.join(out_dir, "cublas_kernels.txt"), "w") as f:
        for m, n, k in ((3072, 3072, 3072), *SKINNY):
            x = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
            y = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
            torch.matmul(x, y)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    torch.matmul(x, y)
                torch.cuda.synchronize()
            for event in prof.events():
                if event.device_type.name == "CUDA":
                    f.write(f"{m}x{n}x{k}\t{event.device_time:.1f}\t{event.name}\n")
                    print(f"cublas {m}x{n}x{k}: {event.device_time:6.1f} us {event.name[:100]}")


def main(argv: list[str] | None = None) -> None:
    parser = probe_parser(__doc__, "tile192.csv")
    args = parser.parse_args(argv)
    out = Rows(args.out, ("phase", "op", "method", "value"))
    emit, rows = out.add, out.rows

    host_point("start", emit)
    tiles_192(emit)
    cublas_kernels(os.path.dirname(os.path.abspath(args.out)))
    host_point("after_graphs_profiler", emit)
    torch._dynamo.reset()
    a = torch.randn((3072, 3072), device="cuda", dtype=torch.bfloat16)
    torch.compile(torch.matmul, mode="max-autotune-no-cudagraphs", dynamic=False)(a, a)
    host_point("after_compile", emit)
    from torch._inductor.async_compile import shutdown_compile_workers

    shutdown_compile_workers()
    host_point("after_workers_shutdown", emit)

    table = {(p, o, m): v for p, o, m, v in rows}
    print("\nop                          graph_warm graph_flush do_bench")
    for phase in ("bf16", "fp16"):
        for op in sorted({r[1] for r in rows if r[0] == phase}):
            values = [
                table.get((phase, op, m), float("nan")) for m in ("graph_warm", "graph_flush", "do_bench")
            ]
            print(f"{phase} {op:24s} " + " ".join(f"{v:9.1f}" for v in values))


if __name__ == "__main__":
    main()
