"""The library bench: its machinery (tools/library_bench.py: the quick tuning's configs, its rounds and
graphs, what a row holds), its table's merge and verdicts (tools/library_table.py), and its command
(benchmarks/vs_libraries.py, run as a script: tests import no benchmark). Kernels run under the
interpreter on tiny shapes; the timings are stand-ins, so the tests say which call each time came from."""

import functools
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels.sizes import cdiv
from tools.library_bench import BenchRun
from tools.library_table import read_csv

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "vs_libraries.py"


def bench_command(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """benchmarks/vs_libraries.py run as its users run it, its output captured."""
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def test_the_library_bench_quick_tunes_a_problem_shorter_than_its_group():
    """benchmarks/vs_libraries.py's quick configs carry group_m 8; at 333x4444x5555 (three tile rows of
    128) the rules refuse that group, so visit 36 had no own Triton time there. They walk the rows
    as group_m 3, as planning and the dispatcher do."""
    from tools.library_bench import quick_configs

    configs = list(quick_configs("persistent_tma_pad", 333, 4444, 5555, torch.bfloat16))
    assert configs and {c.group_m for c in configs} == {3}
    assert all(c.group_m == 8 for c in quick_configs("persistent_tma_pad", 4097, 4097, 4097, torch.bfloat16))


def test_the_library_bench_splits_k_through_tma_on_the_skinny_k_class_only():
    """`splitk_tma` and `splitk_tma_reduce` join the quick tuning on skinny-K shapes, each tile's split
    filling one wave of 132 programs (and half that): 640x640 in 128x128 tiles is 25 tiles, split 5
    (visit 88's best) and 2. Not at decode (M = 16), where its host time decided the eager times
    (visit 83)."""
    from tools.library_bench import quick_configs, wave_splits

    assert wave_splits(25) == (2, 5) and wave_splits(64) == (1, 2) and wave_splits(200) == (1,)
    configs = list(quick_configs("splitk_tma", 640, 640, 24576, torch.bfloat16))
    assert {c.split_k for c in configs if (c.block_m, c.block_n) == (128, 128)} == {2, 5}
    assert all(c.split_k * cdiv(640, c.block_m) * cdiv(640, c.block_n) <= 132 for c in configs)
    # the tuning passes its device's SM count: half the SMs, half the split
    half = list(quick_configs("splitk_tma", 640, 640, 24576, torch.bfloat16, programs=66))
    assert {c.split_k for c in half if (c.block_m, c.block_n) == (128, 128)} == {1, 2}
    # 6 stages of 128x128x64 (visit 97's best) are within the space's shared-memory rule, C staged too
    assert {(c.block_m, c.num_warps) for c in configs if c.num_stages == 6} == {(128, 4), (128, 8)}
    for variant in ("splitk_tma", "splitk_tma_reduce"):
        assert list(quick_configs(variant, 640, 640, 24576, torch.float16)), variant
        for shape in [(16, 4096, 4096), (128, 4096, 14336), (4096, 4096, 4096)]:
            assert list(quick_configs(variant, *shape, torch.bfloat16)) == [], variant


def test_the_library_bench_fills_a_wave_of_clusters_on_skinny_k():
    """A `splitk_tma_cluster` program is two CTAs: its splits fill one wave of 66 clusters on 132 SMs
    (512x512 in 128x256 tiles: 8 tiles, split 8 as visit 101's best, and 4), never split 1."""
    from tools.library_bench import quick_configs

    configs = list(quick_configs("splitk_tma_cluster", 512, 512, 32768, torch.bfloat16))
    assert {c.split_k for c in configs if (c.block_m, c.block_n) == (128, 256)} == {4, 8}
    assert {c.split_k for c in configs if (c.block_m, c.block_n) == (128, 128)} == {2, 4}
    assert all(2 * c.split_k * cdiv(512, c.block_m) * cdiv(512, c.block_n) <= 132 for c in configs)
    # 640x640 in 128x128 tiles: 25 tiles, 66 clusters fill split 2; its half, split 1, is not a cluster's
    at_640 = quick_configs("splitk_tma_cluster", 640, 640, 24576, torch.bfloat16)
    assert {c.split_k for c in at_640 if (c.block_m, c.block_n) == (128, 128)} == {2}
    assert list(quick_configs("splitk_tma_cluster", 4096, 4096, 4096, torch.bfloat16)) == []


def test_the_library_bench_quick_tunes_a_short_k_in_short_k_steps():
    """K = 71: `grouped` tries BLOCK_K 32 (three masked steps), not the large tiles' 64."""
    from tools.library_bench import quick_configs

    assert {c.block_k for c in quick_configs("grouped", 495, 5333, 71, torch.bfloat16)} == {32}
    assert {c.block_k for c in quick_configs("grouped", 3000, 5000, 1000, torch.bfloat16)} == {64}


def test_the_library_bench_verdicts_take_the_issues_classes_over_every_row(tmp_path):
    """Skinny-K and ragged are the issue's classes, held-out rows included: 768x768x12288 (held out)
    is skinny-K, 128x4096x14336 is not; 2000x3000x1500 (held out, N not a multiple of 16) is ragged,
    the aligned 640x640x24576 of the ragged suite is not. Each line names its worst row."""
    header = "m,n,k,dtype,heldout,ours_ms,triton_ms,cublas_ms,inductor_ms,ours_variant,ours_config\n"
    table = tmp_path / "t.csv"
    table.write_text(
        header
        + "512,512,32768,bfloat16,0,1,1.25,1,1,cublas,x\n"  # skinny-K 0.8
        + "768,768,12288,bfloat16,1,1,2.0,1,1,cublas,x\n"  # skinny-K, held out: 0.5
        + "128,4096,14336,bfloat16,0,1,4.0,1,1,cublas,x\n"  # neither: 0.25
        + "640,640,24576,bfloat16,0,1,1.0,1,1,cublas,x\n"  # skinny-K, not ragged: 1.0
        + "3000,5000,1000,bfloat16,0,1,1.1,1,1,cublas,x\n"  # ragged 0.91
        + "2000,3000,1500,bfloat16,1,1,1.6,1,1,cublas,x\n"  # ragged, held out: 0.625
    )
    out = bench_command("verdicts", str(table)).stdout
    assert "skinny-K:        min 0.500 at 768x768x12288 bfloat16 (goal >= 1.0, 3 rows)" in out
    assert "ragged:          min 0.625 at 2000x3000x1500 bfloat16 (goal >= 0.85, 2 rows)" in out
    assert "squares >= 2048: no rows" in out


def test_the_library_bench_merge_takes_a_shapes_later_row_in_place(tmp_path):
    """`vs_libraries.py merge old.csv new.csv`: a shape and dtype measured again replaces its row
    where it stood (the verdicts count each row once); new shapes come after."""
    header = "m,n,k,dtype,heldout,ours_ms,triton_ms,cublas_ms,inductor_ms,ours_variant,ours_config\n"
    old, new = tmp_path / "old.csv", tmp_path / "new.csv"
    old.write_text(header + "1,2,3,bfloat16,0,1.0,1,1,1,cublas,x\n4,5,6,bfloat16,0,2.0,2,2,2,cublas,x\n")
    new.write_text(header + "1,2,3,bfloat16,0,0.5,1,1,1,grouped,y\n1,2,3,float16,0,3.0,3,3,3,cublas,x\n")
    rows = read_csv([str(old), str(new)])
    assert [(r.m, r.dtype, r.ours_ms, r.ours_variant) for r in rows] == [
        (1, "bfloat16", 0.5, "grouped"),
        (4, "bfloat16", 2.0, "cublas"),
        (1, "float16", 3.0, "cublas"),
    ]


def test_the_library_bench_verdicts_write_nothing_and_merge_needs_an_out(tmp_path):
    """`verdicts` only reads; `merge` without --out is refused (it once defaulted to the kept table,
    so reading the verdicts of another file overwrote docs/results/vs_libraries_h200.csv)."""
    kept = tmp_path / "docs" / "results" / "vs_libraries_h200.csv"
    kept.parent.mkdir(parents=True)
    header = "m,n,k,dtype,heldout,ours_ms,triton_ms,cublas_ms,inductor_ms,ours_variant,ours_config\n"
    kept.write_text(header + "4096,4096,4096,bfloat16,0,2.0,2,2,2,cublas,x\n")
    other = tmp_path / "other.csv"
    other.write_text(header + "4096,4096,4096,bfloat16,0,1.0,1,1.1,1.2,grouped,y\n")
    assert "tuned suites: 1.100" in bench_command("verdicts", str(other), cwd=tmp_path).stdout
    assert kept.read_text().endswith("cublas,x\n")
    refused = bench_command("merge", str(other), cwd=tmp_path)
    assert refused.returncode != 0
    assert "--out" in refused.stderr and kept.read_text().endswith("cublas,x\n")
    assert bench_command("merge", str(kept), str(other), "--out", str(kept), cwd=tmp_path).returncode == 0
    assert kept.read_text().endswith("grouped,y,nan,nan,nan,nan,nan,,\n")  # no GPU times or state here


def test_the_library_bench_times_its_rivals_in_rotated_rounds_under_a_warming_gpu():
    """Two measures of one kernel on a GPU slowing 2% a measure: back to back the later one reads
    slower (the bias visit 73 saw); in rotated rounds their medians agree."""
    from tools.library_bench import interleaved_medians

    clock, order = [1.0], []

    def measure(name: str):
        def timed() -> float:
            order.append(name)
            clock[0] *= 1.02
            return clock[0]

        return timed

    medians = interleaved_medians({"ours": measure("ours"), "cublas": measure("cublas")}, rounds=5)
    assert order == ["ours", "cublas", "cublas", "ours", "ours", "cublas", "cublas", "ours", "ours", "cublas"]
    # one step of the drift apart at most; back to back (five of ours, then five of cuBLAS) 1.02**5
    assert medians["ours"] == pytest.approx(medians["cublas"], rel=0.021)


def test_the_library_bench_refuses_no_rounds():
    stop = bench_command("--rounds", "0", "--device", "cpu")
    assert stop.returncode == 2 and "--rounds and --rep-ms must be at least 1" in stop.stderr


def test_the_library_bench_compiles_inductor_before_it_tunes(tmp_path, monkeypatch, device):
    """After torch.compile a Python launcher's host time rose 31.7 -> 44.7-54.7 us a call (visit 90),
    and do_bench reads host time below about 50 us of GPU: the tuning must pick its winner in the
    state the rounds time it in, after Inductor's compile."""
    import tools.library_bench as vl

    monkeypatch.setattr(vl, "QUICK", {"persistent_tma": lambda m, n, k: ([(16, 32, 16, 4, 2)], 2, (1,))})
    events = []

    def fake_bench(fn, rep_ms=100):
        fn()
        events.append("tuning" if rep_ms == 100 else "round")
        return 1.0

    def fake_inductor(a, b):
        events.append("compile")
        return lambda: a @ b

    monkeypatch.setattr(vl, "bench", fake_bench)
    monkeypatch.setattr(vl, "inductor_compiled", fake_inductor)
    out = tmp_path / "tiny.csv"
    vl.run(BenchRun({"tiny": [(32, 48, 64)]}, ["bfloat16"], out, device=str(device), rounds=1))
    # the library's entry and the one quick config are the tuning's timings; four measures a round
    assert events == ["compile", "tuning", "tuning", "round", "round", "round", "round"]
    (row,) = read_csv([str(out)])
    assert row.inductor_ms == 1.0


def test_the_library_bench_row_holds_the_rounds_times_not_the_tunings(tmp_path, monkeypatch, device):
    """triton_ms is the tuning's winner timed again in the rounds: the tuning's own time (the least
    of a dozen noisy ones) is biased low."""
    import tools.library_bench as vl

    monkeypatch.setattr(vl, "QUICK", {"persistent_tma": lambda m, n, k: ([(16, 32, 16, 4, 2)], 2, (1,))})
    rounds = []

    def fake_bench(fn, rep_ms=100):  # tuning times at the default rep, the rounds at --rep-ms
        fn()
        if rep_ms == 100:
            return 1.0
        rounds.append(fn)
        return 7.0

    graphed = []

    def fake_graph_times_ms(calls, device, rounds):  # GPU time alone, the calls' replays together
        if "cublas" in calls:  # the rounds' (the tuning times each config alone)
            graphed.append((set(calls), rounds))
        return {name: 0.5 + i for i, name in enumerate(calls)}

    # the GPU's state read around the rounds: the lower clock and every throttle reason seen
    from farm.gpu import GpuState

    states = iter([GpuState(1980, 40, 0), GpuState(1410, 61, 0x4)])
    monkeypatch.setattr(vl, "bench", fake_bench)
    monkeypatch.setattr(vl, "graph_times_ms", fake_graph_times_ms)
    monkeypatch.setattr(vl, "gpu_state", lambda device: next(states))
    out = tmp_path / "tiny.csv"
    # the test's device: on a GPU machine Triton's interpreter is off, and a CPU tensor fails every config
    vl.run(
        BenchRun({"tiny": [(32, 48, 64)]}, ["bfloat16"], out, no_inductor=True, rounds=3, device=str(device))
    )
    (row,) = read_csv([str(out)])
    assert (row.ours_ms, row.triton_ms, row.cublas_ms) == (7.0, 7.0, 7.0)
    assert len(rounds) == 9  # ours, cuBLAS and the own winner, three rounds each
    assert (row.ours_graph_ms, row.cublas_graph_ms, row.triton_graph_ms) == (0.5, 1.5, 2.5)  # by name
    assert graphed == [({"ours", "cublas", "triton"}, 3)]  # the rounds' calls, timed together once
    assert math.isnan(row.inductor_ms) and math.isnan(row.inductor_graph_ms)
    assert (row.sm_clock_mhz, row.throttle) == (1410, "sw_power_cap")


def test_the_library_bench_times_the_own_kernel_fastest_on_the_gpu_in_its_gpu_column(
    tmp_path, monkeypatch, device
):
    """triton_ms is the own config fastest eagerly (host time included), triton_graph_ms the one fastest
    on GPU time alone, and the row names it: at 640x640x24576 fp16 the eager pick (a pointer split-K, for
    its launcher's host time) took 45.0 us of GPU where a TMA split-K took 39.4 (visits 129, 133)."""
    import tools.library_bench as vl

    two = ([(16, 32, 16, 4, 2), (32, 32, 16, 4, 2)], 2, (1,))
    monkeypatch.setattr(vl, "QUICK", {"persistent_tma": lambda m, n, k: two})

    def block_m(fn) -> int:
        return fn.args[2].block_m if isinstance(fn, functools.partial) else 0

    # eagerly the 16-row config wins (1.0 against 2.0 ms), on the GPU the 32-row one (0.3 against 0.6)
    monkeypatch.setattr(vl, "bench", lambda fn, rep_ms=100: {16: 1.0, 32: 2.0}.get(block_m(fn), 5.0))
    timed_in_rounds = {}

    def fake_graph_times_ms(calls, device, rounds):
        if "cublas" in calls:
            timed_in_rounds.update({name: block_m(fn) for name, fn in calls.items()})
        return {name: {16: 0.6, 32: 0.3}.get(block_m(fn), 0.9) for name, fn in calls.items()}

    monkeypatch.setattr(vl, "graph_times_ms", fake_graph_times_ms)
    out = tmp_path / "tiny.csv"
    vl.run(
        BenchRun({"tiny": [(32, 48, 64)]}, ["bfloat16"], out, no_inductor=True, rounds=1, device=str(device))
    )
    (row,) = read_csv([str(out)])
    assert (row.triton_ms, row.triton_graph_ms) == (1.0, 0.3)
    assert timed_in_rounds["triton"] == 32
    assert row.triton_graph_config.startswith("persistent_tma bm32_bn32_bk16_")
    tuning = json.loads(vl.tuning_path(out).read_text())["entries"]
    assert sorted(e.get("gpu_ms") for e in tuning if e["variant"] == "persistent_tma") == [0.3, 0.6]


def test_the_library_bench_tunes_a_started_shape_whole_and_starts_none_past_its_budget(
    tmp_path, monkeypatch, device
):
    """`--budget-s` stops new shapes only: a shape whose tuning outlasts the budget is tuned whole, so
    its row has its own Triton time (two rows of visits 113-114 had none, the tuning cut short)."""
    import tools.library_bench as vl

    two = ([(16, 32, 16, 4, 2), (32, 32, 16, 4, 2)], 2, (1,))
    monkeypatch.setattr(vl, "QUICK", {"persistent_tma": lambda m, n, k: two})
    clock = itertools.chain([0.0, 0.5], itertools.repeat(100.0))  # start, first shape's check, then past
    monkeypatch.setattr(vl.time, "time", lambda: next(clock))
    tuned = []

    def fake_bench(fn, rep_ms=100):
        fn()
        tuned.append(rep_ms)
        return 1.0

    monkeypatch.setattr(vl, "bench", fake_bench)
    monkeypatch.setattr(vl, "graph_times_ms", lambda calls, device, rounds: dict.fromkeys(calls, 0.5))
    out = tmp_path / "tiny.csv"
    shapes = {"tiny": [(32, 48, 64), (48, 32, 64)]}
    vl.run(BenchRun(shapes, ["bfloat16"], out, budget_s=1, no_inductor=True, device=str(device)))
    (row,) = read_csv([str(out)])  # the second shape never started
    assert (row.m, row.n) == (32, 48) and row.triton_ms == 1.0
    assert tuned.count(100) == 3  # the library and both configs, all past the budget


def test_the_library_bench_keeps_a_held_out_shapes_own_tuning_apart_from_what_it_serves(
    tmp_path, monkeypatch, device
):
    """A held-out shape is tuned on its own for its triton_ms; which config won goes to the run's tuning
    file, never to --save-best, whose entries serve held-out shapes."""
    import tools.library_bench as vl

    monkeypatch.setattr(vl, "QUICK", {"persistent_tma": lambda m, n, k: ([(16, 32, 16, 4, 2)], 2, (1,))})
    monkeypatch.setattr(vl, "bench", lambda fn, rep_ms=100: 1.0)
    monkeypatch.setattr(vl, "graph_times_ms", lambda calls, device, rounds: dict.fromkeys(calls, 0.5))
    out, best = tmp_path / "run.csv", tmp_path / "best.json"
    shapes = {"tiny": [(32, 48, 64)], "heldout": [(48, 32, 64)]}
    vl.run(
        BenchRun(
            shapes, ["bfloat16"], out, save_best=str(best), no_inductor=True, rounds=1, device=str(device)
        )
    )

    def shapes(path):
        return {(e["m"], e["n"], e["variant"]) for e in json.loads(path.read_text())["entries"]}

    tiny = {(32, 48, "persistent_tma"), (32, 48, "cublas")}
    assert shapes(best) == tiny
    assert shapes(vl.tuning_path(out)) == tiny | {(48, 32, "persistent_tma"), (48, 32, "cublas")}


def test_the_library_bench_verdicts_read_gpu_time_where_rows_have_it(tmp_path):
    """Eager times (do_bench) decide the first lines; GPU time alone (CUDA graphs) the second set, over
    the rows measured with it: a launcher whose host time showed eagerly (768, 0.40 of cuBLAS in
    visit 100) is told apart from a kernel that loses on the GPU (512, 0.8 both ways). Rows from
    before the graph columns still read, with no GPU time."""
    old = "m,n,k,dtype,heldout,ours_ms,triton_ms,cublas_ms,inductor_ms,ours_variant,ours_config\n"
    new = old.strip() + ",ours_graph_ms,triton_graph_ms,cublas_graph_ms,inductor_graph_ms\n"
    before, after = tmp_path / "before.csv", tmp_path / "after.csv"
    before.write_text(old + "3000,5000,1000,bfloat16,0,1,2,1,1,cublas,x\n")  # ragged 0.5, eager only
    after.write_text(
        new
        + "512,512,32768,bfloat16,0,1,1.25,1,1,cublas,x,0.9,1.0,0.8,0.9\n"  # skinny-K 0.80 / 0.80
        + "768,768,12288,float16,1,2.5,2.5,1,1,splitk_tma,y,0.9,0.9,0.9,1.0\n"  # 0.40 eager, 1.0 on GPU
    )
    out = bench_command("verdicts", str(before), str(after)).stdout
    eager, graphs = out.split("on GPU time alone (CUDA graphs, L2 flushed), 2 of 3 rows:")
    assert (
        "skinny-K:        min 0.400 at 768x768x12288 float16 (goal >= 1.0, 2 rows; 1.000 there on GPU"
        in eager
    )
    assert (
        "ragged:          min 0.500 at 3000x5000x1000 bfloat16 (goal >= 0.85, 1 rows)" in eager
    )  # no GPU time
    assert "skinny-K:        min 0.800 at 512x512x32768 bfloat16" in graphs
    assert "ragged:          no rows" in graphs
    assert "held-out:     1.000" in graphs and "held-out:     0.400" in eager
    (legacy,) = read_csv([str(before)])
    assert math.isnan(legacy.ours_graph_ms)


def test_the_library_bench_refuses_only_shapes_its_suites_do_not_hold(tmp_path):
    """`--suite skinny --only 640x640x24576` would time nothing (a ragged row): said before any work."""
    refused = bench_command("--suite", "skinny", "--only", "512x512x32768", "640x640x24576", "7x7x7")
    assert refused.returncode == 2
    assert "holds: 640x640x24576 (in ragged); 7x7x7 (in no suite)\n" in refused.stderr
    # held by one of the suites asked for: not refused (a budget of 0 starts no shape, so nothing runs)
    out = tmp_path / "none.csv"
    both = ["--suite", "skinny", "ragged", "--only", "640x640x24576", "--budget-s", "0", "--device", "cpu"]
    ran = bench_command(*both, "--no-inductor", "--out", str(out))
    assert ran.returncode == 0 and "--only names shapes" not in ran.stderr
    assert "stopping before 640x640x24576" in ran.stdout
    refused = bench_command("--suite", "skinny", "--only", "640x640x24576", "--no-inductor")
    assert refused.returncode == 2
    assert "640x640x24576 (in ragged)" in refused.stderr
