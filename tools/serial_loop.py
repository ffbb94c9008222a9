"""The baseline the farm must beat: a plain serial loop over the same points as a preset.

    python tools/serial_loop.py --preset splitk --db serial.db [--limit-s 140]
    python tools/serial_loop.py --spec benchmarks/throughput.yaml --db serial.db --every 6   # a sample
    python tools/compare_runs.py farm.db serial.db          # times and grouping gains, point by point
    python tools/compare_runs.py serial-1.db serial-2.db    # do_bench's own repeatability

For each point, one after another: compile (the first launch), then `triton.testing.do_bench`'s
median (25 ms warm-up, 100 ms of repetitions, L2 flushed). No accuracy check, no interleaving: what
a person would write first. `--every N` times every Nth point of the plan, a sample across its
shapes and variants whose rate stands for the whole plan (the first points alone are one shape's:
kernels of one length, compiles of a few variants). Each point becomes a row of a results database
(timing_regime "do_bench", the GPU state read after it), so tools/compare_runs.py and the views read
it as they read a sweep's. Prints points per minute, and the time all points of the plan would take.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton

from db.records import Backend
from farm.gpu import Gpu
from farm.metrics import derived
from farm.plan import code_versions, expand
from farm.spec import load_spec, spec_as_dict
from kernels import DTYPES, get_variant
from tools.sample_db import Batch, build

REGIME = "do_bench"


def time_point(fn) -> float:
    """do_bench's median in ms: 25 ms of warm-up, 100 ms of repetitions, L2 flushed between them."""
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def measured(p, ms: float, gpu: Gpu):
    """The point's row as a sweep would store it, with the GPU's state read just after its timing."""
    state = gpu.state()
    return p.record(
        "ok",
        ms=ms,
        timing_regime=REGIME,
        backend=gpu.backend,
        gpu_uuid=gpu.uuid,
        worker="serial_loop",
        sm_clock_mhz=state.sm_clock_mhz,
        temperature_c=state.temperature_c,
        throttled=state.throttled if state.sm_clock_mhz is not None else None,
        throttle_reasons=state.reasons,
        **derived(p.m, p.n, p.k, p.dtype, p.config, gpu.limits, None, ms),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset")
    source.add_argument("--spec", help="a spec file")
    parser.add_argument("--db", required=True, help="the results database to write (a new file)")
    parser.add_argument("--limit-s", type=float, default=1e9, help="stop after this many seconds")
    parser.add_argument("--every", type=int, default=1, help="time every Nth point of the plan only")
    args = parser.parse_args(argv)
    if args.every < 1:
        parser.error(f"--every {args.every}: must be 1 or more (every Nth point of the plan)")
    spec = load_spec(preset=args.preset, path=args.spec)
    planned, _ = expand(spec)
    points = planned[:: args.every]
    versions = code_versions(spec.variants)
    gpu = Gpu(Backend.CUDA if torch.cuda.is_available() else Backend.INTERPRETER)
    inputs: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
    records = []
    start = time.perf_counter()
    for p in points:
        if time.perf_counter() - start > args.limit_s:
            break
        key = (p.dtype, p.m, p.n, p.k)
        if key not in inputs:
            inputs.clear()
            gen = torch.Generator(device=gpu.device).manual_seed(0)
            inputs[key] = tuple(
                torch.randn(size, generator=gen, device=gpu.device).to(DTYPES[p.dtype])
                for size in ((p.m, p.k), (p.k, p.n))
            )
        a, b = inputs[key]
        launch = get_variant(p.variant).launch
        try:
            launch(a, b, p.config)  # compile
            ms = time_point(lambda: launch(a, b, p.config))  # noqa: B023
        except Exception as exc:
            records.append(p.record("launch_error", error=f"{type(exc).__name__}: {exc}"[:500]))
        else:
            records.append(measured(p, ms, gpu))
        records[-1].code_version = versions[p.variant]
    seconds = time.perf_counter() - start
    # The spec as a sweep stores it, its timing replaced by this loop's own (the Sweeps page shows it)
    stored = spec_as_dict(spec) | {"timing": {"regime": REGIME, "warmup_ms": 25, "rep_ms": 100}}
    build(args.db, [Batch(gpu.environment(), records, sweep=f"serial loop ({spec.name})", spec=stored)])
    timed = sum(r.status == "ok" for r in records)
    print(
        f"serial loop over {spec.name}: {timed} of {len(records)} points timed in {seconds:.0f} s = "
        f"{timed / seconds * 60:.0f} points/min -> {args.db}; at that rate all {len(planned)} points of the"
        f" plan take {len(planned) * seconds / max(len(records), 1):.0f} s"
    )


if __name__ == "__main__":
    main()
