"""The library bench's machinery (benchmarks/vs_libraries.py is the study: its question, its suites of
shapes and its command): the dispatcher (`kernels.matmul`) against cuBLAS and torch.compile max-autotune,
in one process. Here because the tests reach it (tests import no benchmark).

The table's columns and verdicts: tools/library_table.py.
triton_ms is the best of this project's own Triton variants on that very shape (quick-tuned there,
held-out shapes too; every shape's tuning is kept beside the table, `tuning_path`, each config with
its eager, host and GPU times): the fastest eagerly, and triton_graph_ms the fastest on GPU time
alone, which may be another config (where a launcher's host time decides the eager time); ours_ms is what
`kernels.matmul` runs from the best-configs files of `best` (the farm's export, or `save_best`
of earlier pieces) and the quick tuning of this run's tuned suites together. Every time is
`triton.testing.do_bench`'s median with L2 flushed between launches. Per shape Inductor compiles
first (its compile leaves Python launchers slower on the host), then the quick tuning runs; ours,
cuBLAS, Inductor and the tuning's fastest own config are timed last, in rotated rounds (`rounds`,
`interleaved_medians`), the median of the rounds kept for each. Then each call is captured in CUDA
graphs with the same flush and the calls' replays timed together, interleaved
(`graph_times_ms`): GPU time with no host time, the check on the eager time, which reads a Python
launcher's host time where it outlasts the flush.
"""

from __future__ import annotations

import functools
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kernels.tuned import TunedConfigs, TunedEntry
from tools.library_table import CONTENDERS, Row, is_skinny_k, write_csv

Shape = tuple[int, int, int]
# Suites served only from what the tuned suites (or `best`) chose, never tuned for the dispatcher
# itself (benchmarks/vs_libraries.py's SUITES)
HELD_OUT_SUITES = frozenset({"heldout", "unseen"})


@dataclass
class BenchRun:
    """One run of the bench, as benchmarks/vs_libraries.py's options give it."""

    # the suites to run, in order: name -> shapes (HELD_OUT_SUITES served from what others chose)
    suites: dict[str, list[Shape]]
    dtypes: list[str]  # kernels.DTYPES names
    out: str | Path  # the table's CSV (its tuning beside it: `tuning_path`)
    best: list[str] = field(default_factory=list)  # best-configs JSON files (farm export or save_best)
    save_best: str | None = None  # where to write this run's quick tuning of the tuned suites
    budget_s: float = 480  # start no new shape after this
    no_inductor: bool = False  # skip torch.compile (its autotuning is slow)
    only: list[str] = field(default_factory=list)  # shapes MxNxK of the suites to run (pieces)
    rounds: int = 5  # rotated rounds timing ours, cuBLAS, Inductor, own best
    rep_ms: int = 50  # do_bench's time per measure and round
    device: str = "cuda"


# Quick tuning: (block_m, block_n, block_k, num_warps, num_stages) per variant; 128x256x64 with 8
# warps for large outputs (tutorial 09 and the farm's H200 sweeps), smaller tiles and splits for
# skinny ones. Configs a variant's rules reject for the shape are skipped.
BIG = [(128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 64, 4, 4), (64, 128, 64, 4, 4)]
SKINNY = [(64, 64, 128, 4, 4), (128, 128, 64, 8, 3), (64, 128, 64, 4, 4)]
# K of a few dozen (495x5333x71): BLOCK_K 32, the K loop's three masked steps; `grouped` 128x64x32 ran
# 12.5 us in CUDA graphs against 20.6 for 128x128x64 and cuBLAS's 10.3 (H200); 128x128x32
# with 4 warps 9.9-10.1 in one masked loop (`kernels.tile.SHORT_K_STEPS`).
SMALL_K = [(128, 64, 32, 4, 3), (128, 128, 32, 8, 3), (128, 128, 32, 4, 3)]
# Skinny-K through `splitk_tma` and `splitk_tma_reduce`, each split from `wave_splits`: the best of 57-73
# configs a shape (H200, L2 flushed in CUDA graphs) was one of
# these at the five skinny-K shapes: 6 stages, up to 6.5 us ahead of 4 (`splitk_tma` at 1024x1024x16384:
# 49.5 against 56.0); summed apart 4 stages did as well at 512x512x32768.
SPLITK_TMA = [(128, 128, 64, 4, 6), (128, 128, 64, 8, 6), (128, 128, 64, 8, 4), (128, 64, 64, 4, 6)]
# `splitk_tma_cluster`'s best in 2-CTA clusters (CUDA graphs, L2 flushed, H200):
# 128x256x64, 8 warps, 6 stages at 512x512x32768 (35.8 us) and 1024x1024x16384 (49.7);
# 128x128x128, 4 warps, 4 stages at 256x256x65536 (32.0; 128x128x64 in 6 stages 32.5); 256x128x64
# within 5% of either.
SPLITK_CLUSTER = [(128, 256, 64, 8, 6), (128, 128, 128, 4, 4), (128, 128, 64, 4, 6), (256, 128, 64, 8, 6)]
QUICK_PROGRAMS = 132  # the H200's SMs; the tuning passes its device's count


def is_skinny(m: int, n: int) -> bool:
    """A small output, or a thin one: the quick tuning's small tiles and splits."""
    return m * n <= 1024 * 1024 or min(m, n) <= 128


def wave_splits(tiles: int, programs: int = QUICK_PROGRAMS) -> tuple[int, ...]:
    """Splits of K that fill one wave of `programs` with `tiles` output tiles, and half that (longer
    chunks, half the partial tiles to sum): 5 and 2 for 640x640 in 128x128 tiles (25 tiles)."""
    fill = max(1, min(64, programs // tiles))
    return tuple(sorted({fill, max(1, fill // 2)}))


# variant -> (m, n, k) -> (tiles, group_m, splits); splits None: `wave_splits` of each tile's count
QUICK = {
    "persistent_tma": lambda m, n, k: (SKINNY if is_skinny(m, n) else BIG, 8, (1,)),
    # odd N or K only
    "persistent_tma_pad": lambda m, n, k: (SKINNY[:2] if is_skinny(m, n) else BIG[:2], 8, (1,)),
    # where the last wave is short it runs two launches; elsewhere it is persistent_tma
    "persistent_tma_bands": lambda m, n, k: ([] if is_skinny(m, n) else BIG[:2], 8, (1,)),
    "grouped": lambda m, n, k: (SMALL_K if k <= 128 else SKINNY if is_skinny(m, n) else BIG[:3], 8, (1,)),
    "streamk_hybrid": lambda m, n, k: (SKINNY[:2] if is_skinny(m, n) else BIG[:2], 8, (1,)),
    "splitk": lambda m, n, k: (SKINNY, 1, (4, 8, 16, 32)) if is_skinny(m, n) else ([], 1, (1,)),
    "streamk": lambda m, n, k: (SKINNY[:2], 8, (1,)) if is_skinny(m, n) else ([], 1, (1,)),
    "splitk_tma": lambda m, n, k: (SPLITK_TMA, 1, None) if is_skinny_k(m, n, k) else ([], 1, (1,)),
    "splitk_tma_reduce": lambda m, n, k: (SPLITK_TMA, 1, None) if is_skinny_k(m, n, k) else ([], 1, (1,)),
    "splitk_tma_cluster": lambda m, n, k: (
        (SPLITK_CLUSTER, 1, None) if is_skinny_k(m, n, k) else ([], 1, (1,))
    ),
}
# Not `grouped_pad`: 8.1 us of GPU time at 495x5333x71 against cuBLAS's 10.5, but its launcher's two
# launches and two allocations (35 us of host, `grouped` 18) made its eager times bimodal: tuned here
# it was picked in fp16 at 11-12 us, and the rounds after Inductor's compile read 20.6 against
# cuBLAS's 13.2, 0.64 of the libraries. The farm measures it by kernel time.
# `splitk_tma` on the skinny-K class only, not at decode (16-row blocks for M = 16): there its GPU
# time tied cuBLAS's (CUDA graphs: 8.5 against 8.9 us at 16x4096x4096, 30.2 against 32.0 at
# 16x4096x14336), but its launcher's 40-100 us of host a call (cuBLAS 15-26; before the launch plans)
# decided each eager time: the tuning timed 18.2 us there, the rounds 60.1.
# With its launch plan (43 us of host on one lease's host, 71 on another's) tuned again at 16 tokens:
# the tuning took it on 5 of 8 rows and the rounds read 0.44-0.99 of cuBLAS there
# (H200), a host near the L2 flush's length either hidden or not. Skinny-K
# products run 30-60 us on the GPU. A tuning of splits 4-16 only and had it lose (80.2
# against 57.5 us at 1024x1024x16384); split 2, which fills the wave with 64 tiles, ran 50.3 against
# cuBLAS's 49.9. Tuned it won 5 of the 8 skinny-K rows among own variants; the
# rounds, after Inductor's compile, read host time again (512x512x32768 bf16: 46.6 us in the tuning,
# 69.2 in the rounds). The farm times it by kernel time.


def bench(fn, rep_ms: int = 100) -> float:
    """ms: do_bench's median, L2 flushed between runs (tools/gpu_methods.py)."""
    from tools.gpu_methods import do_bench_us

    return do_bench_us(fn, rep_ms) / 1000


@functools.cache
def _flush(device: torch.device):
    """One flush buffer (256 MB) a device for every graph measure of the run."""
    from tools.gpu_methods import Flush

    return Flush(device)


def graph_times_ms(
    calls: dict[str, Callable[[], object]], device: torch.device, rounds: int
) -> dict[str, float]:
    """ms: each call's GPU time in CUDA graphs with L2 flushed, the calls' replays interleaved over 5
    rounds per round of `BenchRun.rounds` (`Flush.graphs_flushed_us`); a call that cannot be captured
    is said and left out, the rest timed together; nothing off CUDA.

    Why together: each call's replays taken apart, in its turn of the rotated rounds, read the same
    torch.matmul (the dispatcher serving cuBLAS, and cuBLAS) 3.1-6.4% apart on the five power-capped
    rows of one run and within 0.5% on uncapped ones: under the cap the clock moves between turns.
    Together, within 0.0-1.7% on the LLM suite's 17 capped rows (1365-1965 MHz)."""
    if device.type != "cuda":
        return {}

    def said(name: str, exc: Exception) -> None:
        print(f"  no graph time for {name}: {str(exc)[:120]}", flush=True)

    # 10 calls a replay, not the probes' 15: a 16384^3 call takes 12 ms
    times = _flush(device).graphs_flushed_us(calls, 10, 5 * rounds, on_capture_error=said)
    return {name: us / 1000 for name, us in times.items()}


@functools.cache
def _gpu():
    from db.records import Backend
    from farm.gpu import Gpu

    return Gpu(Backend.CUDA)


def gpu_state(device: torch.device):
    """The GPU's SM clock, temperature and throttle reasons now (`farm.gpu.GpuState`); empty off CUDA."""
    from farm.gpu import GpuState

    return _gpu().state() if device.type == "cuda" else GpuState()


def interleaved_medians(measures: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    """Each measure taken `rounds` times, the order rotated every round; the median of each.

    Why: timed one after another, the same cuBLAS kernel read 186 then 203 us at 4096^3 in one
    process (Inductor had picked it), 195 then 200 through torch.matmul: the GPU warms
    and its clock falls. A row timed cuBLAS first, cold, and the dispatcher and Inductor after the
    quick tuning had heated the GPU; and min(cuBLAS, Inductor) of two noisy times of one kernel is
    biased low. Rotated rounds give every measure the same mix of states.
    """
    names = list(measures)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(measures[name]())
    return {name: statistics.median(ts) for name, ts in times.items()}


def quick_configs(variant: str, m: int, n: int, k: int, dtype: torch.dtype, programs: int = QUICK_PROGRAMS):
    from kernels import MatmulConfig, Problem, get_variant
    from kernels.sizes import cdiv
    from kernels.space import CLUSTER_CTAS, effective_group_m

    tiles, group_m, splits = QUICK[variant](m, n, k)
    space = get_variant(variant).space
    problem = Problem(m, n, k, dtype)
    # a program of `splitk_tma_cluster` takes CLUSTER_CTAS SMs: a wave holds that many times fewer
    wave = programs // CLUSTER_CTAS if variant == "splitk_tma_cluster" else programs
    for bm, bn, bk, w, st in tiles:
        for s in splits or wave_splits(cdiv(m, bm) * cdiv(n, bn), wave):
            cfg = MatmulConfig(bm, bn, bk, group_m=group_m, split_k=s, num_warps=w, num_stages=st)
            # as planning and the dispatcher do: group_m 8 over 333 rows (three tile rows) walks
            # them as group_m 3; the rules refuse the taller group (no own Triton time)
            cfg = effective_group_m(cfg, problem)
            if space.prune(cfg, problem) is None:
                yield cfg


def tune_shape(a, b) -> list[TunedEntry]:
    """Every quick config of every variant on this shape: entries in the best-configs format, each with its
    eager time (`ms`), host time and GPU time alone (`gpu_ms`, on CUDA). A shape started is tuned whole
    (`BenchRun.budget_s` only stops new shapes): cut by the budget, two rows of one run had no own Triton
    time and served what a part of the tuning had found."""
    from kernels import check_accuracy, get_variant, reference_matmul
    from kernels.dispatch import device_name
    from kernels.schedule import multiprocessor_count

    m, k = a.shape
    n = b.shape[1]
    ref = reference_matmul(a, b)
    entries = []
    for variant in QUICK:
        launch = get_variant(variant).launch
        for cfg in quick_configs(variant, m, n, k, a.dtype, multiprocessor_count(a.device)):
            call = functools.partial(launch, a, b, cfg)
            try:
                if not check_accuracy(call(), ref, a.dtype, k).ok:
                    print(f"  WRONG {variant} {cfg.key}", flush=True)
                    continue
                # eager, as `kernels.matmul`'s callers wait: picked on GPU time alone, the tuning had the
                # dispatcher serve `persistent_tma_bands` at 495x5333x71 bf16 (9.6 us of GPU against
                # cuBLAS's 10.5), which took 76.2 us eagerly against 13.4
                ms = bench(call)
                host = call_host_ms(call, ms, a.device)
                gpu = graph_times_ms({"config": call}, a.device, rounds=1).get("config")
            except Exception as exc:  # out of resources and the like: skip the config
                print(f"  skip {variant} {cfg.key}: {str(exc)[:120]}", flush=True)
                continue
            entries.append(_entry(device_name(a.device), a.dtype, m, n, k, variant, ms, cfg, host, gpu))
    return entries


def fastest(entries: list[TunedEntry], time_key: str) -> TunedEntry | None:
    """The entry least in `time_key` (`ms`, eager; `gpu_ms`, GPU time alone) among those that have it."""
    timed = [e for e in entries if getattr(e, time_key) is not None]
    return min(timed, key=lambda e: getattr(e, time_key)) if timed else None


# GPU time a pass of host_us's calls may queue: 50 calls under 0.4 ms, 3 of a 13 ms 16384^3 call.
HOST_PASS_MS = 20


def call_host_ms(fn, ms: float, device: torch.device) -> float | None:
    """fn's host time a call (tools.gpu_methods.host_us), `ms` its time: for every entry, long ones too,
    as the dispatcher weighs it wherever a problem's call is short, and an entry tuned on a long call can
    serve a short one (`kernels.dispatch.serving_order`). The calls a pass are as many as queue about
    HOST_PASS_MS of GPU work, 3 to 50. None off CUDA (the interpreter's host time says nothing)."""
    from tools.gpu_methods import host_us

    if device.type != "cuda":
        return None
    return host_us(fn, calls=max(3, min(50, int(HOST_PASS_MS / ms)))) / 1000


def _entry(
    gpu, dtype, m, n, k, variant, ms, cfg, host_ms: float | None = None, gpu_ms: float | None = None
) -> TunedEntry:
    from kernels.sizes import tflops
    from kernels.space import dtype_name

    return TunedEntry(gpu, dtype_name(dtype), m, n, k, variant, ms, cfg, tflops(m, n, k, ms), host_ms, gpu_ms)


def _mm(x, y):
    return torch.matmul(x, y)


def inductor_compiled(a, b) -> Callable[[], torch.Tensor]:
    """torch.compile max-autotune's multiply of a and b, compiled and autotuned (by its first call)."""
    torch._dynamo.reset()  # a fresh compile per shape: no recompile limit, no dynamic shapes
    compiled = torch.compile(_mm, mode="max-autotune-no-cudagraphs", dynamic=False)
    compiled(a, b)
    return lambda: compiled(a, b)


def write_best(path: Path, entries: list[TunedEntry]) -> None:
    TunedConfigs(entries).save(path)


def run(job: BenchRun) -> list[Row]:
    """Every shape of the run's suites and dtypes, a row each, the table written after every shape."""
    from kernels import DTYPES, LIBRARY_CONFIG
    from kernels.dispatch import Dispatcher, device_name
    from kernels.schedule import multiprocessor_count

    device = torch.device(job.device)
    sms = multiprocessor_count(device)
    start = time.time()
    budget_end = start + job.budget_s
    rows: list[Row] = []
    tuned_entries: list[TunedEntry] = []  # the tuned suites': what the dispatcher serves from
    tunings: list[TunedEntry] = []  # every shape's, held-out too: `tuning_path`
    given = [e for path in job.best for e in TunedConfigs.load(path).entries]
    for suite, shapes in job.suites.items():
        heldout = suite in HELD_OUT_SUITES
        if heldout and not given and not tuned_entries:
            sys.exit(f"the {suite} suite needs --best (or tuned suites earlier in the same run)")
        for dtype_name_ in job.dtypes:
            dtype = DTYPES[dtype_name_]
            for m, n, k in shapes:
                if job.only and f"{m}x{n}x{k}" not in job.only:
                    continue
                if time.time() > budget_end:
                    print(f"budget of {job.budget_s} s spent: stopping before {m}x{n}x{k}", flush=True)
                    return _finish(rows, tuned_entries, tunings, job)
                gen = torch.Generator(device=device).manual_seed(m + 3 * n + 7 * k)
                a = torch.randn((m, k), device=device, dtype=dtype, generator=gen)
                b = torch.randn((k, n), device=device, dtype=dtype, generator=gen)
                t0 = time.time()
                # Inductor first: after its compile this process queues a Python launcher slower
                # (495x5333x71 `grouped`: 31.7 -> 44.7-54.7 us of host a call, H200), and
                # below about 50 us of GPU do_bench reads host time; so the tuning picks its winner
                # in the state the rounds time it in (256x256x65536 bf16, tuning against rounds:
                # 40.5 against 87.1 us tuned before the compile, 40.8 against 41.6 after).
                inductor = None if job.no_inductor else inductor_compiled(a, b)
                lib_ms = bench(lambda: torch.matmul(a, b))  # noqa: B023  (the dispatcher's table entry)
                lib_host = call_host_ms(lambda: torch.matmul(a, b), lib_ms, device)  # noqa: B023
                entries = tune_shape(a, b)
                triton_best = fastest(entries, "ms")
                # the GPU column's own kernel is the one fastest on the GPU: at 640x640x24576 fp16 the eager
                # pick, a pointer split-K chosen for its launcher's 42 us of host against the TMA split-K's
                # 63-73, took 45.0 us of GPU (cuBLAS 37.0; the TMA pick 39.4): 0.82
                gpu_best = fastest(entries, "gpu_ms") or triton_best
                library = _entry(
                    device_name(device), dtype, m, n, k, "cublas", lib_ms, LIBRARY_CONFIG, lib_host
                )
                tunings += [*entries, library]
                if not heldout:
                    tuned_entries += [*entries, library]
                dispatch = Dispatcher.load(_tmp_best(given + tuned_entries, job))
                choice = dispatch.choose(m, n, k, dtype, device_name(device), programs=sms)
                calls = {"ours": lambda: dispatch(a, b), "cublas": lambda: torch.matmul(a, b)}  # noqa: B023
                if inductor is not None:
                    calls["inductor"] = inductor
                graph_calls = dict(calls)
                if triton_best:  # the tuning's fastest own configs, timed again beside cuBLAS
                    calls["triton"] = own_call(triton_best, a, b)
                    graph_calls["triton"] = own_call(gpu_best, a, b)
                measures = {name: functools.partial(bench, fn, job.rep_ms) for name, fn in calls.items()}
                before = gpu_state(device)
                final = interleaved_medians(measures, job.rounds)
                graphs = graph_times_ms(graph_calls, device, job.rounds)
                state = before.merge(gpu_state(device))
                ours, cublas, ind = final["ours"], final["cublas"], final.get("inductor", math.nan)
                row = Row(
                    m, n, k, dtype_name_, int(heldout), ours, final.get("triton", math.nan),
                    cublas, ind, choice.variant, choice.config.key,
                    *(graphs.get(name, math.nan) for name in CONTENDERS),
                    state.sm_clock_mhz or math.nan, state.reasons,
                    own_label(gpu_best) if "triton" in graphs else "",
                )  # fmt: skip
                rows.append(row)
                # after every shape: a killed piece keeps its rows
                _finish(rows, tuned_entries, tunings, job)
                base = min(cublas, ind) if not math.isnan(ind) else cublas
                print(
                    f"{suite:8s} {dtype_name_:9s} {m:>6d}x{n:<6d}x{k:<6d}"
                    f" ours {ours:8.4f} ms ({choice.variant}) triton {row.triton_ms:8.4f}"
                    f" cublas {cublas:8.4f} inductor {ind:8.4f}"
                    f"  lib/ours {base / ours:5.2f}; graphs: ours {row.ours_graph_ms:8.4f}"
                    f" cublas {row.cublas_graph_ms:8.4f}; {row.sm_clock_mhz:.0f} MHz {row.throttle}"
                    f"  [{time.time() - t0:4.0f} s]",
                    flush=True,
                )
    return _finish(rows, tuned_entries, tunings, job)


def own_call(entry: TunedEntry, a: torch.Tensor, b: torch.Tensor) -> Callable[[], torch.Tensor]:
    """The entry's own kernel on a and b."""
    from kernels import get_variant

    return functools.partial(get_variant(entry.variant).launch, a, b, entry.config)


def own_label(entry: TunedEntry) -> str:
    """`variant config-key`: which own kernel a row's GPU column timed."""
    return f"{entry.variant} {entry.config.key}"


def _tmp_best(entries: list[TunedEntry], job: BenchRun) -> Path:
    path = Path(job.out).with_suffix(".best-run.json")
    write_best(path, entries)
    return path


def tuning_path(out: str | Path) -> Path:
    """Where a run keeps every shape's quick tuning, held-out shapes too, in the best-configs format: what
    won each held-out shape on its own (the table keeps only its time), never read by the dispatcher."""
    return Path(out).with_suffix(".tuning.json")


def _finish(
    rows: list[Row], tuned_entries: list[TunedEntry], tunings: list[TunedEntry], job: BenchRun
) -> list[Row]:
    write_csv(Path(job.out), rows)
    write_best(tuning_path(job.out), tunings)
    if job.save_best:
        write_best(Path(job.save_best), tuned_entries)
    return rows
