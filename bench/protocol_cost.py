"""Where the steady regime's time goes: one batch of each preset's kind, timed as a worker would,
with the clock's blocks counted and timed (settling sub-blocks, profiled blocks, profiler sessions).

    python bench/protocol_cost.py            # about a minute on an H200; a table per batch
    python -m cProfile -s tottime bench/protocol_cost.py --regime interleaved   # where host time goes

Visit 14 (docs/perf-notes.md): the grouping preset ran at 61 points/min on 2 GPUs and the splitk
preset did not finish in 400 s on one; this says which part of the protocol costs what.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time
from collections import defaultdict

import torch

from farm import measure
from farm.clock import CudaClock, head_start_us
from farm.gpu import Gpu
from farm.timing import TimingPolicy, time_points
from kernels import MatmulConfig, get_variant

BATCHES = {
    # (variant, m, n, k): configs
    ("splitk", 512, 512, 8192): [
        MatmulConfig(bm, 128, 64, 1, sk, w, 3) for bm in (64, 128) for sk in (2, 4, 8, 16) for w in (4, 8)
    ],
    ("grouped", 8192, 8192, 4096): [
        MatmulConfig(128, bn, 64, g, 1, 8, 3) for bn in (128, 256) for g in (1, 8)
    ],
    # bench/streamk.yaml's kind: 48 short kernels (0.1 ms) in one batch
    ("splitk_det", 512, 512, 32768): [
        MatmulConfig(bm, bn, 64, 1, sk, w, 3)
        for bm in (64, 128)
        for bn in (64, 128, 256)
        for sk in (2, 4, 8, 16)
        for w in (4, 8)
    ],
}


class CountingClock:
    """The real clock, with the wall time of its blocks and sessions added up by kind."""

    def __init__(self, clock: CudaClock):
        self.clock, self.seconds, self.count = clock, defaultdict(float), defaultdict(int)

    def __getattr__(self, name):  # power_limited, flush_ms, ...: the real clock's
        return getattr(self.clock, name)

    def run(self, launches, host_s, *, profile, gpu_s=0.0):
        start = time.perf_counter()
        block = self.clock.run(launches, host_s, profile=profile, gpu_s=gpu_s)
        kind = "measured block" if profile else "settling sub-block"
        wall = time.perf_counter() - start
        self.seconds[kind] += wall
        self.count[kind] += 1
        self.count[kind + " launches"] += len(launches)
        # where a block's wall time goes: the launch loop's host time (as the block measured it,
        # profiler on) against the GPU's stream time and the head start the host was given
        self.seconds[kind + ": host in launch loop"] += sum(block.host_ms) / 1e3
        self.seconds[kind + ": stream time"] += sum(block.stream_ms) / 1e3
        self.seconds[kind + ": head start (sleep)"] += head_start_us(host_s, 1.0, gpu_s) / 1e6
        self.seconds[kind + ": host_s given"] += sum(host_s)
        return block

    @contextlib.contextmanager
    def profiled(self):
        """The real session; its end (the profiler's stop and the events' parsing) timed."""
        try:
            with self.clock.profiled():
                try:
                    yield
                finally:
                    end = time.perf_counter()  # the session's end starts here
        finally:
            self.seconds["profiler session end (parse)"] += time.perf_counter() - end
            self.count["profiler session end (parse)"] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regime", choices=("steady", "interleaved", "rest"), default="steady")
    args = parser.parse_args()
    gpu = Gpu("cuda")
    clock = CudaClock(gpu.device, gpu.limits.l2_bytes, meter=gpu)
    measure.warm_up(gpu.device, 2.0)
    policy = TimingPolicy(regime=args.regime)
    for (variant, m, n, k), configs in BATCHES.items():
        a = torch.randn(m, k, device=gpu.device, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=gpu.device, dtype=torch.bfloat16)
        launch = get_variant(variant).launch
        launches = [lambda cfg=cfg, f=launch, a=a, b=b: f(a, b, cfg) for cfg in configs]
        host_s = []
        for f in launches:
            f()
            torch.cuda.synchronize()
            t = time.perf_counter()
            f()
            host_s.append(time.perf_counter() - t)
            torch.cuda.synchronize()
        counting = CountingClock(clock)
        start = time.perf_counter()
        timings = time_points(launches, host_s, counting, policy, random.Random(0))
        wall = time.perf_counter() - start
        print(
            f"\n{variant} {m}x{n}x{k}: {len(configs)} configs in {wall:.2f} s "
            f"({wall / len(configs):.3f} s each)"
        )
        for kind in sorted(set(counting.count) | set(counting.seconds)):
            count, secs = counting.count.get(kind), counting.seconds.get(kind)
            print(
                f"  {kind:40s} {'' if count is None else count:>6}"
                + (f"  {secs:7.2f} s" if secs is not None else "")
            )
        print(
            f"  reps median {statistics.median(t.reps for t in timings)}, ms median "
            f"{statistics.median(t.ms for t in timings):.4f}, "
            f"MHz {[t.state.sm_clock_mhz for t in timings][:4]}"
        )


if __name__ == "__main__":
    main()
