"""Must a config at the power limit settle before it is measured? Repeatability and cost, by policy.

    python benchmarks/limit_window.py [--rounds 6]      # writes $OUT/limit_window.csv; ~4 minutes on an H200

Grouped bf16 (128x256x64 tiles, and 128x128 at 8192x8192x4096; 8 warps, 3 stages), group_m 1 and
8, at the sizes where the grouping preset and benchmarks/fidelity.py sit at the power limit. Policies,
alternating round by round in one process (no Ray), each round timing a shape's configs under
every one: the farm's steady regime (farm.timing.time_steady) settled until NVML's mean clock stops
moving, and unsettled (a 20 ms first sub-block, then the measured block of 100 or 300 ms); and
triton.testing.do_bench (warm-up 25 ms; rep 100 ms as tools/serial_loop.py runs it, and 300 ms as
benchmarks/fidelity.py's reference). What repeats across rounds is what two sweeps would repeat: the
table gives, per policy, the median over configs of the time's spread across rounds (sd / mean),
the gain's (group_m 1 over 8) spread and range, the energy's, and the seconds each config took;
above it each gain's median and rounds.

Writes $OUT/limit_window.csv (kept as docs/results/limit_window.csv): one row per policy, shape,
config and round. On an H200 (6 rounds) unsettled 300 ms blocks repeated best: 0.99% a time, 0.017 a
gain, 0.51 s a config, against 1.14%, 0.022 and 1.87 s settled; so the farm does not settle.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import triton

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.fidelity import host_seconds
from farm import measure
from farm.clock import CudaClock
from farm.gpu import Gpu
from farm.timing import TimingPolicy, time_steady
from farm.timing.request import TimingRequest
from kernels import MatmulConfig, get_variant

# (m, n, k, block_n of the configs timed there)
SHAPES = (
    (8192, 8192, 4096, (128, 256)),
    (8192, 8192, 8192, (256,)),
    (12288, 12288, 12288, (256,)),
    (16384, 16384, 16384, (256,)),
)
GROUPS = (1, 8)
BASE = TimingPolicy(max_settle_s=1.5)
POLICIES = {
    # settling until NVML's mean clock stops moving (the farm's default before this study)
    "settled_300ms": BASE,
    # do_bench's own shape: a first sub-block (20 ms, its warm-up) and a measured block (the default)
    "unsettled_100ms": BASE.model_copy(update={"max_settle_s": 0.02, "limit_block_s": 0.1}),
    "unsettled_300ms": BASE.model_copy(update={"max_settle_s": 0.02}),
}
NAMES = [*POLICIES, *(f"do_bench_{rep}" for rep in (100, 300))]


@dataclass
class Row:
    policy: str
    m: int
    n: int
    k: int
    block_n: int
    group_m: int
    round: int
    ms: float
    reps: int
    mhz: float | None
    watts: float | None
    joules: float | None
    seconds: float


def rel_sd(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.fmean(xs) if len(xs) > 1 else float("nan")


def do_bench_ms(f, rep: int) -> float:
    return triton.testing.do_bench(f, warmup=25, rep=rep, return_mode="median")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "limit_window.csv"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    gpu = Gpu("cuda")
    clock = CudaClock(gpu.device, gpu.limits.l2_bytes, meter=gpu)
    rng = random.Random(0)
    launcher = get_variant("grouped").launch
    measure.warm_up(gpu.device, 2.0)
    rows: list[Row] = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for m, n, k, block_ns in SHAPES:
        cfgs = [
            (bn, g, MatmulConfig(128, bn, 64, group_m=g, num_warps=8, num_stages=3))
            for bn in block_ns
            for g in GROUPS
        ]
        a, b = measure.make_inputs(m, n, k, torch.bfloat16, gpu.device, seed=m + n + k)
        launches = [lambda c=c, a=a, b=b: launcher(a, b, c) for _, _, c in cfgs]
        host_s = [host_seconds(f) for f in launches]  # after a compiling call
        for r in range(args.rounds):
            for name in rng.sample(NAMES, len(NAMES)):
                t0 = time.perf_counter()
                if name.startswith("do_bench"):
                    order = rng.sample(range(len(cfgs)), len(cfgs))
                    got = {i: do_bench_ms(launches[i], int(name.rsplit("_", 1)[1])) for i in order}
                    each = (time.perf_counter() - t0) / len(cfgs)
                    for i, (bn, g, _) in enumerate(cfgs):
                        rows.append(Row(name, m, n, k, bn, g, r, got[i], 0, None, None, None, each))
                    continue
                timings = time_steady(TimingRequest(launches, host_s, clock, POLICIES[name], rng))
                each = (time.perf_counter() - t0) / len(cfgs)
                for (bn, g, _), t in zip(cfgs, timings, strict=True):
                    rows.append(
                        Row(
                            name,
                            m,
                            n,
                            k,
                            bn,
                            g,
                            r,
                            t.ms,
                            t.reps,
                            t.state.sm_clock_mhz,
                            t.avg_watts,
                            t.joules_per_launch,
                            each,
                        )
                    )
            print(f"{m}x{n}x{k} round {r}: {time.perf_counter() - start:.0f} s", flush=True)
        with out.open("w", newline="") as fh:  # after every shape: a cut-off run keeps what it did
            writer = csv.DictWriter(fh, fieldnames=[f.name for f in fields(Row)])
            writer.writeheader()
            writer.writerows(asdict(x) for x in rows)
    summarize(rows)


def summarize(rows: list[Row]) -> None:
    table = [
        f"\n{'policy':<16}{'time sd':>9}{'gain sd':>9}{'gain range':>11}{'energy sd':>10}"
        f"{'s/config':>9}{'reps':>6}"
    ]
    for name in NAMES:
        mine = [x for x in rows if x.policy == name]
        by_cfg: dict[tuple, list[Row]] = {}
        for x in mine:
            by_cfg.setdefault((x.m, x.n, x.k, x.block_n, x.group_m), []).append(x)
        time_sd = statistics.median(rel_sd([x.ms for x in xs]) for xs in by_cfg.values())
        energy = [rel_sd([x.joules for x in xs]) for xs in by_cfg.values() if all(x.joules for x in xs)]
        gain_sd, gain_range = [], []
        for (m, n, k, bn, g), xs in by_cfg.items():
            if g != 1:
                continue
            other = {x.round: x.ms for x in by_cfg[(m, n, k, bn, 8)]}
            gains = [x.ms / other[x.round] for x in xs]
            gain_sd.append(statistics.stdev(gains))
            gain_range.append(max(gains) - min(gains))
            print(
                f"  {name:<16} {m}x{n}x{k} bn{bn}: median {statistics.median(gains):.3f}, "
                + " ".join(f"{v:.3f}" for v in gains)
            )
        table.append(
            f"{name:<16}{time_sd:>8.2%}{statistics.median(gain_sd):>9.4f}{statistics.median(gain_range):>11.4f}"
            f"{(statistics.median(energy) if energy else float('nan')):>10.2%}"
            f"{statistics.median(x.seconds for x in mine):>9.2f}"
            f"{statistics.median(x.reps for x in mine):>6.0f}"
        )
    print("\n".join(table))


if __name__ == "__main__":
    main()
