"""Does the power limiter decide the grouping gain? The same two configs timed in several regimes.

    python bench/power_probe.py            # writes $OUT/power_probe.csv and power_probe_blocks.csv

Grouped kernel, bf16, 128x256x64 tiles, 8 warps, 3 stages, group_m 1 against group_m 8, at
n = 8192, 12288, 16384 (n^3). gain = time(group_m 1) / time(group_m 8). Regimes:
- interleaved: single launches alternating between the configs (the farm's old protocol,
  farm.timing.time_interleaved: one power-limiter state shared by both);
- block_<L>ms: blocks of back-to-back launches filling L ms (10, 30, 100, 300, 1000), the configs
  alternating block by block, 3 rounds; a block's time is the median of its last half;
- rest: single launches, each after 1 s of idle GPU (farm.timing.time_rested);
- do_bench: triton.testing.do_bench, rep 300 ms, alternating, 3 rounds;
- steady: the farm's protocol now (farm.timing.time_steady).
Around every block and do_bench call: NVML's energy counter (average watts), the SM clock and the
throttle reasons sampled every 5 ms by a thread. About 2.5 minutes on an H200; the table comes last.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import statistics
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import triton

from farm import measure
from farm.clock import CudaClock, max_block_launches
from farm.gpu import THROTTLE_NAMES, Gpu
from farm.timing import TimingPolicy, time_interleaved, time_rested, time_steady
from kernels import MatmulConfig, get_variant

SIZES = (8192, 12288, 16384)
GROUPS = (1, 8)
BLOCK_MS = (10, 30, 100, 300, 1000)
ROUNDS = 3
SAMPLE_S = 0.005


def config(group_m: int) -> MatmulConfig:
    return MatmulConfig(128, 256, 64, group_m=group_m, num_warps=8, num_stages=3)


class Sampler:
    """NVML while a block runs: energy counter at both ends, SM clock and throttle reasons every 5 ms."""

    def __init__(self, gpu: Gpu):
        self.gpu = gpu

    def __enter__(self) -> Sampler:
        self.clocks: list[int] = []
        self.mask = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.energy0, self.t0 = self.gpu.energy_mj(), time.perf_counter()
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            state = self.gpu.state()
            if state.sm_clock_mhz is not None:
                self.clocks.append(state.sm_clock_mhz)
            self.mask |= state.throttle_mask
            time.sleep(SAMPLE_S)

    def __exit__(self, *exc) -> None:
        torch.cuda.synchronize()
        self.seconds = time.perf_counter() - self.t0
        energy1 = self.gpu.energy_mj()
        self._stop.set()
        self._thread.join()
        ok = self.energy0 is not None and energy1 is not None
        self.joules = (energy1 - self.energy0) / 1e3 if ok else None

    @property
    def watts(self) -> float | None:
        return self.joules / self.seconds if self.joules is not None else None

    @property
    def mhz(self) -> float | None:
        return statistics.fmean(self.clocks) if self.clocks else None

    @property
    def reasons(self) -> str:
        return ",".join(name for bit, name in THROTTLE_NAMES.items() if self.mask & bit)


@dataclass
class Row:
    regime: str
    n: int
    group_m: int
    round: int
    ms: float
    launches: int
    seconds: float
    mhz: float | None
    watts: float | None
    joules: float | None
    throttle: str


def back_to_back(clock: CudaClock, launch, host_s: float, seconds: float, launch_s: float):
    """Launches filling `seconds`, in as few clock blocks as the head start allows; per-launch times."""
    want = max(1, round(seconds / launch_s))
    cap = max_block_launches(host_s, 1.0, launch_s)
    times = []
    while want > 0:
        n = min(want, cap)
        times += clock.run([launch] * n, [host_s] * n, profile=False, gpu_s=launch_s).stream_ms
        want -= n
    return times


def probe_size(n: int, gpu: Gpu, clock: CudaClock, rows: list[Row]) -> None:
    device = gpu.device
    a, b = measure.make_inputs(n, n, n, torch.bfloat16, device, seed=n)
    launcher = get_variant("grouped").launch
    launches = {g: (lambda g=g, a=a, b=b: launcher(a, b, config(g))) for g in GROUPS}
    for launch in launches.values():
        launch()  # compile
    torch.cuda.synchronize()
    host_s = {}
    for g, launch in launches.items():
        t0 = time.perf_counter()
        launch()
        host_s[g] = time.perf_counter() - t0
    torch.cuda.synchronize()
    # GPU seconds per launch, the flush included
    launch_s = {
        g: (
            statistics.median(clock.run([launches[g]] * 3, [host_s[g]] * 3, profile=False).stream_ms)
            + clock.flush_ms
        )
        / 1e3
        for g in GROUPS
    }

    def record(regime, g, r, ms, launches_n, s: Sampler):
        rows.append(Row(regime, n, g, r, ms, launches_n, s.seconds, s.mhz, s.watts, s.joules, s.reasons))

    # interleaved single launches, 30 each, in random order per round (the old farm protocol)
    policy = TimingPolicy(min_reps=30, max_reps=30, regime="interleaved")
    with Sampler(gpu) as s:
        got = time_interleaved(
            [launches[g] for g in GROUPS], [host_s[g] for g in GROUPS], clock, policy, random.Random(n)
        )
    for g, t in zip(GROUPS, got):
        record("interleaved", g, 0, t.ms, t.reps, s)

    for block_ms in BLOCK_MS:
        for r in range(ROUNDS):
            for g in GROUPS:
                with Sampler(gpu) as s:
                    times = back_to_back(clock, launches[g], host_s[g], block_ms / 1e3, launch_s[g])
                tail = times[len(times) // 2 :]
                record(f"block_{block_ms}ms", g, r, statistics.median(tail), len(times), s)

    policy = TimingPolicy(min_reps=3, max_reps=3, regime="rest", rest_s=1.0)
    for r, g in enumerate(
        GROUPS
    ):  # time_rested alternates itself; one call per config keeps the samplers apart
        with Sampler(gpu) as s:
            (t,) = time_rested([launches[g]], [host_s[g]], clock, policy, random.Random(r))
        record("rest", g, 0, t.ms, t.reps, s)

    for r in range(ROUNDS):
        for g in GROUPS:
            with Sampler(gpu) as s:
                ms = triton.testing.do_bench(launches[g], warmup=25, rep=300, return_mode="median")
            record("do_bench", g, r, ms, 0, s)

    policy = TimingPolicy()
    with Sampler(gpu) as s:
        got = time_steady(
            [launches[g] for g in GROUPS], [host_s[g] for g in GROUPS], clock, policy, random.Random(n)
        )
    for g, t in zip(GROUPS, got):
        rows.append(
            Row(
                "steady",
                n,
                g,
                0,
                t.ms,
                t.reps,
                s.seconds,
                t.state.sm_clock_mhz,
                t.avg_watts,
                None,
                t.state.reasons,
            )
        )


def summary(rows: list[Row]) -> list[dict]:
    out = []
    keys = dict.fromkeys((r.regime, r.n) for r in rows)
    for regime, n in keys:
        per = {g: [r for r in rows if (r.regime, r.n, r.group_m) == (regime, n, g)] for g in GROUPS}
        ms = {g: statistics.median(r.ms for r in per[g]) for g in GROUPS}
        gains = [r1.ms / r8.ms for r1, r8 in zip(per[1], per[8])]

        def mean(xs):
            xs = [x for x in xs if x is not None]
            return statistics.fmean(xs) if xs else None

        out.append(
            dict(
                regime=regime,
                n=n,
                gain=ms[1] / ms[8],
                gain_lo=min(gains),
                gain_hi=max(gains),
                ms_g1=ms[1],
                ms_g8=ms[8],
                mhz_g1=mean(r.mhz for r in per[1]),
                mhz_g8=mean(r.mhz for r in per[8]),
                watts_g1=mean(r.watts for r in per[1]),
                watts_g8=mean(r.watts for r in per[8]),
                throttle=",".join(sorted({t for r in per[1] + per[8] for t in r.throttle.split(",") if t})),
            )
        )
    return out


def write_csv(path: Path, dicts: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(dicts[0]))
        writer.writeheader()
        writer.writerows(dicts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for the CSV files")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = Gpu("cuda")
    clock = CudaClock(gpu.device, gpu.limits.l2_bytes, meter=gpu)
    print(
        f"{gpu.name}: power limit {gpu.power_limit_w()} W, max SM clock {gpu.max_sm_clock()} MHz", flush=True
    )
    measure.warm_up(gpu.device, 2.0)
    rows: list[Row] = []
    start = time.perf_counter()
    for n in args.sizes:
        probe_size(n, gpu, clock, rows)
        print(f"n={n} done at {time.perf_counter() - start:.0f} s", flush=True)
    write_csv(out / "power_probe_blocks.csv", [asdict(r) for r in rows])
    table = summary(rows)
    write_csv(out / "power_probe.csv", table)

    def f(x, spec):
        return "-" if x is None else format(x, spec)

    print(
        f"\n{'regime':<14}{'n':>6}{'gain':>7}{'lo-hi':>12}{'ms g1':>9}{'ms g8':>9}"
        f"{'MHz g1/g8':>12}{'W g1/g8':>10}"
    )
    for t in table:
        print(
            f"{t['regime']:<14}{t['n']:>6}{t['gain']:>7.3f}{t['gain_lo']:>6.2f}-{t['gain_hi']:<5.2f}"
            f"{t['ms_g1']:>9.3f}{t['ms_g8']:>9.3f}{f(t['mhz_g1'], '.0f'):>6}/{f(t['mhz_g8'], '<5.0f')}"
            f"{f(t['watts_g1'], '.0f'):>5}/{f(t['watts_g8'], '.0f')}  {t['throttle']}"
        )


if __name__ == "__main__":
    main()
