"""Does the row pitch of padded operands change persistent_tma's speed, and what does the copy cost?

    python bench/pad_pitch.py --out $OUT/pad_pitch.csv

For each shape (bf16): A, B and C copied into rows 16 B apart (TMA's minimum) and 128 B apart
(a cache line), then persistent_tma's kernel timed on the copies (do_bench, L2 flushed; and a
CUDA graph, GPU only) and the whole padded call (copies included), each result checked against
fp64. Then the copy alone (`--copies-only`: only that): `kernels.pitched.pitched_copy` (what
`persistent_tma_pad` runs), torch's `copy_` into the same rows, and a clone of the same bytes.
Visits 46-47 ran these as two scratch scripts with the same measurements (docs/perf-notes.md);
`kernels.pitched.PAD_PITCH_BYTES` is what they decided.
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

SHAPES = [
    "4097x4097x4097",
    "4096x32001x4096",
    "2048x50257x768",
    "2000x3000x1500",
    "3000x5000x1000",
    "4096x4096x4096",
]


def pitched(t: torch.Tensor, pitch_bytes: int) -> torch.Tensor:
    """A copy of t whose rows start pitch_bytes apart (same shape and values)."""
    from kernels.pitched import aligned_rows

    out = aligned_rows(*t.shape, like=t, pitch_bytes=pitch_bytes)
    out.copy_(t)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="+", default=SHAPES)
    parser.add_argument("--copies-only", action="store_true", help="time the copies, not the matmuls")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "pad_pitch.csv"))
    args = parser.parse_args(argv)

    import triton

    from kernels import MatmulConfig, check_accuracy, reference_matmul
    from kernels.persistent_tma import launch_into
    from kernels.pitched import pitched_copy

    def bench(fn):
        return triton.testing.do_bench(fn, return_mode="median")

    def graph(fn):
        return triton.testing.do_bench_cudagraph(fn, return_mode="median")

    configs = [
        MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
        MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=4),
    ]
    rows = []
    for shape in args.shapes:
        m, n, k = (int(x) for x in shape.split("x"))
        a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
        b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
        ref = reference_matmul(a, b)
        cublas = bench(lambda: a @ b)  # noqa: B023
        for cfg in [] if args.copies_only else configs:
            for pitch in (16, 128):
                ap, bp = pitched(a, pitch), pitched(b, pitch)
                c = pitched(torch.empty((m, n), device="cuda", dtype=a.dtype), pitch)
                ok = check_accuracy(launch_into(ap, bp, c, cfg), ref, a.dtype, k).ok
                kernel = bench(lambda: launch_into(ap, bp, c, cfg))  # noqa: B023
                kernel_graph = graph(lambda: launch_into(ap, bp, c, cfg))  # noqa: B023
                whole = bench(lambda: launch_into(pitched(a, pitch), pitched(b, pitch), c, cfg))  # noqa: B023
                rows.append([shape, "matmul", cfg.key, pitch, ok, kernel, kernel_graph, whole, cublas])
                print(f"{shape:>16} {cfg.key} {pitch:3d} B ok={ok} kernel {kernel:.4f}"
                      f" graph {kernel_graph:.4f} with copies {whole:.4f}  cublas {cublas:.4f}",
                      flush=True)  # fmt: skip
        for name, t in (("A", a), ("B", b)):
            dest = pitched(t, 128)
            ok = torch.equal(dest, t)
            gigabytes = 2 * t.numel() * t.element_size() / 1e9  # read and written
            for what, fn in (
                (f"pitched_copy {name} into 128 B rows", lambda: pitched_copy(t)),  # noqa: B023
                (f"copy_ {name} into 128 B rows", lambda: dest.copy_(t)),  # noqa: B023
                (f"clone {name}", lambda: t.clone()),  # noqa: B023
            ):
                ms = graph(fn)
                rows.append([shape, what, "", 128, ok, "", ms, "", ""])
                print(f"{shape:>16} {what}: {ms:.4f} ms ({gigabytes / ms:.2f} TB/s)", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "shape",
                "what",
                "config",
                "pitch_bytes",
                "ok",
                "do_bench_ms",
                "graph_ms",
                "with_copies_ms",
                "cublas_ms",
            ]
        )
        writer.writerows(rows)


if __name__ == "__main__":
    main()
