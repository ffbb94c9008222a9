"""Our kernels against cuBLAS's under Nsight Compute: time, tensor pipes busy, L2 bytes and throughput.

    python bench/probes/ncu_compare.py --out $OUT/ncu_compare.csv     # H200, about a minute

Why: a second reading of each kernel's time, by another method (ncu's `gpu__time_duration`, caches
flushed before every kernel), beside the CUDA graphs' (bench/gpu_methods.py), and the counters that say
why a kernel trails. Visit 124 read so: at 3000x5000x1000 `persistent_tma` 64.4-65.6 us with its tensor
pipes busy 64% of its active cycles and 440 MB through L2 (75% of its throughput), cuBLAS's 128x232
tiles in 2x1 clusters 49.4-50.1 us, 75% busy, 360 MB; at 3072^3 `persistent_tma_bands`' tail band 32%
busy against its main band's 90%. Each case runs under its own `ncu --csv --clock-control none` (a child
process of this script with `--case`): the GPU at its own clocks, as in every other measure here; ncu's
default locks the SM clock near base (1.28 GHz), where L2 is relatively faster and the 3000x5000x1000
ratio read 0.86, not 0.76 (visit 122). The child checks the result against fp64 first, then launches
ours and torch.matmul `--launches` times each between cudaProfilerStart and Stop (ncu profiles only
those). A row per kernel name: the median of each metric over its launches.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from bench.probes import probe_parser
from kernels.config import MatmulConfig

BIG = MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)
SKINNY = MatmulConfig(128, 128, 128, split_k=16, num_warps=4, num_stages=4)
# (variant, (m, n, k), dtype, config): the misses of issue #12 as visit 124 profiled them
CASES = [
    ("persistent_tma", (3000, 5000, 1000), "bfloat16", BIG.replace(num_stages=4)),
    ("persistent_tma_bands", (3072, 3072, 3072), "bfloat16", BIG),
    (
        "splitk_tma_cluster",
        (256, 256, 65536),
        "float16",
        MatmulConfig(128, 128, 128, split_k=16, num_stages=4),
    ),
    ("splitk_tma_cluster", (512, 512, 32768), "bfloat16", BIG.replace(group_m=1, split_k=8, num_stages=6)),
]

METRICS = {  # column -> ncu metric
    "us": "gpu__time_duration.sum",
    "sm_ghz": "sm__cycles_elapsed.avg.per_second",
    "tensor_busy_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "l2_mb": "lts__t_bytes.sum",
    "l2_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "smem_kb": "launch__shared_mem_per_block_dynamic",
    "cluster": "launch__cluster_dim_x",
}
# ncu reports each metric in a unit of its choosing ("us" or "ms", "Mbyte" or "Gbyte", "Kbyte/block"):
# each column's value is brought to its own (us, GHz, MB, KB); an unknown unit is an error, not a guess.
TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
BYTES = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}
HERTZ = {"hz": 1.0, "Khz": 1e3, "Mhz": 1e6, "Ghz": 1e9}
COLUMN_UNITS = {"us": (TO_US, 1.0), "l2_mb": (BYTES, 1e6), "smem_kb": (BYTES, 1e3), "sm_ghz": (HERTZ, 1e9)}


def metric_value(column: str, unit: str, text: str) -> float:
    """A metric's value in its column's unit, thousands separators dropped; percents and counts as given."""
    value = float(text.replace(",", ""))
    if column not in COLUMN_UNITS:
        return value
    factors, per = COLUMN_UNITS[column]
    base = unit.split("/")[0]  # "Kbyte/block"
    if base not in factors:
        raise ValueError(f"{column}: unit {unit!r} is none of {sorted(factors)}")
    return value * factors[base] / per


def parse_ncu_csv(text: str) -> list[dict]:
    """ncu's --csv output, a line per (launch, metric), as launches in order: {"kernel": name, column: value}.
    Lines before the header (ncu's ==PROF== messages, the program's own output) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu CSV header in the output")
    columns = {metric: column for column, metric in METRICS.items()}
    launches: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        column = columns.get(row.get("Metric Name", ""))
        if column is None:
            continue
        launch = launches.setdefault(row["ID"], {"kernel": row["Kernel Name"]})
        launch[column] = metric_value(column, row["Metric Unit"], row["Metric Value"])
    return list(launches.values())


def summarize(launches: list[dict]) -> list[dict]:
    """A row per kernel name, in the order the kernels first ran: how many launches, each metric's median."""
    by_kernel: dict[str, list[dict]] = {}
    for launch in launches:
        by_kernel.setdefault(launch["kernel"], []).append(launch)
    rows = []
    for kernel, mine in by_kernel.items():
        row = {"kernel": kernel, "launches": len(mine)}
        for column in METRICS:
            values = [launch[column] for launch in mine if column in launch]
            row[column] = statistics.median(values) if values else float("nan")
        rows.append(row)
    return rows


def run_case(index: int, launches: int) -> None:
    """The child: case `index` checked against fp64, then ours and torch.matmul between profiler marks."""
    import torch

    from kernels import check_accuracy, get_variant, reference_matmul

    variant, (m, n, k), dtype_name, cfg = CASES[index]
    dtype = getattr(torch, dtype_name)
    a = torch.randn((m, k), device="cuda", dtype=dtype)
    b = torch.randn((k, n), device="cuda", dtype=dtype)
    launch = get_variant(variant).launch
    if not check_accuracy(launch(a, b, cfg), reference_matmul(a, b), dtype, k).ok:
        sys.exit(f"WRONG {variant} {cfg.key} at {m}x{n}x{k}")
    torch.matmul(a, b)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(launches):
        launch(a, b, cfg)
    for _ in range(launches):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def main(argv: list[str] | None = None) -> None:
    parser = probe_parser(__doc__, "ncu_compare.csv")
    parser.add_argument("--launches", type=int, default=3, help="of ours and of torch.matmul, each case")
    parser.add_argument("--case", type=int, help="(the child under ncu) run this case only")
    args = parser.parse_args(argv)
    if args.case is not None:
        run_case(args.case, args.launches)
        return
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    out = Path(args.out)
    header = ["case", "kernel", "launches", *METRICS]
    rows = []
    for index, (variant, (m, n, k), dtype_name, cfg) in enumerate(CASES):
        case = f"{m}x{n}x{k} {dtype_name} {variant} {cfg.key}"
        command = [
            ncu, "--csv", "--clock-control", "none", "--profile-from-start", "off",
            "--metrics", ",".join(METRICS.values()),
            sys.executable, os.path.abspath(__file__), "--case", str(index), "--launches", str(args.launches),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        out.with_suffix(f".case{index}.txt").write_text(done.stdout + done.stderr)
        if done.returncode:
            print(f"{case}: ncu exited {done.returncode}: {done.stderr[-400:]}", flush=True)
            continue
        for row in summarize(parse_ncu_csv(done.stdout)):
            rows.append({"case": case, **row})
            busy, l2_mb, l2_pct = row["tensor_busy_pct"], row["l2_mb"], row["l2_pct"]
            print(
                f"{case[:40]:40s} {row['kernel'][:44]:44s} {row['us']:7.1f} us  tensor {busy:4.0f}%"
                f"  L2 {l2_mb:6.1f} MB {l2_pct:4.0f}%  SM {row['sm_ghz']:.2f} GHz",
                flush=True,
            )
        with out.open("w", newline="") as f:  # after each case: a run cut short keeps what it had
            writer = csv.DictWriter(f, fieldnames=header)
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
