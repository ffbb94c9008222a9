"""NVML's energy counter on this GPU: how often it moves, and which way of reading it repeats over
a block of about 300 ms of one steady load (issue #13's energy bar: within 3% between two sweeps).

    python benchmarks/energy_probe.py --out $OUT/energy_probe.csv

Two loads alternate block by block (an 8192^3 bf16 matmul, at the power limit, and a 1 GiB
device copy), 12 blocks each. Per block, the average watts four ways:
- ends: the counter read before the block is queued and after it finishes, over that host time
  (farm.clock's block reading before the poller; a metered span of the interleaved regime's still);
- updates: between the first and the last update of the counter seen while polling inside the
  block, over the time between them (whole updates only; farm.energy.EnergyUpdates, which the
  farm feeds from a thread polling from before the block is queued);
- instant: the mean of NVML_FI_DEV_POWER_INSTANT polled inside the block;
- usage: the mean of nvmlDeviceGetPowerUsage polled inside the block.
Printed per load and way: mean watts, the spread over blocks (coefficient of variation, %), and the
counter's update period and a read's cost. A steady load's power is steady, so the way with the
smallest spread is the one whose error is smallest.

Writes --out (kept as docs/results/energy_probe.csv): one row per block. Time: 24 blocks of about
0.3 s after the CUDA start-up and one compile, well under a minute on an H200.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

import pynvml
import torch

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from farm.energy import EnergyUpdates

BLOCK_S = 0.3
BLOCKS = 12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "energy_probe.csv"))
    args = parser.parse_args()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    dev = torch.device("cuda")

    def matmul(n: int):
        a, b = (torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(2))
        return lambda: torch.matmul(a, b)

    src, dst = (torch.empty(2**30, dtype=torch.uint8, device=dev) for _ in range(2))
    loads = {"matmul 8192^3": matmul(8192), "copy 1 GiB": lambda: dst.copy_(src)}
    per_launch = {}
    for name, fn in loads.items():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        per_launch[name] = (time.perf_counter() - t) / 50

    def instant_w() -> float | None:
        (value,) = pynvml.nvmlDeviceGetFieldValues(handle, [pynvml.NVML_FI_DEV_POWER_INSTANT])
        return value.value.uiVal / 1e3 if value.nvmlReturn == 0 else None

    rows, update_s, costs = [], [], {"energy": [], "instant": [], "usage": []}
    for i in range(2 * BLOCKS):
        name = list(loads)[i % 2]
        fn, n = loads[name], max(1, round(BLOCK_S / per_launch[name]))
        done = torch.cuda.Event()
        e0, t0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle), time.perf_counter()
        for _ in range(n):
            fn()
        done.record()
        updates, inst, usage = EnergyUpdates(), [], []
        while not done.query():
            s = time.perf_counter()
            e = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            s2 = time.perf_counter()
            w = instant_w()
            s3 = time.perf_counter()
            u = pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3
            s4 = time.perf_counter()
            costs["energy"].append(s2 - s)
            costs["instant"].append(s3 - s2)
            costs["usage"].append(s4 - s3)
            updates.see(s2, e)
            if w is not None:
                inst.append(w)
            usage.append(u)
        torch.cuda.synchronize()
        e1, t1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle), time.perf_counter()
        seen = updates.updates
        update_s += [b[0] - a[0] for a, b in itertools.pairwise(seen)]
        reading = updates.reading()
        row = {
            "block": i,
            "load": name,
            "launches": n,
            "seconds": t1 - t0,
            "ends_w": (e1 - e0) / 1e3 / (t1 - t0),
            "updates_w": reading[0] / reading[1] if reading else None,
            "updates": len(seen),
            "instant_w": statistics.fmean(inst) if inst else None,
            "usage_w": statistics.fmean(usage) if usage else None,
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        }
        rows.append(row)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"power limit {pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1e3:.0f} W")
    if update_s:
        print(
            f"counter update period: median {1e3 * statistics.median(update_s):.1f} ms"
            f" (min {1e3 * min(update_s):.1f}, max {1e3 * max(update_s):.1f}, {len(update_s)} intervals)"
        )
    cost = ", ".join(f"{k} {1e3 * statistics.median(v):.2f}" for k, v in costs.items() if v)
    print(f"read cost, median ms: {cost}")
    print(f"{'load':<30}{'way':<9}{'mean W':>8}{'cv %':>7}{'min W':>8}{'max W':>8}")
    for name in loads:
        mine = [r for r in rows if r["load"] == name][1:]  # the first block of each load ramps up
        for way in ("ends_w", "updates_w", "instant_w", "usage_w"):
            xs = [r[way] for r in mine if r[way] is not None]
            if len(xs) >= 2:
                mean = statistics.fmean(xs)
                print(
                    f"{name:<30}{way[:-2]:<9}{mean:8.1f}{100 * statistics.stdev(xs) / mean:7.2f}"
                    f"{min(xs):8.1f}{max(xs):8.1f}"
                )
    print(f"-> {out}")


if __name__ == "__main__":
    main()
