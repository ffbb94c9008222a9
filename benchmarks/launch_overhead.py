"""Host time to queue one call, each built-in variant beside torch.matmul: what an eager caller waits for.

    python benchmarks/launch_overhead.py --out docs/results/launch_overhead.csv   # --shapes 512x512x32768 ...

An eager caller waits for the longer of a call's GPU time and its launcher's host time (docs/design.md,
"What an eager caller waits for"), so under about 100 us of kernel the launcher decides. For each shape
and variant (the configs in VARIANTS), one row: how many GPU kernels a call runs (`kernels_per_call`,
counted by torch.profiler over one call: the variant's own kernels and any memset or cast kernel its
launcher queues), the host time to queue one call (`host_us`: `--calls` calls back to back,
synchronised before and after) and torch.matmul's at the same shape (`torch_matmul_host_us`), in
`--passes` pairs of passes that alternate the two (`tools.gpu_methods.paired_host_us`: each the best
pass; `ratio` the median of the pairs' ratios, so each ratio compares one host state: the H200 hosts'
host time moves by up to 2x between processes and minutes). The targets: a launcher of one kernel at
most 1.5x torch.matmul's host time, of several at most 2.5x (`ratio` column). Kernels are counted once
every host time is taken: a profiler session leaves CUPTI loaded in the process. Each variant's result
is checked against fp64 (`ok`). The printout also splits one launch into its layers (an allocation, a
memset, a cast, Triton's JIT path, a compiled kernel called directly), where the host time goes.

Three more columns say what lies above Triton and what the drop-in adds: `triton_floor_us`, the
variant's compiled kernels called with the arguments its launcher last prepared through Triton's
compiled-kernel runner (no allocation, memset, cast or key: the least a launch through Triton's own
launcher costs), `direct_floor_us`, the same kernels as `kernels.launching.DirectCalls` calls them,
below Triton's runner (`below_triton`), and `kernels_matmul_host_us`, the same product through a
`kernels.Dispatcher` whose best-configs file serves that variant at that config (its decided route,
kernels/op.py), blank where the dispatcher would not serve it (the config is illegal there). Both
are taken in the same rotation of passes as `host_us` and torch.matmul's. Rows of variant `cublas`
are kernels.matmul serving torch.matmul (a file whose entry is cuBLAS's) at 64^3, 1024^3, a 3-D A and
a 1-D one (`CUBLAS_SHAPES`): what the drop-in adds to torch.matmul where the library serves. The
printout's first line names the route key in use (kernels/route_key.py: C++ where built, else Python).

`--profile VARIANT...` instead prints where those variants' host time goes at the first shape: a
cProfile of the launcher's calls and of kernels.matmul's (`profile`).

Writes --out and its provenance sidecar (tools/provenance.py). Time: one compile per variant and shape,
then the calls: about two minutes on an H200 for the three default shapes.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from kernels import MatmulConfig
from tools.gpu_methods import host_us, rotated_host_us
from tools.provenance import write_results

COLUMNS = (
    "shape", "variant", "config", "kernels_per_call", "host_us", "torch_matmul_host_us", "ratio",
    "triton_floor_us", "direct_floor_us", "kernels_matmul_host_us", "ok",
)  # fmt: skip
# kernels.matmul serving cuBLAS: (label, A's shape, B's shape)
CUBLAS_SHAPES = (("64x64x64", (64, 64), (64, 64)), ("1024x1024x1024", (1024, 1024), (1024, 1024)),
                 ("8x256x1024@1024x1024", (8, 256, 1024), (1024, 1024)),
                 ("1024@1024x1024", (1024,), (1024, 1024)))  # fmt: skip
# What the printout's closing table shows of each row (the CSV holds all)
SHORT = (
    "shape",
    "variant",
    "host_us",
    "torch_matmul_host_us",
    "triton_floor_us",
    "direct_floor_us",
    "kernels_matmul_host_us",
    "ok",
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["512x512x32768", "3072x3072x3072", "2000x3000x1500"])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--passes", type=int, default=7, help="pairs of passes (variant, torch.matmul)")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "launch_overhead.csv"))
    parser.add_argument(
        "--profile", nargs="+", choices=sorted(VARIANTS), metavar="VARIANT",
        help="instead: where these variants' host time goes at the first shape (prints, writes nothing)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.profile:
        for name in args.profile:
            profile(name, args.shapes[0], args.calls)
        return

    import triton

    from kernels import route_key

    key = "C++" if route_key.built_key() else "Python"
    versions = f"triton {triton.__version__}, torch {torch.__version__}"
    print(f"{torch.cuda.get_device_name()}, {versions}, route key {key}")
    rows = []
    for shape in args.shapes:
        for name, us in layers(shape, args.calls):
            print(f"{shape:>15} {us:8.1f} us  layer: {name}")
        rows += variants(shape, args.calls, args.passes)
    rows += library_rows(args.calls, args.passes)
    for row in rows:  # once every host time is taken: a profiler session leaves CUPTI loaded
        row["kernels_per_call"] = kernels_per_call(row.pop("call"))
    write_results(args.out, COLUMNS, rows)
    print(f"wrote {args.out}")
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in SHORT]
    print("  ".join(c.rjust(w) for c, w in zip(SHORT, widths)))
    for r in rows:
        print("  ".join(str(r.get(c, "")).rjust(w) for c, w in zip(SHORT, widths)))


VARIANTS = {
    "tiled": MatmulConfig(128, 128, 64, num_warps=8, num_stages=3),
    "grouped": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "grouped_pad": MatmulConfig(128, 64, 32, group_m=8, num_warps=4, num_stages=2),
    "splitk": MatmulConfig(128, 128, 64, split_k=8, num_warps=4, num_stages=4),
    "splitk_det": MatmulConfig(128, 128, 64, split_k=8, num_warps=4, num_stages=4),
    "streamk": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "streamk_hybrid": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "persistent_tma": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "persistent_tma_pad": MatmulConfig(128, 128, 64, group_m=8, num_warps=8, num_stages=3),
    "persistent_tma_bands": MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3),
    "splitk_tma": MatmulConfig(128, 128, 64, split_k=8, num_warps=4, num_stages=4),
    "splitk_tma_reduce": MatmulConfig(128, 128, 64, split_k=8, num_warps=4, num_stages=4),
    "splitk_tma_cluster": MatmulConfig(128, 256, 64, split_k=8, num_warps=8, num_stages=6),
}


def _operands(shape: str) -> tuple[int, int, int, torch.Tensor, torch.Tensor]:
    m, n, k = (int(x) for x in shape.split("x"))
    a = torch.randn((m, k), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((k, n), device="cuda", dtype=torch.bfloat16)
    return m, n, k, a, b


def kernels_per_call(fn) -> int:
    """GPU kernels one call of `fn` runs (after a first call that may compile), by torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def best_file_serving(variant: str, cfg: MatmulConfig, m: int, n: int, k: int, dtype: torch.dtype):
    """A kernels.Dispatcher whose best-configs file holds one entry, `variant` at cfg for this shape on
    this GPU (no library entry: it serves wherever the config is legal)."""
    import tempfile

    from kernels.dispatch import Dispatcher, device_name
    from kernels.space import dtype_name
    from kernels.tuned import TunedConfigs, TunedEntry

    gpu = device_name(torch.device("cuda"))
    entry = TunedEntry(gpu, dtype_name(dtype), m, n, k, variant, 0.01, cfg)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "best.json"
        TunedConfigs([entry]).save(path)
        return Dispatcher.load(path)


def serves(dispatcher, variant: str, a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the dispatcher's decision for a @ b is `variant` (an illegal config falls to cuBLAS)."""
    from kernels.dispatch import default_objective, device_name
    from kernels.schedule import multiprocessor_count

    a2 = a.reshape(-1, a.shape[-1])
    choice = dispatcher.choose(
        a2.shape[0], b.shape[-1], a2.shape[1], a.dtype, device_name(a.device),
        programs=multiprocessor_count(a.device), objective=default_objective(a.device),
    )  # fmt: skip
    return choice.variant == variant


def kernel_floors(call) -> tuple[Callable[[], None], Callable[[], None]] | None:
    """The compiled kernels `call` (a launcher's call) queues, called with the arguments it prepared for
    them, each through Triton's runner (Triton's floor) and as `DirectCalls` calls it, below Triton's
    runner where kernels.launching.below_triton could (the farm's floor): every runner of its next
    call, recorded once, replayed in order. None where it queues none (the interpreter)."""
    from kernels.launching import DirectCalls

    recorded, launch = [], DirectCalls.launch

    def spy(self, key, grid, args, constexprs, **options):
        known = self.table.get(key)
        if known is not None:
            recorded.append((known[0], (*args, *known[1])))
        return launch(self, key, grid, args, constexprs, **options)

    call()  # compiles: the table holds its runners after
    DirectCalls.launch = spy
    try:
        call()
    finally:
        DirectCalls.launch = launch
    through_triton = [(getattr(runner, "triton_runner", runner), args) for runner, args in recorded]

    def replay(runs) -> Callable[[], None]:
        def floor() -> None:
            for runner, args in runs:
                runner(*args)

        return floor

    return (replay(through_triton), replay(recorded)) if recorded else None


def _rotated(fns: dict[str, Callable], calls: int, passes: int) -> dict[str, float]:
    """Each fn's best host us a call from `passes` rotations (tools.gpu_methods.rotated_host_us), and
    `ratio`: the median over rotations of the first fn's over torch.matmul's (the second)."""
    import statistics

    names = list(fns)
    times = rotated_host_us(list(fns.values()), calls, passes)
    result = {name: round(min(t), 1) for name, t in zip(names, times)}
    result["ratio"] = round(statistics.median(x / y for x, y in zip(times[0], times[1])), 2)
    return result


def variants(shape: str, calls: int, passes: int) -> list[dict]:
    """One row per variant at `shape`: its host time and torch.matmul's beside it, and its call (`call`)."""
    from kernels import check_accuracy, get_variant, reference_matmul
    from kernels.persistent_tma import TmaUnsupported

    _, _, k, a, b = _operands(shape)
    a2, b2 = torch.randn_like(a), torch.randn_like(b)
    ref = reference_matmul(a2, b2)
    rows = []
    for name, cfg in VARIANTS.items():
        launcher = get_variant(name).launch
        call = lambda la=launcher, vc=cfg: la(a, b, vc)
        try:
            call()
        except TmaUnsupported as exc:
            print(f"skip {name} at {shape}: {exc}")
            continue
        fns = {"host_us": call, "torch_matmul_host_us": lambda: torch.matmul(a, b)}
        # through the launcher itself: a kept binding (kernels.launching.KeptBindings) would record nothing
        floors = kernel_floors(functools.partial(inspect.unwrap(launcher), a, b, cfg))
        if floors is not None:
            fns["triton_floor_us"], fns["direct_floor_us"] = floors
        dispatcher = best_file_serving(name, cfg, *(int(x) for x in shape.split("x")), a.dtype)
        if serves(dispatcher, name, a, b):
            fns["kernels_matmul_host_us"] = lambda d=dispatcher: d(a, b)
        ok = check_accuracy(launcher(a2, b2, cfg), ref, a.dtype, k).ok
        if "kernels_matmul_host_us" in fns:
            ok = ok and check_accuracy(dispatcher(a2, b2), ref, a.dtype, k).ok
        timed = _rotated(fns, calls, passes)
        rows.append({"shape": shape, "variant": name, "config": cfg.key, **timed, "ok": ok, "call": call})
    return rows


def library_rows(calls: int, passes: int) -> list[dict]:
    """kernels.matmul where its file serves cuBLAS (`CUBLAS_SHAPES`), beside torch.matmul."""
    from kernels import LIBRARY_CONFIG, check_accuracy, reference_matmul

    rows = []
    for label, a_shape, b_shape in CUBLAS_SHAPES:
        a = torch.randn(a_shape, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(b_shape, device="cuda", dtype=torch.bfloat16)
        m, k = a.numel() // a.shape[-1], a.shape[-1]
        dispatcher = best_file_serving("cublas", LIBRARY_CONFIG, m, b.shape[1], k, a.dtype)
        assert serves(dispatcher, "cublas", a, b)
        ok = check_accuracy(dispatcher(a, b), reference_matmul(a, b), a.dtype, k).ok
        call = lambda d=dispatcher, a=a, b=b: d(a, b)
        timed = _rotated(
            {"host_us": call, "torch_matmul_host_us": lambda a=a, b=b: torch.matmul(a, b)}, calls, passes
        )
        rows.append({"shape": label, "variant": "cublas", "config": LIBRARY_CONFIG.key, **timed,
                     "kernels_matmul_host_us": timed["host_us"], "ok": ok, "call": call})  # fmt: skip
    return rows


def profile(variant: str, shape: str, calls: int, top: int = 12) -> None:
    """Where a call's host time goes: cProfile over `calls` calls of the variant's launcher and of
    kernels.matmul serving it (its decided route), each after two calls (the compile, the decision):
    the Python calls a call and the functions of most own time. Profiled time is inflated (every Python
    call is counted); the counts and the order are what it is for."""
    import cProfile
    import pstats

    from kernels import get_variant

    m, n, k, a, b = _operands(shape)
    cfg = VARIANTS[variant]
    launcher = get_variant(variant).launch
    fns = {"launcher": lambda: launcher(a, b, cfg)}
    dispatcher = best_file_serving(variant, cfg, m, n, k, a.dtype)
    if serves(dispatcher, variant, a, b):
        fns["kernels.matmul"] = lambda: dispatcher(a, b)
    for label, fn in fns.items():
        fn(), fn()
        torch.cuda.synchronize()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(calls):
            fn()
        profiler.disable()
        torch.cuda.synchronize()
        stats = pstats.Stats(profiler)
        print(f"== {variant} at {shape}, {label}: {stats.total_calls / calls:.1f} Python calls a call")
        stats.sort_stats("tottime").print_stats(top)
    routes = dispatcher.routes
    print(f"kernels.matmul's routes: {[type(r).__name__ for r in routes.values()]}, served {routes.served}")


def layers(shape: str, calls: int) -> list[tuple[str, float]]:
    """Host us a call of each layer a launcher is made of, at one shape (split-K's kernel as the example)."""
    import triton

    from kernels.launching import below_triton
    from kernels.scratch import zeroed_scratch
    from kernels.splitk import _splitk_kernel
    from kernels.tile import pointer_layout

    m, n, k, a, b = _operands(shape)
    device = a.device
    c32 = torch.zeros((m, n), device=device, dtype=torch.float32)
    cfg = VARIANTS["splitk"]
    grid = (triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n) * cfg.split_k,)
    strides, aligns = pointer_layout(a, b, c32)
    slots, counters = zeroed_scratch(grid[0] // cfg.split_k, cfg.block_m, cfg.block_n, device)
    params = {
        "a_ptr": a, "b_ptr": b, "c_ptr": c32, "M": m, "N": n, "K": k,
        "ws_ptr": slots, "counts_ptr": counters,
        "stride_am": strides[0], "stride_ak": strides[1], "stride_bk": strides[2],
        "stride_bn": strides[3], "stride_cm": strides[4], "stride_cn": strides[5], "stride_ck": 0,
        "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "GROUP_M": 1,
        "SPLIT_K": cfg.split_k, "ATOMIC": True, "INPUT_PRECISION": "ieee",
        **dict(zip(("A_ALIGN", "B_ALIGN", "C_ALIGN"), aligns, strict=True)),
    }  # fmt: skip
    options = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    compiled = _splitk_kernel[grid](**params, **options)
    direct = compiled[(grid[0], 1, 1)]  # the direct path takes all three grid dimensions
    ordered = [params[name] for name in _splitk_kernel.arg_names]
    below = below_triton(compiled, (grid[0], 1, 1), tuple(ordered))
    rows = [
        ("torch.empty (m, n) bf16", lambda: torch.empty((m, n), device=device, dtype=torch.bfloat16)),
        ("torch.zeros (m, n) fp32", lambda: torch.zeros((m, n), device=device, dtype=torch.float32)),
        ("fp32 -> bf16 cast (m, n)", lambda: c32.to(torch.bfloat16)),
        ("_splitk_kernel[grid](...) (JIT path)", lambda: _splitk_kernel[grid](**params, **options)),
        ("CompiledKernel[grid](*args) (Triton's runner)", lambda: direct(*ordered)),
        ("kernels.launching.below_triton (C launch)", lambda: below(*ordered)),
        ("torch.matmul (cuBLAS)", lambda: torch.matmul(a, b)),
    ]  # fmt: skip
    return [(name, host_us(fn, calls, passes=1)) for name, fn in rows]


if __name__ == "__main__":
    main()
