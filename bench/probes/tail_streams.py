"""3072^3's tail band on a second CUDA stream, beside or after `persistent_tma_bands`' main band.

    python bench/probes/tail_streams.py --out $OUT/tail_streams.csv     # H200, about 3 minutes

The main band (rows 0-2815, 128x256 tiles, 8 warps, 3 stages) fills two whole waves of 132 SMs; the
tail (256 rows) runs in sequence as shipped, or on a second stream enqueued before ("before") or
after ("after") the main band, in 128x64, 64x128, 128x128 or 64x64 tiles at 3 and 2 stages. A tail
CTA runs beside a main-band one only if both fit on an SM: the compiled kernels' shared memory and
registers are printed. Each op timed four ways (bench/gpu_methods.py), bf16 and fp16, against cuBLAS;
then host time and do_bench again after Inductor's max-autotune compile in the same process.
Visit 92 (docs/bench/tail_streams-visit92.csv) measured host time in one pass of 60 calls; this
takes the best of three.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch

from bench.gpu_methods import Flush, do_bench_us, graph_warm_us, host_us
from bench.probes import Rows, probe_parser
from kernels.config import MatmulConfig
from kernels.persistent_bands import persistent_tma_bands
from kernels.persistent_tma import _persistent_tma_kernel, launch_into

MAIN = MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)
TAILS = [(bm, bn, stages) for bm, bn in ((128, 64), (64, 128), (128, 128), (64, 64)) for stages in (3, 2)]
CUT = 2816  # 22 tile rows of 128: 264 tiles, two waves of 132 SMs


def ops_for(a: torch.Tensor, b: torch.Tensor, side: torch.cuda.Stream) -> tuple[torch.Tensor, dict]:
    """C, and name -> a call writing all of C (or the main band, or the tail, alone)."""
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)

    def main():
        launch_into(a[:CUT], b, c[:CUT], MAIN)

    ops = {
        "cublas": lambda: torch.matmul(a, b),
        "tma_single": lambda: launch_into(a, b, c, MAIN),
        "bands_shipped": lambda: persistent_tma_bands(a, b, MAIN),
        "main_alone": main,
    }
    for bm, bn, stages in TAILS:
        cfg = MatmulConfig(bm, bn, 64, group_m=8, num_warps=4, num_stages=stages)

        def tail(cfg=cfg):
            launch_into(a[CUT:], b, c[CUT:], cfg)

        def forked(tail=tail, tail_first=True):
            here = torch.cuda.current_stream()
            side.wait_stream(here)
            if not tail_first:
                main()
            with torch.cuda.stream(side):
                tail()
            if tail_first:
                main()
            here.wait_stream(side)

        name = f"{bm}x{bn}s{stages}"
        ops[f"tail_{name}"] = tail
        ops[f"seq_{name}"] = lambda tail=tail: (main(), tail())
        ops[f"before_{name}"] = lambda forked=forked: forked(tail_first=True)
        ops[f"after_{name}"] = lambda forked=forked: forked(tail_first=False)
    return c, ops


def kernel_resources() -> list[tuple]:
    """(BLOCK_M, BLOCK_N, warps, stages, shared bytes, registers a thread) of each compiled TMA kernel."""
    names, found = _persistent_tma_kernel.arg_names, []
    for cache in _persistent_tma_kernel.device_caches.values():
        for kernel in cache[0].values():
            kernel._init_handles()
            consts = {names[key[0]]: value for key, value in kernel.src.constants.items()}
            md = kernel.metadata
            shape = (consts["BLOCK_M"], consts["BLOCK_N"], md.num_warps, md.num_stages)
            found.append((*shape, md.shared, kernel.n_regs))
    return found


def main(argv: list[str] | None = None) -> None:
    parser = probe_parser(__doc__, "tail_streams.csv")
    args = parser.parse_args(argv)
    out = Rows(args.out, ("phase", "dtype", "op", "method", "value"))
    emit, rows = out.add, out.rows

    flush, side = Flush(), torch.cuda.Stream()
    methods = {"graph_warm": graph_warm_us, "graph_flush": flush.graph_flushed_us, "do_bench": do_bench_us}
    per_dtype = {}
    for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        gen = torch.Generator(device="cuda").manual_seed(92)
        a = torch.randn((3072, 3072), device="cuda", dtype=dtype, generator=gen)
        b = torch.randn((3072, 3072), device="cuda", dtype=dtype, generator=gen)
        c, ops = ops_for(a, b, side)
        ref = torch.matmul(a.float(), b.float())
        per_dtype[dname] = ops
        for name, fn in ops.items():
            if name.startswith(("seq_", "before_", "after_", "tma_")):
                c.zero_()
                fn()
                err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
                emit("check", dname, name, "max_rel_err", err)
                if err > 1e-2:  # a dropped tile reads ~1
                    sys.exit(f"WRONG {dname} {name}: max relative error {err}")
            for method, measure in methods.items():
                emit("pre", dname, name, method, measure(fn))
        for name in ("cublas", "tma_single", "bands_shipped"):
            emit("pre", dname, name, "host_us", host_us(ops[name]))
    for res in kernel_resources():
        print("BLOCK_M BLOCK_N warps stages shared regs:", *res)
        emit("resources", "", "x".join(map(str, res[:4])), "shared_bytes", res[4])
        emit("resources", "", "x".join(map(str, res[:4])), "regs", res[5])

    ops = per_dtype["bf16"]
    a = torch.randn((3072, 3072), device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    start = time.time()
    compiled = torch.compile(torch.matmul, mode="max-autotune-no-cudagraphs", dynamic=False)
    compiled(a, a)
    emit("post", "bf16", "inductor", "compile_s", time.time() - start)
    ops["inductor"] = lambda: compiled(a, a)
    for name in ("cublas", "inductor", "tma_single", "bands_shipped", "seq_128x64s3", "after_128x64s3"):
        emit("post", "bf16", name, "host_us", host_us(ops[name]))
        emit("post", "bf16", name, "do_bench", do_bench_us(ops[name]))

    table = {(p, d, o, m): v for p, d, o, m, v in rows}
    print("\nphase dtype op                 graph_warm graph_flush do_bench host_us")
    for phase, dname, op in sorted({r[:3] for r in rows if r[0] in ("pre", "post")}):
        values = [table.get((phase, dname, op, m), float("nan")) for m in (*methods, "host_us")]
        print(f"{phase:5s} {dname} {op:18s} " + " ".join(f"{v:9.1f}" for v in values))


if __name__ == "__main__":
    main()
