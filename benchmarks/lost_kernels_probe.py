"""Does the farm's clock lose the GPU work of launches in short profiler sessions, and where?

    python benchmarks/lost_kernels_probe.py --seconds 180 --out $OUT/lost_kernels_probe.csv --dump $OUT/lost

Why: a resumed H100 sweep stored five cuBLAS points at 0.75-1.0 us of kernel time against 19.5-222 us
of stream time (each kept only a memset), and every cuBLAS launch of eight shapes and the grouped
configs of 64x4096x4096 at their stream time, all in its last and smallest batches: sessions whose
profile had lost the launches' kernels. farm.clock now stores no time for such a launch and calls a
session that lost more than 5% the instrument's fault (db.physics.lost_kernels, farm.clock
MAX_LOST_SHARE); this probe is for the cause. The likeliest one (docs/design.md, "Instrument faults"):
CUPTI stamping kernel records earlier and earlier as a long-lived process accumulates GPU idle time,
until Kineto drops them as out of its session's window; so the probe idles the GPU between passes
(--idle-s) and a lost session's position in the run says whether losses grow with the process's age.

It runs farm.clock.CudaClock's own sessions as the interleaved regime's last batches run them (10
rounds of one launch each of a point or a few) for minutes in one process: cuBLAS at the five shapes
and two more, 8 grouped configs at 64x4096x4096, and a session whose rounds follow an unrecorded
settling block (the steady regime's toggle); the second half of the time with a thread compiling
other configs beside it, as the worker compiles its next batch. Per kind of session, one row:
- sessions, launches;
- lost: launches with no GPU activity attributed (farm.cupti.kernel_ms_per_launch), and slivers:
  launches whose activity is under 1/50 of their stream time;
- orphans: GPU activities whose correlation id no host `cu*` call in the profile carries (the
  attribution then falls back on the GPU-side span of the launch's record_function range);
- lost_gpu_span_first: launches lost were the GPU-side span taken first, the host call second;
- min_margin_us: the least distance of an issuing host call inside its launch's host range (a
  negative one: the CPU ranges and CUPTI's clock disagree);
- instrument_errors: sessions farm.clock refused (more than 5% lost).
With --dump, the raw Kineto events (name, correlation and linked correlation ids, start and end ns,
device type, user annotation) of up to 6 sessions that lost a launch, and of one cuBLAS session that
did not, as JSON: what a test of the attribution replays.

Writes --out and its provenance sidecar (tools/provenance.py). GPU only (CUDA, torch.profiler).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

import farm.clock as clock_module
from farm.cupti import LAUNCH_LABEL, Activity, busy_ms, kernel_ms_per_launch
from farm.errors import InstrumentError
from kernels import get_variant
from kernels.config import LIBRARY_CONFIG
from tools.provenance import write_results

COLUMNS = (
    "session", "sessions", "launches", "lost", "slivers", "orphans", "lost_gpu_span_first",
    "min_margin_us", "instrument_errors",
)  # fmt: skip
# the five shapes of the impossible rows, and two whose launches read their stream time
CUBLAS_SHAPES = [
    (4096, 4096, 4096), (8192, 8192, 128), (2048, 8192, 128), (6000, 333, 4100), (1234, 4321, 2345),
    (768, 1024, 16384), (64, 4096, 4096),
]  # fmt: skip
ROUNDS = 10
MAX_DUMPS = 6


class Recorder:
    """farm.clock's `activities`, keeping each session's events and Kineto's raw ones."""

    def __init__(self) -> None:
        self.read = clock_module.activities
        self.events: list[Activity] = []
        self.raw: list[list] = []

    def __call__(self, prof) -> list[Activity]:
        self.events = self.read(prof)
        self.raw = [
            [e.name()[:80], e.correlation_id(), e.linked_correlation_id(), e.start_ns(), e.end_ns(),
             str(e.device_type()), e.is_user_annotation()]
            for e in prof.profiler.kineto_results.events()
        ]  # fmt: skip
        return self.events


def _spans(events: list[Activity], cpu: bool) -> list[tuple[float, float, int]]:
    return sorted(
        (e.start_us, e.end_us, int(e.name[len(LAUNCH_LABEL) :]))
        for e in events
        if e.name.startswith(LAUNCH_LABEL) and e.cpu == cpu
    )


def gpu_span_first(events: list[Activity], n: int) -> list[float | None]:
    """Kernel ms per launch, a GPU activity given to the GPU-side span holding its start first, to the
    host range holding its issuing call second."""
    gpu, host = _spans(events, cpu=False), _spans(events, cpu=True)
    issued = {e.id: e.start_us for e in events if e.cpu and e.name.startswith("cu")}
    intervals: list[list] = [[] for _ in range(n)]
    for e in events:
        if e.cpu or e.annotation or e.name.startswith(LAUNCH_LABEL):
            continue
        i = next((s[2] for s in gpu if s[0] <= e.start_us <= s[1]), None)
        if i is None and e.id in issued:
            i = next((s[2] for s in host if s[0] <= issued[e.id] <= s[1]), None)
        if i is not None and i < n:
            intervals[i].append((e.start_us, e.end_us))
    return [busy_ms(s) if s else None for s in intervals]


def orphans(events: list[Activity]) -> int:
    issued = {e.id for e in events if e.cpu and e.name.startswith("cu")}
    return sum(
        1
        for e in events
        if not e.cpu and not e.annotation and not e.name.startswith(LAUNCH_LABEL) and e.id not in issued
    )


def min_margin_us(events: list[Activity]) -> float:
    """The least distance (us) of a host call that issued GPU work from its launch range's ends."""
    ranges = _spans(events, cpu=True)
    working = {e.id for e in events if not e.cpu and not e.annotation}
    margins = [
        min(call.start_us - start, end - call.end_us)
        for call in events
        if call.cpu and call.name.startswith("cu") and call.id in working
        for start, end, _ in ranges
        if start - 50 <= call.start_us <= end + 50
    ]
    return min(margins, default=float("nan"))


def compile_beside(device: torch.device, stop: threading.Event) -> None:
    """The worker's next batch compiling while this one is timed (farm.compile on a side stream)."""
    from farm.compile import compile_launcher

    a = torch.randn(512, 4096, device=device, dtype=torch.bfloat16)
    b = torch.randn(4096, 2048, device=device, dtype=torch.bfloat16)
    side = torch.cuda.Stream(device)
    for variant in ("tiled", "splitk", "grouped", "persistent_tma"):
        for cfg in get_variant(variant).configs(512, 2048, 4096, "bfloat16"):
            if stop.is_set():
                return
            with torch.cuda.stream(side), contextlib.suppress(Exception):  # a config too large: the next
                compile_launcher(lambda v=variant, c=cfg: get_variant(v).launch(a, b, c))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument(
        "--idle-s", type=float, default=0.5, help="GPU idle after each pass over the kinds (the worker's)"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--dump", type=Path, help="a folder for the raw events of sessions that lost a launch"
    )
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    recorder = Recorder()
    clock_module.activities = recorder  # what CudaClock.profiled reads a closed session with
    clock = clock_module.CudaClock(device, torch.cuda.get_device_properties(device).L2_cache_size)
    cublas, grouped = get_variant("cublas").launch, get_variant("grouped").launch
    kinds = {}
    for m, n, k in CUBLAS_SHAPES:
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
        kinds[f"cublas {m}x{n}x{k}"] = ([lambda a=a, b=b: cublas(a, b, LIBRARY_CONFIG)], False)
    a = torch.randn(64, 4096, device=device, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    configs = get_variant("grouped").configs(64, 4096, 4096, "bfloat16")[:8]
    kinds["grouped x8 64x4096x4096"] = ([lambda c=c: grouped(a, b, c) for c in configs], False)
    pair = [kinds["cublas 4096x4096x4096"][0][0], kinds["grouped x8 64x4096x4096"][0][0]]
    kinds["settled, then cublas 4096^3 + grouped"] = (pair, True)
    for launches, _ in kinds.values():
        for launch in launches:
            launch()
    torch.cuda.synchronize(device)
    table: dict[str, dict] = {}  # session label -> its row (COLUMNS)
    stop, compiling = threading.Event(), None
    start, dumps, kept_good = time.time(), 0, False
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
    while time.time() - start < args.seconds:
        if compiling is None and time.time() - start > args.seconds / 2:
            compiling = threading.Thread(target=compile_beside, args=(device, stop), daemon=True)
            compiling.start()
        for name, (launches, settle) in kinds.items():
            label = ("compiling beside: " if compiling else "") + name
            blocks, refused = [], False
            host_s = [2e-5] * len(launches)
            try:
                with clock.profiled():
                    if settle:
                        clock.run(launches * 3, host_s * 3, profile=False)
                    for _ in range(ROUNDS):
                        blocks.append(clock.run(launches, host_s, profile=True))
            except InstrumentError:
                refused = True
            events, n = recorder.events, len(launches) * ROUNDS
            kernel = kernel_ms_per_launch(events, n)
            stream = [ms for block in blocks for ms in block.stream_ms]
            lost = sum(ms is None for ms in kernel)
            slivers = sum(1 for ms, s in zip(kernel, stream) if ms is not None and ms < s / 50)
            alt = sum(1 for ms, s in zip(gpu_span_first(events, n), stream) if ms is None or ms < s / 50)
            row = table.setdefault(
                label, dict.fromkeys(COLUMNS, 0) | {"session": label, "min_margin_us": math.inf}
            )
            seen = {
                "sessions": 1, "launches": n, "lost": lost, "slivers": slivers, "orphans": orphans(events),
                "lost_gpu_span_first": alt, "instrument_errors": int(refused),
            }  # fmt: skip
            for column, value in seen.items():
                row[column] += value
            row["min_margin_us"] = round(min(row["min_margin_us"], min_margin_us(events)), 2)
            bad = lost or slivers or refused
            keep = (bad and dumps < MAX_DUMPS) or (not bad and not kept_good and "cublas" in name)
            if args.dump and keep:
                dumps += bool(bad)
                kept_good = kept_good or not bad
                dump = {"session": label, "kernel_ms": kernel, "stream_ms": stream, "raw": recorder.raw}
                path = args.dump / (f"lost-{dumps}.json" if bad else "kept.json")
                path.write_text(json.dumps(dump))
        time.sleep(args.idle_s)  # the GPU idles, as a worker's does between batches while it compiles
    stop.set()
    rows = list(table.values())
    write_results(args.out, COLUMNS, rows)
    width = max(len(r["session"]) for r in rows)
    print(f"{'session':{width}s} " + " ".join(f"{col[:9]:>9s}" for col in COLUMNS[1:]))
    for r in rows:
        print(f"{r['session']:{width}s} " + " ".join(f"{r[col]:>9}" for col in COLUMNS[1:]))


if __name__ == "__main__":
    main()
