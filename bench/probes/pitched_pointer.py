"""A pointer kernel for K of a few dozen with odd N: operands and C in rows 128 bytes apart.

    python bench/probes/pitched_pointer.py --out $OUT/pitched_pointer.csv     # H200, about 2 minutes

Why: at 495x5333x71 the best `grouped` config runs 14.6 us of GPU time (flushed, in CUDA graphs)
against cuBLAS's 10.5, while `persistent_tma_pad`, which copies A and B into rows 128 bytes apart
and stores C into such rows (returning an (M, N) view), runs 9.4 us, copies included (visit 103).
Where K is 71 the product is mostly writing C (5.3 MB); with N = 5333 `grouped` can neither store
C nor load B in vectors: its store masks at N and its B loads wrap at `% N`, so Triton can prove no
run of 8 columns contiguous and in bounds. In rows 128 bytes apart the store can mask at the pitch
(a multiple of 64 columns; the padding is never read), B's loads can run to the pitch over
`pitched_copy`'s zeros, and A's to its pitch over zeros too (K's tail mask then only on B's rows).
Modes, each checked against fp64, then timed with L2 flushed in CUDA graphs and by do_bench, and its
host time (bench/gpu_methods.py):

- `grouped`: the shipped variant;
- `C`: C pitched, A and B as given (no copy);
- `BC`: B copied pitched inside the call, C pitched;
- `ABC`: A and B copied pitched inside the call, C pitched;
- `ABC kernel`: the same kernel over copies made once (the copies' cost left out);
- `grouped_pad`: the variant shipped after visit 107 (`BC` through `grouped`'s kernel, compiled kernels
  called directly).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch
import triton
import triton.language as tl

from bench.probes import Rows, probe_parser
from kernels.config import MatmulConfig
from kernels.schedule import cdiv, grouped_tile_jit

SHAPES = ((495, 5333, 71), (333, 4444, 200))
CONFIGS = (
    MatmulConfig(64, 128, 32, group_m=8, num_warps=4, num_stages=3),
    MatmulConfig(128, 64, 32, group_m=8, num_warps=4, num_stages=2),
    MatmulConfig(128, 128, 32, group_m=8, num_warps=4, num_stages=2),
    MatmulConfig(64, 128, 32, group_m=8, num_warps=4, num_stages=2),
    MatmulConfig(128, 64, 64, group_m=8, num_warps=4, num_stages=2),
    MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=2),
)
MODES = ("C", "BC", "ABC", "ABC kernel")


@triton.jit
def _kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    A_PITCHED: tl.constexpr, B_PITCHED: tl.constexpr,
):  # fmt: skip
    """C (pitched: rows stride_cm apart, stride_cm a multiple of 64) = A @ B, A and B row-major."""
    pid_m, pid_n = grouped_tile_jit(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    b_cols = cols if B_PITCHED else cols % N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_in = (k0 + ks) < K
        a_ptrs = a_ptr + rows[:, None] * stride_am + (k0 + ks)[None, :]
        # Pitched, A holds zeros past K up to its pitch, which holds whole BLOCK_K steps: no mask.
        a = tl.load(a_ptrs) if A_PITCHED else tl.load(a_ptrs, mask=k_in[None, :], other=0.0)
        b_ptrs = b_ptr + (k0 + ks)[:, None] * stride_bk + b_cols[None, :]
        if B_PITCHED:  # columns to the pitch (zeros past N); rows past K masked
            b = tl.load(b_ptrs, mask=k_in[:, None] & (b_cols[None, :] < stride_bk), other=0.0)
        else:
            b = tl.load(b_ptrs, mask=k_in[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
    out_rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (out_rows[:, None] < M) & (cols[None, :] < stride_cm)  # the padding takes what lies past N
    c_ptrs = c_ptr + out_rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def pitched_call(mode: str, cfg: MatmulConfig, a: torch.Tensor, b: torch.Tensor):
    """The call of `mode`; its result is the (M, N) view of the pitched C."""
    from kernels.pitched import aligned_rows, pitched_copy

    (m, k), n = a.shape, b.shape[1]
    grid = (cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n),)
    a_kept, b_kept = pitched_copy(a), pitched_copy(b)
    assert a_kept.stride(0) >= cdiv(k, cfg.block_k) * cfg.block_k, "A's pitch must hold whole K steps"

    def call() -> torch.Tensor:
        aa = a_kept if mode == "ABC kernel" else pitched_copy(a) if "A" in mode else a
        bb = b_kept if mode == "ABC kernel" else pitched_copy(b) if "B" in mode else b
        c = aligned_rows(m, n, like=a)
        _kernel[grid](
            aa, bb, c, m, n, k, aa.stride(0), bb.stride(0), c.stride(0),
            BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
            A_PITCHED="A" in mode, B_PITCHED="B" in mode, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )  # fmt: skip
        return c

    return call


def main(argv: list[str] | None = None) -> None:
    from bench.gpu_methods import Flush, do_bench_us, host_us
    from kernels import check_accuracy, get_variant, reference_matmul

    parser = probe_parser(__doc__, "pitched_pointer.csv")
    args = parser.parse_args(argv)
    flush = Flush()
    out = Rows(args.out, ("shape", "dtype", "op", "graph_flush_us", "do_bench_us", "host_us"))
    grouped, grouped_pad = get_variant("grouped").launch, get_variant("grouped_pad").launch
    for m, n, k in SHAPES:
        for dtype in (torch.bfloat16, torch.float16):
            a = torch.randn((m, k), device="cuda", dtype=dtype)
            b = torch.randn((k, n), device="cuda", dtype=dtype)
            ref = reference_matmul(a, b)
            ops = [("cublas", lambda a=a, b=b: torch.matmul(a, b))]
            for cfg in CONFIGS:
                ops.append((f"grouped {cfg.key}", lambda a=a, b=b, cfg=cfg: grouped(a, b, cfg)))
                ops.append((f"grouped_pad {cfg.key}", lambda a=a, b=b, cfg=cfg: grouped_pad(a, b, cfg)))
                ops += [(f"{mode} {cfg.key}", pitched_call(mode, cfg, a, b)) for mode in MODES]
            for name, fn in ops:
                if not check_accuracy(fn(), ref, dtype, k).ok:
                    out.add(f"{m}x{n}x{k}", str(dtype)[6:], f"WRONG {name}", *[float("nan")] * 3)
                    continue
                times = flush.graph_flushed_us(fn), do_bench_us(fn), host_us(fn)
                out.add(f"{m}x{n}x{k}", str(dtype)[6:], name, *times)
            print(m, n, k, dtype, "done", flush=True)
    for r in out.rows:
        print(f"{r[0]:14s} {r[1]:8s} {r[2]:46s} {r[3]:7.1f} {r[4]:7.1f} {r[5]:6.1f}")


if __name__ == "__main__":
    main()
