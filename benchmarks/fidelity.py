"""Is the farm faithful? Its protocol (farm.timing over farm.clock, no Ray) against independent
references, in one process on one GPU, alternating round by round.

    python benchmarks/fidelity.py                       # writes $OUT/fidelity.csv
    python benchmarks/fidelity.py --out docs/results/fidelity.csv --db results.db
    python benchmarks/fidelity.py --studies grouping --sizes 12288 16384 --rounds 12   # where it scatters
    python benchmarks/fidelity.py --studies dependent   # launchers whose kernels overlap: 15 s

- grouping: grouped bf16, 128x256x64 tiles, 8 warps, 3 stages, group_m 1 against 8, n^3 for
  n = 4096 ... 16384; reference triton.testing.do_bench (rep 300 ms, median), whose view is each
  config's own steady state under the power limit.
- splitk: best unsplit against best split config on the five split-K shapes; reference the sum of
  each launch's kernel durations as CUPTI records them (torch.profiler), the L2 flushed between
  launches, 30 launches a round, the flush's kernel left out by its name (learnt by profiling a
  flush alone), independent of the farm's own attribution by correlation id. Configs: a small
  built-in table screened once per shape, or the fastest rows of a results database (--db).
- dependent: launchers whose kernels overlap (programmatic dependent launch: split-K's reduce resident
  and waiting as its product ends, the bands' tail taking SMs as the main band's programs exit) against
  cuBLAS; reference the flushed CUDA graphs of tools/gpu_methods.py (GPU time alone, nothing read from
  CUPTI), and beside it the sum of the launch's CUPTI kernel durations, which counts a dependent
  kernel's wait as its run (ref_method "cupti_sum"): the farm's union of intervals should read the
  graphs' time and not the sum's.

ratio = time(baseline) / time(config): group_m 1 for grouping, the best unsplit config for
split-K, cuBLAS for dependent; the baseline's own row says 1. farm_ratio is the median over rounds,
ref_lo/ref_hi the range of the reference's per-round ratios; the table comes last. Writes --out: kept
as docs/results/fidelity.csv (grouping and splitk), fidelity_grouping_12rounds.csv and
fidelity_dependent.csv (splitk and dependent). Time on an H200: 72 s for the default studies, 13 s
for splitk and dependent.
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

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton

from farm import measure
from farm.clock import MIN_FLUSH_BYTES, CudaClock
from farm.gpu import Gpu
from farm.timing import TimingPolicy, time_steady
from farm.timing.request import TimingRequest
from kernels import MatmulConfig, get_variant
from tools.gpu_methods import Flush

ROUNDS = 5
GROUPING_SIZES = (4096, 6144, 8192, 12288, 16384)
SPLITK_SHAPES = (
    (128, 128, 32768),
    (512, 512, 32768),
    (512, 512, 8192),
    (1024, 1024, 8192),
    (2048, 2048, 8192),
)
CUPTI_LAUNCHES = 30
# The built-in split-K table (no --db): unsplit tiled tiles, and atomic split-K at 64x64 blocks.
UNSPLIT = [
    ("tiled", MatmulConfig(64, 64, 64, num_warps=4, num_stages=4)),
    ("tiled", MatmulConfig(128, 128, 64, num_warps=8, num_stages=3)),
    ("tiled", MatmulConfig(128, 256, 64, num_warps=8, num_stages=3)),
]
SPLIT = [("splitk", MatmulConfig(64, 64, 64, split_k=s, num_warps=4, num_stages=4)) for s in (4, 8, 16)]


@dataclass
class Row:
    study: str
    m: int
    n: int
    k: int
    config: str
    farm_ratio: float
    ref_method: str
    ref_ratio: float
    ref_lo: float
    ref_hi: float
    farm_ms: float
    ref_ms: float
    sm_clock_mhz: float | None
    joules_per_launch: float | None
    farm_lo: float
    farm_hi: float
    stream_ms: float | None
    host_ms: float | None
    avg_watts: float | None


COLUMNS = [f.name for f in fields(Row)]  # the issue's 14 columns first, then farm_lo ... avg_watts


def host_seconds(launch) -> float:
    """Host time of one launcher call, after a call that compiles: a first call's time (Triton's
    JIT) would size every block's head start at its 50 ms cap (farm.clock.MAX_SLEEP_US), an idle
    GPU before each block that the farm's own workers, which time the host after their check,
    never have (earlier runs of this study did, and read grouping gains 0.04-0.08 high at 12288^3
    and 16384^3)."""
    launch()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    launch()
    took = time.perf_counter() - t0
    torch.cuda.synchronize()
    return took


class CuptiReference:
    """Per-launch kernel time from CUPTI with the L2 flushed before each launch, the flush dropped by name."""

    def __init__(self, device: torch.device, l2_bytes: int):
        nbytes = max(MIN_FLUSH_BYTES, 2 * l2_bytes)
        self.flush = torch.empty(nbytes // 4, dtype=torch.int32, device=device)
        self.flush_names = {e.name for e in self._profile(lambda: None, 3) if not _cpu(e)}

    def _profile(self, launch, n: int):
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                self.flush.zero_()
                launch()
            torch.cuda.synchronize()
        return prof.events()

    def time(self, launch, n: int = CUPTI_LAUNCHES) -> float:
        events = self._profile(launch, n)
        kernels = [e for e in events if not _cpu(e) and e.name not in self.flush_names]
        return sum(e.time_range.end - e.time_range.start for e in kernels) / 1e3 / n


def _cpu(event) -> bool:
    return str(event.device_type).endswith("CPU")


def compare(study, shape, labels, launches, clock, references: dict, rng, rounds=ROUNDS) -> list[Row]:
    """Alternating rounds of the farm's protocol and each reference over `launches` (baseline first):
    `references` maps a method's name to its time of one launch; every reference reads the same
    rounds, and the rows come a method at a time."""
    host_s = [host_seconds(f) for f in launches]
    farm = []
    ref: dict[str, list[list[float]]] = {method: [] for method in references}
    policy = TimingPolicy()
    for _ in range(rounds):
        farm.append(time_steady(TimingRequest(launches, host_s, clock, policy, rng)))
        for method, reference in references.items():
            order = rng.sample(range(len(launches)), len(launches))
            times = {i: reference(launches[i]) for i in order}
            ref[method].append([times[i] for i in range(len(launches))])

    def med(xs):
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None

    rows = []
    for method, per_round in ref.items():
        for i, label in enumerate(labels):
            farm_ratios = [r[0].ms / r[i].ms for r in farm]
            ref_ratios = [r[0] / r[i] for r in per_round]
            mine = [r[i] for r in farm]
            rows.append(
                Row(
                    study,
                    *shape,
                    label,
                    statistics.median(farm_ratios),
                    method,
                    statistics.median(ref_ratios),
                    min(ref_ratios),
                    max(ref_ratios),
                    statistics.median(t.ms for t in mine),
                    statistics.median(r[i] for r in per_round),
                    med(t.state.sm_clock_mhz for t in mine),
                    med(t.joules_per_launch for t in mine),
                    min(farm_ratios),
                    max(farm_ratios),
                    med(t.stream_ms for t in mine),
                    med(t.host_ms for t in mine),
                    med(t.avg_watts for t in mine),
                )
            )
    return rows


def grouping(gpu: Gpu, clock, rng, sizes=GROUPING_SIZES, rounds=ROUNDS) -> list[Row]:
    rows = []
    launcher = get_variant("grouped").launch
    for n in sizes:
        a, b = measure.make_inputs(n, n, n, torch.bfloat16, gpu.device, seed=n)
        cfgs = [MatmulConfig(128, 256, 64, group_m=g, num_warps=8, num_stages=3) for g in (1, 8)]
        launches = [lambda c=c, a=a, b=b: launcher(a, b, c) for c in cfgs]

        def do_bench(f):
            return triton.testing.do_bench(f, warmup=25, rep=300, return_mode="median")

        labels = [f"grouped {c.key}" for c in cfgs]
        rows += compare("grouping", (n, n, n), labels, launches, clock, {"do_bench": do_bench}, rng, rounds)
        print(
            f"grouping n={n}: farm {rows[-1].farm_ratio:.3f}, do_bench {rows[-1].ref_ratio:.3f}", flush=True
        )
    return rows


def configs_from_db(db: str, shape) -> tuple[tuple[str, MatmulConfig], tuple[str, MatmulConfig]] | None:
    """The fastest unsplit (not cuBLAS) and fastest split row of `shape` in a results database."""
    from sqlalchemy import text

    from db.engine import make_engine

    engine = make_engine(db, readonly=True)
    fields = "variant, block_m, block_n, block_k, group_m, split_k, num_warps, num_stages, input_precision"
    picks = []
    with engine.connect() as conn:
        for where in ("split_k = 1 AND variant <> 'cublas'", "split_k > 1"):
            row = conn.execute(
                text(
                    f"SELECT {fields} FROM best_configs WHERE dtype = 'bfloat16' AND m = :m AND n = :n "
                    f"AND k = :k AND {where} ORDER BY ms LIMIT 1"
                ),
                dict(zip("mnk", shape)),
            ).first()
            if row is None:
                return None
            picks.append((row[0], MatmulConfig(*row[1:])))
    engine.dispose()
    return picks[0], picks[1]


def launch_of(variant: str, cfg: MatmulConfig, a: torch.Tensor, b: torch.Tensor):
    launcher = get_variant(variant).launch
    return lambda: launcher(a, b, cfg)


def splitk(gpu: Gpu, clock, reference: CuptiReference, db: str | None, rng, rounds=ROUNDS) -> list[Row]:
    rows = []
    for shape in SPLITK_SHAPES:
        m, n, k = shape
        a, b = measure.make_inputs(m, n, k, torch.bfloat16, gpu.device, seed=m + k)

        picked = configs_from_db(db, shape) if db else None
        if picked is None:  # screen the built-in table once with the reference
            best = []
            for table in (UNSPLIT, SPLIT):
                timed = [(reference.time(launch_of(v, c, a, b), 10), v, c) for v, c in table]
                best.append(min(timed, key=lambda t: t[0])[1:])
            picked = tuple(best)
        labels = [f"{v} {c.key}" for v, c in picked]
        launches = [launch_of(v, c, a, b) for v, c in picked]
        rows += compare("splitk", shape, labels, launches, clock, {"cupti": reference.time}, rng, rounds)
        print(
            f"splitk {m}x{n}x{k}: farm {rows[-1].farm_ratio:.2f}, cupti {rows[-1].ref_ratio:.2f}", flush=True
        )
    return rows


# Each launcher's fastest config on the H200 (docs/results/vs_libraries_h200.csv), two kernels a call.
DEPENDENT = [
    ((256, 256, 65536), "splitk_tma_cluster", MatmulConfig(128, 128, 128, 1, 16, 4, 4)),
    ((640, 640, 24576), "splitk_tma_reduce", MatmulConfig(128, 128, 64, 1, 5, 8, 6)),
    ((3072, 3072, 3072), "persistent_tma_bands", MatmulConfig(128, 256, 64, 8, 1, 8, 3)),
]


def dependent(gpu: Gpu, clock, cupti: CuptiReference, rng, rounds=ROUNDS) -> list[Row]:
    flush = Flush(gpu.device)

    def graphs_ms(launch) -> float:
        return flush.graph_flushed_us(launch) / 1e3

    rows = []
    for shape, variant, cfg in DEPENDENT:
        a, b = measure.make_inputs(*shape, torch.bfloat16, gpu.device, seed=sum(shape))
        labels = ["cublas", f"{variant} {cfg.key}"]
        launches = [launch_of("cublas", MatmulConfig(), a, b), launch_of(variant, cfg, a, b)]
        # the same farm rounds against both: the graphs (GPU time alone) and the sum the farm once took
        references = {"graphs": graphs_ms, "cupti_sum": cupti.time}
        shape_rows = compare("dependent", shape, labels, launches, clock, references, rng, rounds)
        for r in shape_rows[1::2]:  # the launcher's row under each method (cuBLAS's come first)
            print(
                f"dependent {'x'.join(map(str, shape))} {variant}: farm {r.farm_ms * 1e3:.1f} us, "
                f"{r.ref_method} {r.ref_ms * 1e3:.1f} us",
                flush=True,
            )
        rows += shape_rows
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "fidelity.csv"))
    parser.add_argument("--db", help="take split-K configs from this results database's best_configs")
    parser.add_argument(
        "--rounds", type=int, default=ROUNDS, help="alternating rounds per shape (at least 5)"
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=list(GROUPING_SIZES), help="grouping: n of the n^3 shapes"
    )
    parser.add_argument(
        "--studies", nargs="+", default=["grouping", "splitk"], choices=["grouping", "splitk", "dependent"]
    )
    args = parser.parse_args()
    gpu = Gpu("cuda")
    clock = CudaClock(gpu.device, gpu.limits.l2_bytes, meter=gpu)
    reference = CuptiReference(gpu.device, gpu.limits.l2_bytes)
    rng = random.Random(0)
    print(f"{gpu.name}: power limit {gpu.power_limit_w()} W; flush kernels {sorted(reference.flush_names)}")
    measure.warm_up(gpu.device, 2.0)
    start = time.perf_counter()
    rows = []
    if "splitk" in args.studies:
        rows += splitk(gpu, clock, reference, args.db, rng, args.rounds)
    if "grouping" in args.studies:
        rows += grouping(gpu, clock, rng, args.sizes, args.rounds)
    if "dependent" in args.studies:
        rows += dependent(gpu, clock, reference, rng, args.rounds)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    print(f"\n{len(rows)} rows in {time.perf_counter() - start:.0f} s -> {out}")
    lost = [r.config for r in rows if r.stream_ms is not None and r.farm_ms == r.stream_ms]
    if lost:  # farm.clock keeps the stream time of a launch whose kernels the profiler did not attribute
        print(f"WARNING: kernel time = stream time (no CUPTI attribution?) for {len(lost)} rows: {lost[:3]}")

    def f(x, spec):
        return "-" if x is None else format(x, spec)

    print(
        f"{'study':<9}{'shape':<18}{'config':<44}{'farm':>7}{'ref':>7}{'ref lo-hi':>12}{'farm ms':>10}"
        f"{'ref ms':>10}{'stream':>9}{'MHz':>6}{'J':>8}"
    )
    for r in rows:
        print(
            f"{r.study:<9}{f'{r.m}x{r.n}x{r.k}':<18}{r.config[:43]:<44}{r.farm_ratio:>7.3f}{r.ref_ratio:>7.3f}"
            f"{r.ref_lo:>6.2f}-{r.ref_hi:<5.2f}{r.farm_ms:>10.4f}{r.ref_ms:>10.4f}{f(r.stream_ms, '.4f'):>9}"
            f"{f(r.sm_clock_mhz, '.0f'):>6}{f(r.joules_per_launch, '.3f'):>8}"
        )


if __name__ == "__main__":
    main()
