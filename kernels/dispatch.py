"""`kernels.matmul(a, b)`: the variant and config the farm measured best for this GPU and shape.

    import kernels
    kernels.matmul.load("best.json")   # `farm export-best --out best.json`; or $FARM_BEST_CONFIGS
    c = kernels.matmul(a, b)           # torch.matmul's shapes, dtypes, errors, out= and autograd

"Best" is for an objective (`OBJECTIVES`): "eager", what an eager caller waits for (the longer of the
call's GPU time and its launcher's host time, where the file has the host time), or "kernel", the
kernel time alone. An eager call defaults to "eager"; a call under CUDA graph capture or torch.compile
tracing to "kernel", since a replayed graph or a compiled program issues no launcher's Python
(`default_objective`). `Dispatcher(objective=...)` or `kernels.matmul(a, b, objective=...)` fixes it.
kernels/op.py holds what makes it a drop-in for torch.matmul (batched and 1-D operands, fallbacks,
`out=`, autograd) and the torch op `farm::matmul` that torch.compile traces.

Nothing is tuned at call time. The file is read once; each (shape, dtype, device) is decided once
and remembered, and an eager call's decision kept as a route that the next call of the same shapes,
strides, dtypes, devices and objective takes directly (kernels/op.py, `Routes`; `route`).
A decision takes the tuned shape nearest in log space (sum of |log ratio| of m, n
and k), preferring shapes whose rows are aligned as the problem's are (16-byte rows or not:
`kernels.space.unaligned_rows` says why that decides between cuBLAS and TMA; a problem of aligned rows
takes no shape of unaligned ones: `aligned_shapes`; carried from aligned rows to unaligned ones, TMA
and the library serve on padded copies (`PADDED_TWIN`: cuBLAS as `LIBRARY_PAD`, kernels.cublas.padded_matmul)
and the pointer kernels' times count slower: `across_alignment`; an unaligned shape that never ran
padded copies meets the nearest aligned shape's padded estimate: `unmeasured_padding`), then shapes
of the same bucket (`shape_bucket`:
a decode-sized M, a skinny output with long K, or the rest). At that shape each Triton entry is
fitted to the problem (its GROUP_SIZE_M cut to the problem's tile rows, its split of K to the programs
the tuned shape launched: `wave_matched_split`) and its time there estimated in rounds of programs on
the GPU's SMs (`rounds_ratio`); the fastest estimate whose config is legal for the problem (the
variant's own pruning rules: an unaligned N rules out TMA, a short K rules out a split) serves if it
beat the library at the tuned shape (`beats_library`; carried across alignment, each on padded
copies: `library_rival`). Under the eager objective, where the
problem's call is short (an estimate under 0.1 ms) what an eager caller waits for decides instead,
the launcher's host time included where the file has it (`serving_order`, `Candidate.eager_wait_ms`);
under the kernel objective the estimated kernel times alone rank and decide. Where cuBLAS (`cublas`)
was fastest, torch.matmul runs (`LIBRARY_CALLS`), on padded copies where its win was carried across
alignment. A GPU the file does not know, or no file at all, runs torch.matmul
after a one-time warning.

Any file a valid export writes is taken without raising (tests/kernels/test_shipped_exports.py decides
a grid of shapes from each shipped database's export):
- Entries of several GPUs: only the entries whose gpu_name is the running GPU's (or the `gpu_name`
  given) decide; a name that matches none runs torch.matmul, as a GPU missing from the file does.
- Library entries (`cublas`, `LIBRARY_CONFIG`: block sizes 0) are never Triton candidates: no tile
  arithmetic is done on them (`tile_variant`). Several at one shape (float32's two cuBLAS configs,
  ieee and tf32, each objective's best; a file joined from two exports; an export written before it
  kept one run per config) are each a rival: a Triton candidate serves only if it beats every one of
  them (`beats_library`).
- A shape holding only library entries decides for the library (nothing else was measured to run
  there), as does one with a library entry whose Triton entries are all illegal for the problem.
- Entries of variants this program does not know (a plugin's, not loaded) and library-space variants
  other than `cublas` are passed over: a shape left with no entry decides nothing, the next one does.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch
import triton

from kernels import op
from kernels.config import LIBRARY_CONFIG, MatmulConfig
from kernels.cublas import padded_matmul
from kernels.launching import bound_launch
from kernels.persistent_tma import TmaUnsupported
from kernels.registry import UnknownVariantError, Variant, get_variant
from kernels.schedule import multiprocessor_count
from kernels.sizes import cdiv
from kernels.space import TMA_ALIGN_BYTES, Problem, dtype_name, effective_group_m, unaligned_rows
from kernels.tuned import TunedConfigs, TunedEntry

BEST_CONFIGS_ENV = "FARM_BEST_CONFIGS"
LIBRARY = "cublas"
# The library on copies of 16-byte aligned rows: no variant the farm sweeps, what serves where a library
# win is carried to unaligned rows (`PADDED_TWIN`, `library_rival`).
LIBRARY_PAD = "cublas_pad"
# What serves a library choice: a callable (a, b) -> a @ b.
LIBRARY_CALLS = {LIBRARY: torch.matmul, LIBRARY_PAD: padded_matmul}
# What "best" means (db.queries.OBJECTIVES holds the same words for the farm's tables).
EAGER, KERNEL = "eager", "kernel"
OBJECTIVES = (EAGER, KERNEL)
# Buckets, from the H200 measurements: at M <= 64 (decode) the weights' read dominates and split-K
# or cuBLAS's GEMV-like kernels win; with an output under 1024x1024 and K >= 8x its side, split-K
# and stream-K win (512x512x32768: 468 vs 310 TFLOP/s for cuBLAS vs inductor); the rest is tiled.
DECODE_M = 64
SKINNY_OUTPUT = 1024 * 1024
SKINNY_K_RATIO = 8
# A Triton entry under 0.1 ms serves only if 5% faster than the library's (`beats_library`): above
# one do_bench measure's spread between runs (cuBLAS at 1024x1024x16384: 53.4-55.3 us over three runs).
SHORT_CALL_MS = 0.1
SHORT_CALL_MARGIN = 1.05
# Times measured on 16-byte aligned rows, carried to a problem whose rows are not (`across_alignment`).
# cuBLAS and the pointer kernels both slow down there. On the H100 study's five unaligned shapes cuBLAS
# ran 3.2-8.7x slower a flop than at the aligned shape each is decided from (1000x1500x700 106 TFLOP/s
# against 1024^3's 344, 6000x333x4100 90 against 4096^3's 785; dashboard/demo/h100-study.db), the best
# of grouped and splitk 1.8-8.7x; on the H200 cuBLAS read 122-167 TFLOP/s at 2000x3000x1500, 4097^3,
# 4096x32001x4096 and 2048x50257x768 against 657-701 at 4096^3 (docs/results/vs_libraries_h200.csv).
# A pointer kernel's time so carried counts UNALIGNED_SLOWDOWN times slower: 3, under every cuBLAS
# slowdown measured (cuBLAS itself serves on padded copies there: `PADDED_TWIN`). Each operand's loads
# keep the widest vectors its rows allow (kernels/tile.py), yet at 5000x1234x3000 and 3333x1111x4444
# `grouped`'s best of five tiles ran 148 and 372 us where padded TMA ran 80 and 104 (H100 bf16).
UNALIGNED_SLOWDOWN = 3.0
# The TMA kernels and cuBLAS are the exception: on padded copies (kernels/pitched.py) they run the
# aligned kernel they were tuned as, plus the copy. persistent_tma and cuBLAS serve as their padded
# twins; the others pad themselves. cuBLAS so is what Inductor's max-autotune picks there: at
# 3333x1111x4444 and 5000x1234x3000 bf16 it padded to multiples of 8 and ran cuBLAS in 52.3 and 56.9 us,
# where its best Triton GEMM took 92.4 and 127.6 (H100; kernels.cublas.padded_matmul).
PADDED_TWIN = {"persistent_tma": "persistent_tma_pad", LIBRARY: LIBRARY_PAD}
PADS_ROWS = frozenset({"persistent_tma_pad", "persistent_tma_bands", LIBRARY_PAD})
# The copy's rate, read and write of each padded operand: 262 MB of B at 4096x32001x4096 took 0.155 ms on
# the H200 (3.4 TB/s of traffic); the H100's 3.35 TB/s of HBM3 copies at about 2.5.
PAD_COPY_BYTES_PER_MS = 2.5e9


def shape_bucket(m: int, n: int, k: int) -> str:
    if m <= DECODE_M or n <= DECODE_M:
        return "decode"
    if m * n <= SKINNY_OUTPUT and k >= SKINNY_K_RATIO * math.sqrt(m * n):
        return "skinny_k"
    return "tiled"


def shape_distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    return sum(abs(math.log(x / y)) for x, y in zip(a, b))


def rounds_ratio(
    tuned_cfg: MatmulConfig, served_cfg: MatmulConfig, tuned: tuple[int, int, int], p: Problem, programs: int
) -> float:
    """How a config's time scales from the tuned shape to the problem, counted in rounds: a round is one
    program on each of `programs` SMs, each program walking its K chunk (K / split), so the time goes as
    ceil(tiles x split / programs) x K / split. Every variant is counted in whole rounds: a short last
    round costs as much as a full one (the bands and stream-K variants shorten it at the tuned shape,
    and their tuned time holds that).

    Why not the ratio of work: the problem's rounds, not its work, are what a tile size carried from the
    tuned shape costs. 4097^3's 128x256 tiles are 561 on 132 SMs (4.25 rounds); at the held-out
    333x4444x5555 they are 54 (0.41 of one) and ran 89.9 us of GPU against the shape's own best 72.0 and
    Inductor's 63.7 (H200 bf16), where the work ratio had ranked them first; ranked in rounds,
    128x128 served, 71.8 us. Over the held-out shapes tuned on their own too, the configs picked by
    rounds took 1.08 of the best Triton time there at the geomean, by work 1.16 (docs/design.md,
    "Estimating in rounds")."""

    def rounds_x_chunk(cfg: MatmulConfig, m: int, n: int, k: int) -> float:
        launched = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n) * cfg.split_k
        return cdiv(launched, programs) * k / cfg.split_k

    return rounds_x_chunk(served_cfg, p.m, p.n, p.k) / rounds_x_chunk(tuned_cfg, *tuned)


@dataclass(frozen=True)
class Candidate:
    """A tuned entry as it would serve the problem: its config fitted to it and its time there, estimated
    from the tuned time by `ratio`."""

    entry: TunedEntry
    config: MatmulConfig
    ratio: float  # in rounds (`rounds_ratio`); the library's time at the tuned shape scales by it too
    # carried across alignment (`across_alignment`): UNALIGNED_SLOWDOWN, or the padded copies' time
    slowdown: float = 1.0
    copy_ms: float = 0.0

    def at(self, ratio: float) -> Candidate:
        """The same entry estimated with another ratio: a library rival scaled as the candidate it meets."""
        return dataclasses.replace(self, ratio=ratio)

    @property
    def ms(self) -> float:
        return self.entry.ms * self.ratio * self.slowdown + self.copy_ms

    @property
    def eager_wait_ms(self) -> float:
        """What an eager caller waits for: the longer of the call's time and its launcher's host time
        (db.records.eager_ms's definition), its time alone where the host's was not measured. The host
        time is not scaled: a launcher's host time is its Python and launches, whatever the sizes."""
        return max(self.ms, self.entry.host_ms or 0.0)


def check_objective(objective: str) -> str:
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; one of: {', '.join(OBJECTIVES)}")
    return objective


def default_objective(device: torch.device) -> str:
    """KERNEL while torch.compile traces or the device's stream captures a CUDA graph, else EAGER: a
    compiled program or a replayed graph runs no launcher's Python, so its host time is nobody's wait."""
    if torch.compiler.is_compiling():
        return KERNEL
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return KERNEL
    return EAGER


def serving_order(candidates: list[Candidate], objective: str = EAGER) -> list[Candidate]:
    """A tuned shape's Triton candidates in the order the problem tries them: fastest first, or, under the
    eager objective where the problem's call is short (its fastest candidate under SHORT_CALL_MS), least
    `eager_wait_ms` first.

    Why: an entry tuned on a long call was ranked by kernel time alone, and served to a short one its
    launcher's host time decides. 4097^3's fastest, `persistent_tma_bands` (two launches, padded copies:
    0.256 ms against `persistent_tma_pad`'s 0.279), served the held-out 2000x3000x1500 (44 us of GPU)
    and read 57.7-72.2 us eagerly against Inductor's 45.5-50.7 (H200), where `persistent_tma_pad`'s
    one launch read 52.7 (docs/design.md, "Short calls")."""
    if objective == KERNEL or not candidates or min(c.ms for c in candidates) >= SHORT_CALL_MS:
        return sorted(candidates, key=lambda c: c.ms)
    return sorted(candidates, key=lambda c: c.eager_wait_ms)


def across_alignment(shape: tuple[int, int, int], problem: Problem) -> bool:
    """Whether a time tuned at `shape` is carried from 16-byte aligned rows to a problem of unaligned ones."""
    return unaligned_rows(problem) is not None and unaligned_rows(Problem(*shape, problem.dtype)) is None


def pad_copy_ms(problem: Problem, whole_k: bool = False) -> float:
    """The padded copies' time: a read and a write of each operand whose rows are not 16-byte aligned (A
    where K is odd, B where N is; C is stored into padded rows, no copy: kernels/persistent_tma.py).
    `whole_k`: K itself is padded too, and B copied where K is odd to take its zero rows (cuBLAS's
    copies: kernels.cublas.padded_matmul; TMA reads zeros past K)."""
    odd_k = problem.k * problem.elem_bytes % TMA_ALIGN_BYTES != 0
    odd_n = problem.n * problem.elem_bytes % TMA_ALIGN_BYTES != 0
    copied = problem.m * problem.k * odd_k + problem.k * problem.n * (odd_n or (whole_k and odd_k))
    return 2 * copied * problem.elem_bytes / PAD_COPY_BYTES_PER_MS


def library_rival(library: TunedEntry, shape: tuple[int, int, int], problem: Problem) -> Candidate:
    """The library's entry at `shape` as a rival for `problem`, its ratio set where it meets a candidate
    (`Candidate.at`): as measured, or, carried across alignment, on padded copies (`LIBRARY_PAD`): the
    same time and the copies' (its host time stands: the copies' launches are not counted, as for
    `persistent_tma_pad`). With the export of a sweep of five aligned shapes only, the unaligned 2500^3
    (5,000-byte rows) was decided from an aligned shape where cuBLAS had won, and cuBLAS on the unaligned
    rows ran 193 us against Inductor's 74.5 (H100 bf16)."""
    if not across_alignment(shape, problem):
        return Candidate(library, LIBRARY_CONFIG, 1.0)
    return Candidate(
        dataclasses.replace(library, variant=PADDED_TWIN[library.variant]), LIBRARY_CONFIG, 1.0,
        copy_ms=pad_copy_ms(problem, whole_k=True),
    )  # fmt: skip


def beats_library(candidate: Candidate, library: Candidate | None, objective: str = EAGER) -> bool:
    """Whether a Triton candidate serves instead of the library. The two compare at the shape where both
    were timed: the library's time is scaled by the candidate's own ratio, so an estimate carried to
    the problem decides among Triton configs, never against the library.

    The kernel objective, and long calls: the faster kernel. Under the eager objective a call under
    SHORT_CALL_MS must be SHORT_CALL_MARGIN faster in `eager_wait_ms`: there a launcher's host time
    can outlast the kernel, and do_bench's L2 flush hides it only in part. Our launchers took 35-112 us
    of host a call on two H200 hosts, cuBLAS 15-30. 1024x1024x16384's `splitk_tma` was tuned 0.4-2%
    ahead of cuBLAS (53-55 us, three runs); served to the held-out 768x768x12288 in fp16 it read
    82.5 us against cuBLAS's 33.2 in one process, 33.8 against 33.5 in another. At 495x5333x71 bf16
    `grouped` was tuned at 12.9 us against cuBLAS's 13.6, 10.3 of GPU time and about 20 of host, and
    served it read 28.4 against 13.8:
    its host time says it waits longer."""
    if library is None:
        return True
    rival = library.at(candidate.ratio)
    if objective == KERNEL or candidate.ms >= SHORT_CALL_MS:
        return candidate.ms < rival.ms
    return candidate.eager_wait_ms * SHORT_CALL_MARGIN <= rival.eager_wait_ms


def unmeasured_padding(entries: list[TunedEntry]) -> bool:
    """Whether an unaligned tuned shape's entries lack TMA on padded copies (`PADS_ROWS`): a sweep that
    never ran them there knows nothing of them, and its winners carry poorly. The shipped H100 study
    measured its unaligned shapes with grouped, splitk and cuBLAS only; decided from them, unseen
    unaligned shapes ran `grouped` at 0.26-0.76 of the faster of cuBLAS and Inductor (5000x1234x3000:
    199 us against Inductor's 67) and cuBLAS at 2500^3 (194 us), where `persistent_tma_pad` decided from
    aligned shapes ran 76-85 us (H100 bf16, docs/results/vs_libraries_h100_unseen.csv). Such a shape's
    decision then meets the nearest aligned shape's padded TMA estimate, and the lower cost serves."""
    return not any(e.variant in PADS_ROWS for e in entries)


def aligned_shapes(shapes: list[tuple[int, int, int]], dtype: torch.dtype) -> list[tuple[int, int, int]]:
    """The tuned shapes whose rows are 16-byte aligned, the only ones that decide for a problem whose rows
    are: where rows are not, cuBLAS runs 2-4x slower (4097^3 bf16: 1.04 ms against 0.256 for
    `persistent_tma_bands`), so a Triton win there says nothing of a problem where cuBLAS runs at full
    speed. With only 4097^3 and 2048x50257x768 tuned, the held-out 768x768x12288 took 4097^3's bands and
    read 75.6 us against cuBLAS's 34.0 (H200 bf16); with no aligned shape the library serves."""
    return [s for s in shapes if unaligned_rows(Problem(*s, dtype)) is None]


def wave_matched_split(cfg: MatmulConfig, tuned: tuple[int, int, int], p: Problem) -> MatmulConfig:
    """A split of K tuned at another shape, made to launch no more programs than it did there: a split
    is there to fill the SMs with programs, and their count is tiles x split. At the tuned shape
    itself the config is unchanged.

    Why: 1024x1024x16384's split 2 of 64 tiles (128x128) is 128 programs, one wave of the H200's 132
    SMs; served as it is to the held-out 768x768x12288 (36 tiles), it launched 72 and ran 0.84 of
    cuBLAS, where split 3 (108 programs) ties it (H200; docs/design.md, "Fitting a config to the problem")."""
    if cfg.split_k == 1:
        return cfg
    programs = cfg.split_k * cdiv(tuned[0], cfg.block_m) * cdiv(tuned[1], cfg.block_n)
    return cfg.replace(split_k=max(1, programs // (cdiv(p.m, cfg.block_m) * cdiv(p.n, cfg.block_n))))


def tile_variant(entry: TunedEntry) -> Variant | None:
    """The registered variant that serves `entry` as a Triton candidate, or None where no tile arithmetic
    applies: the library's entries (`cublas`, LIBRARY_CONFIG: block sizes 0, which `rounds_ratio`
    divides by), a library-space variant of a plugin, and variants this program does not know (a
    plugin's, not loaded here)."""
    if entry.variant == LIBRARY or entry.config.is_library:
        return None
    try:
        variant = get_variant(entry.variant)
    except UnknownVariantError:
        return None
    return None if variant.space.base.is_library else variant


@dataclass(frozen=True)
class Choice:
    variant: str
    config: MatmulConfig
    tuned_shape: tuple[int, int, int] | None  # the measured shape it came from; None for the fallback


@dataclass(frozen=True)
class Decision:
    """A tuned shape's choice for a problem and its estimated cost there (`cost`): how two tuned shapes'
    choices compare (`unmeasured_padding`)."""

    choice: Choice
    cost: float


def cost(candidate: Candidate, objective: str) -> float:
    """What ranks a candidate for the objective: its estimated time, or, under the eager objective for a
    short call (under SHORT_CALL_MS), what an eager caller waits for (`serving_order`'s rule)."""
    if objective == KERNEL or candidate.ms >= SHORT_CALL_MS:
        return candidate.ms
    return candidate.eager_wait_ms


def device_name(device: torch.device) -> str:
    """The GPU name the farm records (`farm/gpu.py`); the interpreter's rows say so."""
    if device.type == "cpu":
        return "CPU (Triton interpreter)"
    return torch.get_device_module(device).get_device_name(device)


class Dispatcher(op.DropIn):
    """Decisions from one best-configs file; `dispatcher(a, b)` multiplies as torch.matmul does.

    `objective`: EAGER or KERNEL for every call, or None (the default) for `default_objective`'s:
    EAGER for eager calls, KERNEL under CUDA graph capture and torch.compile."""

    def __init__(
        self, tuned: TunedConfigs | None, *, gpu_name: str | None = None, objective: str | None = None
    ):
        self.gpu_name = gpu_name  # None: the name of each call's device
        self.objective = None if objective is None else check_objective(objective)
        # (gpu, dtype) -> shape -> entries, fastest first
        self._table: dict[tuple[str, str], dict[tuple[int, int, int], list[TunedEntry]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for entry in tuned.entries if tuned is not None else []:
            self._table[entry.gpu_name, entry.dtype][entry.m, entry.n, entry.k].append(entry)
        for shapes in self._table.values():
            for entries in shapes.values():
                entries.sort(key=lambda e: e.ms)
        self._decided: dict[tuple, Choice] = {}
        self._warned: set[str] = set()
        # device -> (its name, its SMs, whether Triton runs there): looked up on every call they cost
        # microseconds
        self._devices: dict[torch.device, tuple[str, int, bool]] = {}
        self.op_id = op.register(self)  # how the torch op `farm::matmul` finds this dispatcher
        self.routes = op.Routes()  # decided eager calls -> what serves them (kernels/op.py)

    @classmethod
    def load(
        cls, path: str | Path, *, gpu_name: str | None = None, objective: str | None = None
    ) -> Dispatcher:
        return cls(TunedConfigs.load(path), gpu_name=gpu_name, objective=objective)

    def choose(
        self,
        m: int,
        n: int,
        k: int,
        dtype: torch.dtype,
        gpu_name: str,
        *,
        programs: int,
        objective: str = EAGER,
    ) -> Choice:
        """The decision for a product on a GPU of that name with `programs` SMs, best for `objective`."""
        key = (m, n, k, dtype, gpu_name, programs, objective)
        if key not in self._decided:
            self._decided[key] = self._choose(m, n, k, dtype, gpu_name, programs, check_objective(objective))
        return self._decided[key]

    @staticmethod
    def _candidate(
        entry: TunedEntry, shape: tuple[int, int, int], problem: Problem, programs: int
    ) -> Candidate:
        # A group taller than the problem's tile rows walks them as group_m = rows does.
        config = wave_matched_split(effective_group_m(entry.config, problem), shape, problem)
        ratio = rounds_ratio(entry.config, config, shape, problem, programs)
        if not across_alignment(shape, problem):
            return Candidate(entry, config, ratio)
        # see UNALIGNED_SLOWDOWN
        entry = dataclasses.replace(entry, variant=PADDED_TWIN.get(entry.variant, entry.variant))
        if entry.variant in PADS_ROWS:
            return Candidate(entry, config, ratio, copy_ms=pad_copy_ms(problem))
        return Candidate(entry, config, ratio, slowdown=UNALIGNED_SLOWDOWN)

    def _choose(
        self, m: int, n: int, k: int, dtype: torch.dtype, gpu_name: str, programs: int, objective: str
    ) -> Choice:
        shapes = self._table.get((gpu_name, dtype_name(dtype)))
        if not shapes:
            if gpu_name not in self._warned:
                self._warned.add(gpu_name)
                message = f"no tuned configs for {gpu_name} ({dtype_name(dtype)}); using torch.matmul"
                warnings.warn(f"kernels.matmul: {message}", stacklevel=4)
            return Choice(LIBRARY, LIBRARY_CONFIG, None)
        problem = Problem(m, n, k, dtype)
        aligned, bucket = unaligned_rows(problem) is None, shape_bucket(m, n, k)

        def nearest(candidates: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
            return sorted(
                candidates,
                key=lambda s: (
                    (unaligned_rows(Problem(*s, dtype)) is None) != aligned,
                    shape_bucket(*s) != bucket,
                    shape_distance(s, (m, n, k)),
                ),
            )

        def first_decision(order: list[tuple[int, int, int]]) -> Decision | None:
            for shape in order:
                decision = self._decide_at(shape, shapes[shape], problem, programs, objective)
                if decision is not None:
                    return decision
            return None

        if aligned:
            decision = first_decision(nearest(aligned_shapes(list(shapes), dtype)))
            return decision.choice if decision is not None else Choice(LIBRARY, LIBRARY_CONFIG, None)
        decision = first_decision(nearest(list(shapes)))
        if decision is None:
            return Choice(LIBRARY, LIBRARY_CONFIG, None)
        tuned = decision.choice.tuned_shape
        if across_alignment(tuned, problem) or not unmeasured_padding(shapes[tuned]):
            return decision.choice
        # The unaligned shape never ran TMA on padded copies: the nearest aligned shape's TMA entries,
        # served so, are its rival.
        padded = first_decision(nearest(aligned_shapes(list(shapes), dtype)))
        if padded is not None and padded.choice.variant in PADS_ROWS and padded.cost < decision.cost:
            return padded.choice
        return decision.choice

    def _decide_at(
        self,
        shape: tuple[int, int, int],
        entries: list[TunedEntry],
        problem: Problem,
        programs: int,
        objective: str,
    ) -> Decision | None:
        """What the tuned shape decides for the problem, with its estimated cost there; None where it
        decides nothing (no entry this program can serve or weigh)."""
        libraries = [library_rival(e, shape, problem) for e in entries if e.variant == LIBRARY]

        def library_decision(ratio: float) -> Decision:
            best = min((rival.at(ratio) for rival in libraries), key=lambda r: cost(r, objective))
            return Decision(Choice(best.entry.variant, LIBRARY_CONFIG, shape), cost(best, objective))

        candidates = [
            self._candidate(e, shape, problem, programs) for e in entries if tile_variant(e) is not None
        ]
        for candidate in serving_order(candidates, objective):
            if tile_variant(candidate.entry).space.prune(candidate.config, problem) is not None:
                continue
            # Every library entry of the shape is a rival (see the module's docstring for where
            # several come from): the candidate must beat each.
            if all(beats_library(candidate, library, objective) for library in libraries):
                return Decision(
                    Choice(candidate.entry.variant, candidate.config, shape), cost(candidate, objective)
                )
            return library_decision(candidate.ratio)
        if libraries:  # the library alone measured here, or no candidate legal for the problem
            return library_decision(problem.m * problem.n * problem.k / math.prod(shape))
        return None

    def _device(self, device: torch.device) -> tuple[str, int, bool]:
        found = self._devices.get(device)
        if found is None:
            found = self._devices[device] = (
                device_name(device),
                multiprocessor_count(device),
                runs_triton(device),
            )
        return found

    def run(self, a: torch.Tensor, b: torch.Tensor, objective: str) -> torch.Tensor:
        """The 2-D product of operands kernels/op.py checked (one dtype of `kernels.space.DTYPES`, one
        device, M, N and K above 0): the chosen variant, or torch.matmul where the library won (on
        padded copies where its win was carried across alignment: `LIBRARY_CALLS`) or Triton cannot
        run."""
        choice = self._choice(a, b, objective)
        if choice is None:
            return torch.matmul(a, b)
        library = LIBRARY_CALLS.get(choice.variant)
        if library is not None:
            return library(a, b)
        try:
            return get_variant(choice.variant).launch(a, b, choice.config)
        except TmaUnsupported:  # a layout the shape could not tell (a strided view): the library
            return torch.matmul(a, b)

    def route(self, a: torch.Tensor, b: torch.Tensor, objective: str):
        """What serves the 2-D product of operands like a and b (`run`'s operands) once decided, a callable
        (a, b) -> a @ b: the library's call where it serves (`LIBRARY_CALLS`), torch.matmul where
        Triton cannot run, else the chosen
        launcher bound to its config, and, where its variant binds one and `run` compiled it, to its
        compiled kernel, grid, sizes, strides and constexprs (`kernels.launching.bound_launch`)."""
        choice = self._choice(a, b, objective)
        if choice is None:
            return torch.matmul
        library = LIBRARY_CALLS.get(choice.variant)
        if library is not None:
            return library
        launch = ConfiguredLaunch(get_variant(choice.variant).launch, choice.config)
        return bound_launch(choice.variant, a, b, choice.config, launch) or launch

    def objective_matters(self, a: torch.Tensor, b: torch.Tensor) -> bool:
        """Whether the 2-D product of operands like a and b is served differently for the eager and the
        kernel objective, the two defaults (`default_objective`): where it is not, kernels/op.py's
        decided call need not ask whether the stream captures a CUDA graph (0.9 us a call, H100 host)."""
        eager, kernel = (self._choice(a, b, objective) for objective in OBJECTIVES)
        return eager is not None and (eager.variant, eager.config) != (kernel.variant, kernel.config)

    def _choice(self, a: torch.Tensor, b: torch.Tensor, objective: str) -> Choice | None:
        """`choose` for the 2-D product of a and b on their device; None where Triton cannot run there."""
        gpu_name, programs, triton_runs = self._device(a.device)
        if not triton_runs:
            return None
        (m, k), n = a.shape, b.shape[1]
        gpu = self.gpu_name or gpu_name
        return self.choose(m, n, k, a.dtype, gpu, programs=programs, objective=objective)

    def decide(self, a, b, out, objective, key) -> torch.Tensor:
        """torch.matmul(a, b, out=out), the 2-D products through `run` (kernels/op.py's DropIn calls it
        where no route serves the call)."""
        objective = self.objective if objective is None else check_objective(objective)
        return op.matmul(self, a, b, out=out, objective=objective, key=key)

    default_objective = staticmethod(default_objective)


class ConfiguredLaunch:
    """A variant's launcher at one config, called as (a, b) -> a @ b; torch.matmul for a call whose
    layout TMA cannot describe (`Dispatcher.run`'s rule)."""

    __slots__ = ("config", "launcher")

    def __init__(self, launcher, config: MatmulConfig) -> None:
        self.launcher, self.config = launcher, config

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        try:
            return self.launcher(a, b, self.config)
        except TmaUnsupported:
            return torch.matmul(a, b)


def runs_triton(device: torch.device) -> bool:
    """Whether Triton kernels run on the device: a GPU, or the CPU under TRITON_INTERPRET=1 (Triton's own
    switch, read as Triton reads it)."""
    if device.type == "cpu":
        return bool(triton.knobs.runtime.interpret)
    return device.type == "cuda"  # ROCm's GPUs are "cuda" devices to torch too


class Matmul(op.DropIn):
    """`kernels.matmul`: a Dispatcher loaded on first use from `load(path)` or $FARM_BEST_CONFIGS.

    The torch op names it, not its dispatcher (`op_id`): a function that torch.compile traces before
    anything was loaded runs the op, and the op loads the dispatcher when it first runs, outside the
    trace (building one inside it is a graph break)."""

    def __init__(self) -> None:
        self._dispatcher: Dispatcher | None = None
        self.op_id = op.register(self)
        # the loaded dispatcher's routes, an attribute and not a property: a decided call reads it, and
        # each Python call it makes costs host time (kernels/op.py); none kept before the first load
        self.routes = op.Routes()

    def load(
        self, path: str | Path, *, gpu_name: str | None = None, objective: str | None = None
    ) -> Dispatcher:
        return self._use(Dispatcher.load(path, gpu_name=gpu_name, objective=objective))

    @property
    def dispatcher(self) -> Dispatcher:
        if self._dispatcher is None:
            path = os.environ.get(BEST_CONFIGS_ENV)
            self._use(Dispatcher.load(path) if path else Dispatcher(None))
        return self._dispatcher

    def _use(self, dispatcher: Dispatcher) -> Dispatcher:
        self._dispatcher, self.routes = dispatcher, dispatcher.routes
        return dispatcher

    def run(self, a: torch.Tensor, b: torch.Tensor, objective: str) -> torch.Tensor:
        return self.dispatcher.run(a, b, objective)

    def route(self, a: torch.Tensor, b: torch.Tensor, objective: str):
        return self.dispatcher.route(a, b, objective)

    def objective_matters(self, a: torch.Tensor, b: torch.Tensor) -> bool:
        return self.dispatcher.objective_matters(a, b)

    default_objective = staticmethod(default_objective)

    def decide(self, a, b, out, objective, key) -> torch.Tensor:
        """torch.matmul(a, b, out=out) through the loaded dispatcher; `objective` as Dispatcher's. The
        dispatcher is not read here: under torch.compile its lazy load would break the graph."""
        if objective is not None:
            check_objective(objective)
        elif self._dispatcher is not None:
            objective = self._dispatcher.objective
        return op.matmul(self, a, b, out=out, objective=objective, key=key)


matmul = Matmul()
