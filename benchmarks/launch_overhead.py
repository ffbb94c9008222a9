"""Host time to queue one call, by layer: where a short kernel's do_bench time goes on this host.

    python benchmarks/launch_overhead.py --out $OUT/launch_overhead.csv   # --shapes 512x512x32768 ...

do_bench's events hold the larger of a call's GPU time and its host time past the L2 flush's, so
a Triton kernel of 30-50 us measured from Python can be timing its launcher (on one H200
host 65-130 us a call against cuBLAS's 16-28, before the direct launches). Each row is the mean
host time of queueing `--calls` calls back to back (the GPU idle or behind; synchronised before and after):
- torch ops every launcher makes (an allocation, a memset, a cast);
- `_splitk_kernel[grid](...)`: Triton's JIT path (binds and specialises the arguments each call);
- the same compiled kernel called directly (`CompiledKernel[grid](*args)`), the path every
  launcher takes after a key's first call (`kernels.launching.DirectCalls`: a cache for
  any kernel, keyed argument by argument in Python, cost more than it saved);
- the variants' launchers as the farm and `kernels.matmul` call them, and torch.matmul.
After its timing, each variant multiplies new operands of the same shape (through the same path
as the timed calls) and its result is checked against fp64 (`ok` column).

Writes --out (kept as docs/results/launch_overhead.csv, from `--shapes 512x512x32768 3072x3072x3072
--calls 60`). Time: one compile per variant and shape, then --calls calls of each; a minute or two
on an H200 (not timed on its own: it ran in the same device call as the library bench).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from kernels import MatmulConfig
from tools.gpu_methods import host_us


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["512x512x32768", "4096x4096x4096", "2000x3000x1500"])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "launch_overhead.csv"))
    args = parser.parse_args(argv)

    import triton

    results = []
    for shape in args.shapes:
        results += measure(shape, args.calls)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["shape", "what", "host_us_per_call", "ok"])
        writer.writerows([(shape, name, f"{us:.1f}", ok) for shape, name, us, ok in results])
    print(f"{torch.cuda.get_device_name()}, triton {triton.__version__}, torch {torch.__version__}")
    for shape, name, us, ok in results:
        print(f"{shape:>15} {us:8.1f} us  {'' if ok in ('', True) else 'WRONG '}{name}")


VARIANTS = {
    "tiled": MatmulConfig(128, 128, 64, num_warps=8, num_stages=3),
    "grouped": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "grouped_pad": MatmulConfig(128, 64, 32, group_m=8, num_warps=4, num_stages=2),
    "splitk": MatmulConfig(128, 128, 64, split_k=8, num_warps=4, num_stages=4),
    "splitk_det": MatmulConfig(128, 128, 64, split_k=8, num_warps=4, num_stages=4),
    "streamk": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "streamk_hybrid": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "persistent_tma": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "persistent_tma_pad": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "persistent_tma_bands": MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
    "splitk_tma": MatmulConfig(128, 128, 64, split_k=8, num_warps=4, num_stages=4),
    "splitk_tma_reduce": MatmulConfig(128, 128, 64, split_k=8, num_warps=4, num_stages=4),
    "splitk_tma_cluster": MatmulConfig(128, 256, 64, split_k=8, num_warps=8, num_stages=6),
}


def measure(shape: str, calls: int) -> list[tuple[str, str, float, bool | str]]:
    """(shape, what, host us a call, result checked) for each layer at one shape."""
    import triton

    from kernels import check_accuracy, get_variant, reference_matmul
    from kernels.persistent_tma import TmaUnsupported
    from kernels.splitk import _splitk_kernel
    from kernels.tile import pointer_layout

    m, n, k = (int(x) for x in shape.split("x"))
    device = torch.device("cuda")
    a = torch.randn((m, k), device=device, dtype=torch.bfloat16)
    b = torch.randn((k, n), device=device, dtype=torch.bfloat16)
    c32 = torch.zeros((m, n), device=device, dtype=torch.float32)
    cfg = VARIANTS["splitk"]
    grid = (triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n) * cfg.split_k,)
    strides, align = pointer_layout(a, b, c32)
    params = {
        "a_ptr": a, "b_ptr": b, "c_ptr": c32, "M": m, "N": n, "K": k,
        "stride_am": strides[0], "stride_ak": strides[1], "stride_bk": strides[2],
        "stride_bn": strides[3], "stride_cm": strides[4], "stride_cn": strides[5], "stride_ck": 0,
        "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GROUP_M": 1,
        "SPLIT_K": cfg.split_k, "ATOMIC": True, "INPUT_PRECISION": "ieee", "ALIGN": align,
    }  # fmt: skip
    options = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    compiled = _splitk_kernel[grid](**params, **options)
    direct = compiled[(grid[0], 1, 1)]  # the direct path takes all three grid dimensions
    ordered = [params[name] for name in _splitk_kernel.arg_names]

    rows = [
        ("torch.empty (m, n) bf16", lambda: torch.empty((m, n), device=device, dtype=torch.bfloat16)),
        ("torch.zeros (m, n) fp32", lambda: torch.zeros((m, n), device=device, dtype=torch.float32)),
        ("fp32 -> bf16 cast (m, n)", lambda: c32.to(torch.bfloat16)),
        ("_splitk_kernel[grid](...) (JIT path)", lambda: _splitk_kernel[grid](**params, **options)),
        ("CompiledKernel[grid](*args) (direct)", lambda: direct(*ordered)),
        ("torch.matmul (cuBLAS)", lambda: torch.matmul(a, b)),
    ]  # fmt: skip
    results = [(shape, name, host_us(fn, calls, passes=1), "") for name, fn in rows]
    a2, b2 = torch.randn_like(a), torch.randn_like(b)
    ref = reference_matmul(a2, b2)
    for name, variant_cfg in VARIANTS.items():
        launcher = get_variant(name).launch
        try:
            us = host_us(lambda la=launcher, vc=variant_cfg: la(a, b, vc), calls, passes=1)
        except TmaUnsupported as exc:
            print(f"skip {name} at {shape}: {exc}")
            continue
        ok = check_accuracy(launcher(a2, b2, variant_cfg), ref, a.dtype, k).ok
        results.append((shape, f"variant {name} {variant_cfg.key}", us, ok))
    return results


if __name__ == "__main__":
    main()
