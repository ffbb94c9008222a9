"""Where a launcher's host time goes: each TMA launcher (and torch.matmul) timed, then profiled.

    python bench/probes/launcher_profile.py --out $OUT/launcher_profile.txt     # H200, about a minute

Why: on visits 99-100's hosts our TMA launchers took 35-112 us of host a call against cuBLAS's
15-30 (docs/bench/launch_overhead-visit100.csv, tail_streams-visit99.csv), near or past the ~70 us
that do_bench's L2 flush hides; in one process 768x768x12288 fp16 read 82.5 us through `splitk_tma`
against its 30 us of GPU time (visit 100). Each launcher's host time a call (best of three passes,
bench/gpu_methods.host_us), then cProfile over `--calls` calls (synchronised every 20 so the launch
queue never fills), the functions by their own time: which of ours (the checks, the plan's lookup,
allocations, descriptors) and which of Triton's launcher (descriptor encoding, the C launch) cost.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch

from bench.probes import probe_parser
from kernels.config import MatmulConfig

BIG = MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)
SPLIT = MatmulConfig(128, 128, 64, split_k=8, num_warps=8, num_stages=6)
CASES = [  # (variant, shape, config); torch.matmul for each shape
    ("persistent_tma", (3072, 3072, 3072), BIG),
    ("persistent_tma_bands", (3072, 3072, 3072), BIG),
    ("splitk_tma", (512, 512, 32768), SPLIT),
    ("splitk_tma_reduce", (512, 512, 32768), SPLIT),
    ("grouped", (2000, 3000, 1500), MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3)),
    # K = 1500: A copied to aligned rows before the launch; what the dispatcher serves there, 44 us of GPU
    # read 104-121 eagerly, its launcher 78-127 us of host a call on visit 120's host
    (
        "persistent_tma_pad",
        (2000, 3000, 1500),
        MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=4),
    ),
    # K = 71 and N = 5333: two operand copies and a padded C before the launch (visit 103: 52 us eager
    # against 9.4 of GPU time)
    ("persistent_tma_pad", (495, 5333, 71), MatmulConfig(128, 128, 128, num_warps=8, num_stages=3)),
    ("grouped", (495, 5333, 71), MatmulConfig(128, 64, 32, group_m=8, num_warps=4, num_stages=2)),
    ("grouped_pad", (495, 5333, 71), MatmulConfig(64, 128, 32, group_m=8, num_warps=4, num_stages=2)),
]


def profiled(fn, calls: int, top: int) -> str:
    """fn's `top` functions by own time over `calls` calls."""
    profile = cProfile.Profile()
    for done in range(0, calls, 20):
        batch = range(min(20, calls - done))
        torch.cuda.synchronize()
        profile.enable()
        for _ in batch:
            fn()
        profile.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def main(argv: list[str] | None = None) -> None:
    from bench.gpu_methods import host_us
    from kernels import check_accuracy, get_variant, reference_matmul

    parser = probe_parser(__doc__, "launcher_profile.txt")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    summary, reports = [], []
    for name, (m, n, k), cfg in CASES:
        a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
        launch = get_variant(name).launch
        if not check_accuracy(launch(a, b, cfg), reference_matmul(a, b), a.dtype, k).ok:
            sys.exit(f"WRONG {name} {cfg.key}")
        for label, fn in ((name, lambda: launch(a, b, cfg)), ("torch.matmul", lambda: torch.matmul(a, b))):  # noqa: B023
            us = host_us(fn)
            summary.append(f"{m}x{n}x{k:<6} {label:22s} {us:7.1f} us")
            reports.append(
                f"==== {m}x{n}x{k} {label}: {us:.1f} us a call\n{profiled(fn, args.calls, args.top)}"
            )
            print(summary[-1], flush=True)
            Path(args.out).write_text("\n".join(summary) + "\n\n" + "\n".join(reports))


if __name__ == "__main__":
    main()
