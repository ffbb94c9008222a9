"""kernels.matmul: decisions from a tiny best-configs file, no tuning at call time."""

import functools
import itertools
import json
import math
import warnings

import pytest
import torch

import kernels
from kernels import MatmulConfig, check_accuracy, reference_matmul
from kernels.dispatch import BEST_CONFIGS_ENV, Dispatcher, Matmul, shape_bucket
from kernels.sizes import cdiv

SMS = 132  # the H200's: the tests' entries are timed as if there
GPU = "CPU (Triton interpreter)"  # what the farm records for interpreter rows, and device_name("cpu")
SMALL = MatmulConfig(block_m=16, block_n=16, block_k=16, group_m=2, num_warps=4, num_stages=2)
SPLIT = SMALL.replace(group_m=1, split_k=4)
TMA = MatmulConfig(block_m=16, block_n=32, block_k=16, group_m=2, num_warps=4, num_stages=2)


def _entry(shape, variant, ms, cfg=None, gpu=GPU, dtype="float16", host_ms=None):
    cfg = cfg or kernels.LIBRARY_CONFIG
    m, n, k = shape
    entry = {"gpu_name": gpu, "dtype": dtype, "m": m, "n": n, "k": k, "variant": variant, "ms": ms,
             "tflops": 2 * m * n * k / ms * 1e-9, "config": cfg.as_dict()}  # fmt: skip
    return entry if host_ms is None else {**entry, "host_ms": host_ms}


def _write(tmp_path, entries):
    path = tmp_path / "best.json"
    path.write_text(
        json.dumps({"format": "triton-matmul-farm/best-configs", "version": 1, "entries": entries})
    )
    return path


@pytest.fixture
def best(tmp_path):
    return _write(
        tmp_path,
        [
            _entry((48, 40, 64), "grouped", 0.010, SMALL),
            _entry((48, 40, 64), "cublas", 0.012),
            _entry((200, 200, 800), "grouped", 0.020, SMALL),  # tiled bucket, nearest to 200x200x1700
            _entry((128, 128, 4096), "splitk", 0.030, SPLIT),  # skinny-K bucket
            _entry((128, 128, 4096), "grouped", 0.050, SMALL),
            _entry((512, 512, 512), "cublas", 0.040),
            _entry((512, 512, 512), "grouped", 0.045, SMALL),
            _entry((96, 96, 96), "persistent_tma", 0.010, TMA),
            _entry((96, 96, 96), "grouped", 0.011, SMALL),
        ],
    )


def test_exact_shape_runs_the_fastest_variant(device, best):
    dispatch = Dispatcher.load(best)
    choice = dispatch.choose(48, 40, 64, torch.float16, GPU, programs=SMS)
    assert (choice.variant, choice.config, choice.tuned_shape) == ("grouped", SMALL, (48, 40, 64))
    gen = torch.Generator().manual_seed(1)
    a = torch.randn((48, 64), generator=gen).half().to(device)
    b = torch.randn((64, 40), generator=gen).half().to(device)
    c = Dispatcher.load(best, gpu_name=GPU)(a, b)  # the interpreter's name, on a GPU too
    assert check_accuracy(c, reference_matmul(a, b), a.dtype, 64).ok


@pytest.mark.parametrize(
    ("shape", "bucket"),
    [((16, 4096, 4096), "decode"), ((512, 512, 32768), "skinny_k"), ((3000, 5000, 1000), "tiled")],
    ids=["decode", "skinny-k", "tiled"],
)
def test_shape_buckets(shape, bucket):
    assert shape_bucket(*shape) == bucket


def test_nearest_shape_of_the_same_bucket_wins(best):
    dispatch = Dispatcher.load(best)
    # 200x200x800 is nearer in log space (0.75 against 1.77) but tiled; 200x200x1700 is skinny-K.
    assert dispatch.choose(200, 200, 1700, torch.float16, GPU, programs=SMS).tuned_shape == (128, 128, 4096)
    # control: a tiled problem takes the tiled shape
    assert dispatch.choose(220, 210, 700, torch.float16, GPU, programs=SMS).tuned_shape == (200, 200, 800)


def test_cublas_runs_where_it_won(best):
    choice = Dispatcher.load(best).choose(500, 520, 480, torch.float16, GPU, programs=SMS)
    assert (choice.variant, choice.tuned_shape) == ("cublas", (512, 512, 512))


def test_configs_illegal_for_the_problem_are_skipped(best):
    dispatch = Dispatcher.load(best)
    # control: 96x96x96 takes its fastest entry
    assert dispatch.choose(96, 96, 96, torch.float16, GPU, programs=SMS).variant == "persistent_tma"
    # N = 97 halves is 194 B a row: no TMA descriptor; the next entry at that shape serves it.
    assert dispatch.choose(96, 97, 96, torch.float16, GPU, programs=SMS).variant == "grouped"


def test_unaligned_rows_prefer_a_tuned_shape_that_is_unaligned_too(tmp_path):
    """cuBLAS runs 2-4x slower where rows are not 16-byte aligned (docs/bench/h200.csv): an aligned
    shape's cuBLAS win says nothing there, however near it is."""
    dispatch = Dispatcher.load(
        _write(
            tmp_path,
            [
                _entry((64, 64, 64), "cublas", 0.010),
                _entry((64, 64, 64), "grouped", 0.012, SMALL),
                _entry((96, 96, 100), "grouped", 0.020, SMALL),  # K = 100 halves: 200 B rows
                _entry((96, 96, 100), "cublas", 0.050),
            ],
        )
    )
    # 64x64x66 is nearer 64^3 (0.03 against 0.86 in log space) but, like 96x96x100, unaligned.
    assert dispatch.choose(64, 64, 66, torch.float16, GPU, programs=SMS).tuned_shape == (96, 96, 100)
    assert dispatch.choose(64, 64, 66, torch.float16, GPU, programs=SMS).variant == "grouped"
    # control: 64x64x72 is aligned, and 64^3's cuBLAS serves it
    assert dispatch.choose(64, 64, 72, torch.float16, GPU, programs=SMS).variant == "cublas"
    # N = 97 unaligned, 96x96x100 too: it serves, not the aligned 64^3 either.
    assert dispatch.choose(64, 97, 64, torch.float16, GPU, programs=SMS).tuned_shape == (96, 96, 100)


def test_a_group_taller_than_the_problem_is_cut_to_its_tile_rows(device, tmp_path):
    """group_m 8 tuned on 8 tile rows serves a problem of 3 (and of 1) instead of being refused."""
    tall = SMALL.replace(group_m=8)
    dispatch = Dispatcher.load(
        _write(
            tmp_path, [_entry((128, 128, 64), "grouped", 0.010, tall), _entry((128, 128, 64), "cublas", 0.02)]
        )
    )
    choice = dispatch.choose(48, 128, 64, torch.float16, GPU, programs=SMS)
    assert (choice.variant, choice.config) == ("grouped", tall.replace(group_m=3))
    assert dispatch.choose(16, 128, 64, torch.float16, GPU, programs=SMS).config == tall.replace(group_m=1)
    gen = torch.Generator().manual_seed(2)
    a = torch.randn((48, 64), generator=gen).half().to(device)
    b = torch.randn((64, 128), generator=gen).half().to(device)
    c = Dispatcher.load(tmp_path / "best.json", gpu_name=GPU)(a, b)
    assert check_accuracy(c, reference_matmul(a, b), a.dtype, 64).ok


def test_a_split_tuned_elsewhere_launches_no_more_programs_than_it_did_there(tmp_path):
    """A skinny-K entry: 128x128 in 16x16 tiles split 4 is 256 programs. 80x80's 25 tiles take a
    split of 10, more tiles a smaller split, down to none; the tuned shape keeps its own."""
    dispatch = Dispatcher.load(_write(tmp_path, [_entry((128, 128, 4096), "splitk", 0.030, SPLIT)]))
    assert dispatch.choose(128, 128, 4096, torch.float16, GPU, programs=SMS).config == SPLIT  # control
    for (m, n), split in [((80, 80), 10), ((96, 96), 7), ((192, 128), 2), ((256, 256), 1)]:
        choice = dispatch.choose(m, n, 4096, torch.float16, GPU, programs=SMS)
        assert (choice.variant, choice.tuned_shape) == ("splitk", (128, 128, 4096)), (m, n)
        assert choice.config == SPLIT.replace(split_k=split), (m, n)


def test_a_rescaled_split_computes_the_product(device, tmp_path):
    """The split the dispatcher derives (8 for 80x96's 30 tiles from 128x128's split 4 of 64) runs
    through the split-K kernel and sums every K chunk once."""
    dispatch = Dispatcher.load(
        _write(tmp_path, [_entry((128, 128, 512), "splitk", 0.030, SPLIT)]), gpu_name=GPU
    )
    assert dispatch.choose(80, 96, 512, torch.float16, GPU, programs=SMS).config == SPLIT.replace(split_k=8)
    gen = torch.Generator().manual_seed(4)
    a = torch.randn((80, 512), generator=gen).half().to(device)
    b = torch.randn((512, 96), generator=gen).half().to(device)
    assert check_accuracy(dispatch(a, b), reference_matmul(a, b), a.dtype, 512).ok


def test_a_cluster_entry_is_not_served_where_its_split_would_fall_to_one(tmp_path):
    """`splitk_tma_cluster` tuned at 512x512x32768 (8 tiles of 128x256, split 8: 64 clusters) scales to
    split 2 at 1024x1024 and to 1 at 2048x1024, which the variant refuses (its TMA store computed wrong
    in clusters): there the next entry serves."""
    cfg = MatmulConfig(128, 256, 64, split_k=8, num_warps=8, num_stages=6)
    entries = [
        _entry((512, 512, 32768), "splitk_tma_cluster", 0.030, cfg, dtype="bfloat16"),
        _entry((512, 512, 32768), "cublas", 0.040, dtype="bfloat16"),
    ]
    dispatch = Dispatcher.load(_write(tmp_path, entries), gpu_name=GPU)
    split2 = cfg.replace(split_k=2)
    assert dispatch.choose(1024, 1024, 32768, torch.bfloat16, GPU, programs=SMS).config == split2
    assert dispatch.choose(2048, 1024, 32768, torch.bfloat16, GPU, programs=SMS).variant == "cublas"


@pytest.mark.parametrize(
    ("triton_ms", "library_ms", "serves"),
    [
        (0.050, 0.051, "cublas"),
        (0.048, 0.051, "grouped"),
        (0.200, 0.201, "grouped"),
        (0.060, None, "grouped"),
    ],
    ids=["short-tie", "short-5pct-ahead", "long-tie", "no-library-entry"],
)
def test_a_short_call_runs_triton_only_when_clearly_ahead_of_the_library(
    tmp_path, triton_ms, library_ms, serves
):
    """Under 0.1 ms a launcher's host time can decide an eager call: a tie goes to the library."""
    entries = [_entry((256, 256, 256), "grouped", triton_ms, SMALL)]
    if library_ms is not None:
        entries.append(_entry((256, 256, 256), "cublas", library_ms))
    dispatch = Dispatcher.load(_write(tmp_path, entries))
    assert dispatch.choose(256, 256, 256, torch.float16, GPU, programs=SMS).variant == serves
    # served elsewhere too
    assert dispatch.choose(200, 256, 256, torch.float16, GPU, programs=SMS).variant == serves


@pytest.mark.parametrize(
    ("triton", "library", "serves"),
    [
        ((0.0129, 0.0201), (0.0136, 0.0110), "cublas"),  # 495x5333x71 bf16 tuned on the H200 (visit 111)
        ((0.0129, 0.0080), (0.0136, 0.0110), "grouped"),
        ((0.0129, 0.0201), (0.0136, None), "cublas"),  # the library's host unknown: its time alone
        ((0.0129, None), (0.0136, 0.0110), "grouped"),  # no host time in the file: the times decide
        ((0.150, 0.200), (0.160, 0.010), "grouped"),  # not a short call: kernel times decide
    ],
    ids=["host-past-library", "host-under-kernel", "library-host-unknown", "no-host-time", "long-call"],
)
def test_a_short_call_weighs_the_launchers_host_time_where_the_file_has_it(tmp_path, triton, library, serves):
    """An eager caller waits for the longer of a call's kernel and its launcher's host time."""
    entries = [
        _entry((495, 5333, 71), "grouped", triton[0], SMALL, host_ms=triton[1]),
        _entry((495, 5333, 71), "cublas", library[0], host_ms=library[1]),
    ]
    dispatch = Dispatcher.load(_write(tmp_path, entries))
    assert dispatch.choose(495, 5333, 71, torch.float16, GPU, programs=SMS).variant == serves


BIG_TILE = MatmulConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3)


def _tuned_at(tmp_path, shape, *rows) -> Dispatcher:
    """A dispatcher from bf16 entries at one shape, (variant, ms, host ms) each, Triton's in 128x256 tiles."""
    entries = [
        _entry(shape, variant, ms, None if variant == "cublas" else BIG_TILE, dtype="bfloat16", host_ms=host)
        for variant, ms, host in rows
    ]
    return Dispatcher.load(_write(tmp_path, entries))


@pytest.mark.parametrize(
    ("problem", "serves"),
    [
        # rounds of 128x256 tiles on 132 SMs: 5 of K 4097 at the tuned shape (561 tiles)
        ((2000, 3000, 1500), "persistent_tma_pad"),  # 2 of K 1500 (192 tiles): 37 us, a short call
        ((333, 4444, 5555), "persistent_tma_pad"),  # 1 of K 5555 (54 tiles): 69 us
        ((4097, 4097, 4097), "persistent_tma_bands"),  # the tuned shape: kernel times decide
        ((4000, 4000, 3000), "persistent_tma_bands"),  # 4 of K 3000 (512 tiles): 150 us, a long call
    ],
    ids=["held-out-short", "held-out-short-2", "tuned-shape", "held-out-long"],
)
def test_a_long_calls_entries_served_to_a_short_call_are_ranked_by_what_an_eager_caller_waits_for(
    tmp_path, problem, serves
):
    """4097^3's fastest (H200 bf16, visit 114) served the held-out 2000x3000x1500, a 44 us call where its
    two launches' host time showed (57.7-72.2 us eagerly against Inductor's 45.5-50.7, visits 114-115):
    carried to the problem, the tuned shape's entries rank by the longer of time and host time."""
    dispatch = _tuned_at(
        tmp_path,
        (4097, 4097, 4097),
        ("persistent_tma_bands", 0.2555, 0.100),
        ("persistent_tma_pad", 0.2788, 0.070),
        ("cublas", 1.026, 0.012),
    )
    assert dispatch.choose(*problem, torch.bfloat16, GPU, programs=SMS).variant == serves


def test_a_tile_carried_to_a_problem_of_under_a_wave_is_ranked_by_its_rounds_there(tmp_path):
    """4097^3's 128x256 tiles (561 on 132 SMs: 5 rounds) were faster there than 128x128 (1089: 9 rounds);
    at 333x4444x5555 they are 54, one round of K 5555 on 54 SMs, and 128x128's 105 fill 105 (H200 bf16:
    the 128x256 tiles took 89.9 us of GPU against the shape's own best 72.0, visit 114). Counted in
    rounds, 128x128 is estimated 44 us there and 128x256 76: the smaller tile serves. A problem of many
    rounds keeps the tuned order."""
    entries = [
        _entry((4097, 4097, 4097), "persistent_tma_pad", 0.2788, BIG_TILE, dtype="bfloat16"),
        _entry(
            (4097, 4097, 4097), "persistent_tma_pad", 0.2900, BIG_TILE.replace(block_n=128), dtype="bfloat16"
        ),
        _entry((4097, 4097, 4097), "cublas", 1.026, dtype="bfloat16"),
    ]
    dispatch = Dispatcher.load(_write(tmp_path, entries))

    def tile(m, n, k, programs=SMS):
        config = dispatch.choose(m, n, k, torch.bfloat16, GPU, programs=programs).config
        return config.block_m, config.block_n

    assert tile(4097, 4097, 4097) == (128, 256)  # control
    assert tile(333, 4444, 5555) == (128, 128)
    # 6000x6000: 1128 wide tiles (9 rounds), 2209 square ones (17): wide 0.50 ms, square 0.55
    assert tile(6000, 6000, 4097) == (128, 256)
    # on a GPU of 60 SMs the 105 square tiles take 2 rounds of 19 and the 54 wide ones 1 of 10: wide
    assert tile(333, 4444, 5555, programs=60) == (128, 256)


def test_a_short_call_whose_launchers_all_wait_longer_runs_the_library(tmp_path):
    """Where the problem's call is short, a Triton entry serves only if 5% ahead of the library in what
    the caller waits for, whichever decides it there: the launchers' host times or the kernels' times."""
    dispatch = _tuned_at(
        tmp_path,
        (4096, 4096, 4096),
        ("persistent_tma", 0.190, 0.030),
        ("grouped", 0.200, 0.025),
        ("cublas", 0.195, 0.012),
    )
    # one round of K 1024 against 4 of 4096: 12 us of kernel; the hosts decide, and cuBLAS's is the least
    assert dispatch.choose(1024, 1024, 1024, torch.bfloat16, GPU, programs=SMS).variant == "cublas"
    # one round of 4096: 48-50 us of kernel, past every host time: the kernels decide, none 5% ahead
    assert dispatch.choose(2048, 2048, 4096, torch.bfloat16, GPU, programs=SMS).variant == "cublas"
    # 4 rounds of 2464: a long call (114 us), the fastest kernel serves
    assert dispatch.choose(4096, 4096, 2464, torch.bfloat16, GPU, programs=SMS).variant == "persistent_tma"


def test_unknown_gpu_warns_once_and_uses_torch(best):
    dispatch = Dispatcher.load(best, gpu_name="NVIDIA B200")
    a, b = torch.randn(8, 16), torch.randn(16, 8)
    with pytest.warns(UserWarning, match=r"no tuned configs for NVIDIA B200 \(float32\); using torch.matmul"):
        c = dispatch(a, b)
    assert torch.equal(c, torch.matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would raise here
        assert dispatch.choose(8, 9, 16, torch.float32, "NVIDIA B200", programs=SMS).variant == "cublas"
    # control: a known GPU
    assert dispatch.choose(48, 40, 64, torch.float16, GPU, programs=SMS).variant == "grouped"


def test_decisions_are_made_once(best, monkeypatch):
    dispatch = Dispatcher.load(best)
    first = dispatch.choose(48, 40, 64, torch.float16, GPU, programs=SMS)
    monkeypatch.setattr(dispatch, "_choose", lambda *args: pytest.fail("decided twice"))
    assert dispatch.choose(48, 40, 64, torch.float16, GPU, programs=SMS) is first


def test_matmul_loads_from_its_argument_then_the_environment(tmp_path, best, monkeypatch):
    (tmp_path / "env").mkdir()
    other = _write(tmp_path / "env", [_entry((48, 40, 64), "cublas", 0.001)])
    monkeypatch.setenv(BEST_CONFIGS_ENV, str(other))
    from_env = Matmul()
    assert from_env.dispatcher.choose(48, 40, 64, torch.float16, GPU, programs=SMS).variant == "cublas"
    explicit = Matmul()
    explicit.load(best)
    assert explicit.dispatcher.choose(48, 40, 64, torch.float16, GPU, programs=SMS).variant == "grouped"
    assert isinstance(kernels.matmul, Matmul)


def test_the_library_bench_quick_tunes_a_problem_shorter_than_its_group():
    """bench/vs_libraries.py's quick configs carry group_m 8; at 333x4444x5555 (three tile rows of
    128) the rules refuse that group, so visit 36 had no own Triton time there. They walk the rows
    as group_m 3, as planning and the dispatcher do."""
    from bench.vs_libraries import quick_configs

    configs = list(quick_configs("persistent_tma_pad", 333, 4444, 5555, torch.bfloat16))
    assert configs and {c.group_m for c in configs} == {3}
    assert all(c.group_m == 8 for c in quick_configs("persistent_tma_pad", 4097, 4097, 4097, torch.bfloat16))


def test_the_library_bench_splits_k_through_tma_on_the_skinny_k_class_only():
    """`splitk_tma` and `splitk_tma_reduce` join the quick tuning on skinny-K shapes, each tile's split
    filling one wave of 132 programs (and half that): 640x640 in 128x128 tiles is 25 tiles, split 5
    (visit 88's best) and 2. Not at decode (M = 16), where its host time decided the eager times
    (visit 83)."""
    from bench.vs_libraries import quick_configs, wave_splits

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
    from bench.vs_libraries import quick_configs

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
    from bench.vs_libraries import quick_configs

    assert {c.block_k for c in quick_configs("grouped", 495, 5333, 71, torch.bfloat16)} == {32}
    assert {c.block_k for c in quick_configs("grouped", 3000, 5000, 1000, torch.bfloat16)} == {64}


def test_the_library_bench_verdicts_take_the_issues_classes_over_every_row(tmp_path, capsys):
    """Skinny-K and ragged are the issue's classes, held-out rows included: 768x768x12288 (held out)
    is skinny-K, 128x4096x14336 is not; 2000x3000x1500 (held out, N not a multiple of 16) is ragged,
    the aligned 640x640x24576 of the ragged suite is not. Each line names its worst row."""
    from bench.vs_libraries import main

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
    main(["verdicts", str(table)])
    out = capsys.readouterr().out
    assert "skinny-K:        min 0.500 at 768x768x12288 bfloat16 (goal >= 1.0, 3 rows)" in out
    assert "ragged:          min 0.625 at 2000x3000x1500 bfloat16 (goal >= 0.85, 2 rows)" in out
    assert "squares >= 2048: no rows" in out


def test_the_library_bench_merge_takes_a_shapes_later_row_in_place(tmp_path):
    """`vs_libraries.py merge old.csv new.csv`: a shape and dtype measured again replaces its row
    where it stood (the verdicts count each row once); new shapes come after."""
    from bench.vs_libraries import read_csv

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


def test_the_library_bench_verdicts_write_nothing_and_merge_needs_an_out(tmp_path, capsys, monkeypatch):
    """`verdicts` only reads; `merge` without --out is refused (it once defaulted to the kept table,
    so reading the verdicts of another file overwrote docs/bench/h200.csv)."""
    from bench.vs_libraries import main

    monkeypatch.chdir(tmp_path)
    kept = tmp_path / "docs" / "bench" / "h200.csv"
    kept.parent.mkdir(parents=True)
    header = "m,n,k,dtype,heldout,ours_ms,triton_ms,cublas_ms,inductor_ms,ours_variant,ours_config\n"
    kept.write_text(header + "4096,4096,4096,bfloat16,0,2.0,2,2,2,cublas,x\n")
    other = tmp_path / "other.csv"
    other.write_text(header + "4096,4096,4096,bfloat16,0,1.0,1,1.1,1.2,grouped,y\n")
    main(["verdicts", str(other)])
    assert "tuned suites: 1.100" in capsys.readouterr().out
    assert kept.read_text().endswith("cublas,x\n")
    with pytest.raises(SystemExit):
        main(["merge", str(other)])
    assert "--out" in capsys.readouterr().err and kept.read_text().endswith("cublas,x\n")
    main(["merge", str(kept), str(other), "--out", str(kept)])
    assert kept.read_text().endswith("grouped,y,nan,nan,nan,nan,nan,,\n")  # no GPU times or state here


def test_the_library_bench_times_its_rivals_in_rotated_rounds_under_a_warming_gpu():
    """Two measures of one kernel on a GPU slowing 2% a measure: back to back the later one reads
    slower (the bias visit 73 saw); in rotated rounds their medians agree."""
    from bench.vs_libraries import interleaved_medians

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


def test_the_library_bench_refuses_no_rounds(capsys):
    from bench.vs_libraries import main

    with pytest.raises(SystemExit) as stop:
        main(["--rounds", "0", "--device", "cpu"])
    assert stop.value.code == 2 and "--rounds and --rep-ms must be at least 1" in capsys.readouterr().err


def test_the_library_bench_compiles_inductor_before_it_tunes(tmp_path, monkeypatch, device):
    """After torch.compile a Python launcher's host time rose 31.7 -> 44.7-54.7 us a call (visit 90),
    and do_bench reads host time below about 50 us of GPU: the tuning must pick its winner in the
    state the rounds time it in, after Inductor's compile."""
    import bench.vs_libraries as vl

    monkeypatch.setitem(vl.SUITES, "tiny", [(32, 48, 64)])
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
    vl.main(["--suite", "tiny", "--device", str(device), "--out", str(out), "--rounds", "1"])
    # the library's entry and the one quick config are the tuning's timings; four measures a round
    assert events == ["compile", "tuning", "tuning", "round", "round", "round", "round"]
    (row,) = vl.read_csv([str(out)])
    assert row.inductor_ms == 1.0


def test_the_library_bench_row_holds_the_rounds_times_not_the_tunings(tmp_path, monkeypatch, device):
    """triton_ms is the tuning's winner timed again in the rounds: the tuning's own time (the least
    of a dozen noisy ones) is biased low."""
    import bench.vs_libraries as vl

    monkeypatch.setitem(vl.SUITES, "tiny", [(32, 48, 64)])
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
    vl.main(["--suite", "tiny", "--device", str(device), "--no-inductor", "--out", str(out), "--rounds", "3"])
    (row,) = vl.read_csv([str(out)])
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
    import bench.vs_libraries as vl

    monkeypatch.setitem(vl.SUITES, "tiny", [(32, 48, 64)])
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
    vl.main(["--suite", "tiny", "--device", str(device), "--no-inductor", "--out", str(out), "--rounds", "1"])
    (row,) = vl.read_csv([str(out)])
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
    import bench.vs_libraries as vl

    monkeypatch.setitem(vl.SUITES, "tiny", [(32, 48, 64), (48, 32, 64)])
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
    args = ["--suite", "tiny", "--device", str(device), "--no-inductor", "--out", str(out), "--budget-s", "1"]
    vl.main(args)
    (row,) = vl.read_csv([str(out)])  # the second shape never started
    assert (row.m, row.n) == (32, 48) and row.triton_ms == 1.0
    assert tuned.count(100) == 3  # the library and both configs, all past the budget


def test_the_library_bench_keeps_a_held_out_shapes_own_tuning_apart_from_what_it_serves(
    tmp_path, monkeypatch, device
):
    """A held-out shape is tuned on its own for its triton_ms; which config won goes to the run's tuning
    file, never to --save-best, whose entries serve held-out shapes."""
    import bench.vs_libraries as vl

    monkeypatch.setitem(vl.SUITES, "tiny", [(32, 48, 64)])
    monkeypatch.setitem(vl.SUITES, "heldout", [(48, 32, 64)])
    monkeypatch.setattr(vl, "QUICK", {"persistent_tma": lambda m, n, k: ([(16, 32, 16, 4, 2)], 2, (1,))})
    monkeypatch.setattr(vl, "bench", lambda fn, rep_ms=100: 1.0)
    monkeypatch.setattr(vl, "graph_times_ms", lambda calls, device, rounds: dict.fromkeys(calls, 0.5))
    out, best = tmp_path / "run.csv", tmp_path / "best.json"
    args = ["--suite", "tiny", "heldout", "--device", str(device), "--no-inductor", "--rounds", "1"]
    vl.main([*args, "--out", str(out), "--save-best", str(best)])

    def shapes(path):
        return {(e["m"], e["n"], e["variant"]) for e in json.loads(path.read_text())["entries"]}

    tiny = {(32, 48, "persistent_tma"), (32, 48, "cublas")}
    assert shapes(best) == tiny
    assert shapes(vl.tuning_path(out)) == tiny | {(48, 32, "persistent_tma"), (48, 32, "cublas")}


def test_the_library_bench_verdicts_read_gpu_time_where_rows_have_it(tmp_path, capsys):
    """Eager times (do_bench) decide the first lines; GPU time alone (CUDA graphs) the second set, over
    the rows measured with it: a launcher whose host time showed eagerly (768, 0.40 of cuBLAS in
    visit 100) is told apart from a kernel that loses on the GPU (512, 0.8 both ways). Rows from
    before the graph columns still read, with no GPU time."""
    from bench.vs_libraries import main, read_csv

    old = "m,n,k,dtype,heldout,ours_ms,triton_ms,cublas_ms,inductor_ms,ours_variant,ours_config\n"
    new = old.strip() + ",ours_graph_ms,triton_graph_ms,cublas_graph_ms,inductor_graph_ms\n"
    before, after = tmp_path / "before.csv", tmp_path / "after.csv"
    before.write_text(old + "3000,5000,1000,bfloat16,0,1,2,1,1,cublas,x\n")  # ragged 0.5, eager only
    after.write_text(
        new
        + "512,512,32768,bfloat16,0,1,1.25,1,1,cublas,x,0.9,1.0,0.8,0.9\n"  # skinny-K 0.80 / 0.80
        + "768,768,12288,float16,1,2.5,2.5,1,1,splitk_tma,y,0.9,0.9,0.9,1.0\n"  # 0.40 eager, 1.0 on GPU
    )
    main(["verdicts", str(before), str(after)])
    out = capsys.readouterr().out
    eager, graphs = out.split("on GPU time alone (CUDA graphs, L2 flushed), 2 of 3 rows:")
    assert "skinny-K:        min 0.400 at 768x768x12288 float16" in eager
    assert "ragged:          min 0.500 at 3000x5000x1000" in eager
    assert "skinny-K:        min 0.800 at 512x512x32768 bfloat16" in graphs
    assert "ragged:          no rows" in graphs
    assert "held-out:     1.000" in graphs and "held-out:     0.400" in eager
    (legacy,) = read_csv([str(before)])
    assert math.isnan(legacy.ours_graph_ms)


def test_the_library_bench_refuses_only_shapes_its_suites_do_not_hold(capsys):
    """`--suite skinny --only 640x640x24576` would time nothing (a ragged row): said before any work."""
    from bench.vs_libraries import main, shapes_outside

    assert shapes_outside(["512x512x32768", "640x640x24576", "7x7x7"], ["skinny"]) == [
        "640x640x24576 (in ragged)",
        "7x7x7 (in no suite)",
    ]
    assert shapes_outside(["640x640x24576"], ["skinny", "ragged"]) == []
    with pytest.raises(SystemExit) as exit_:
        main(["--suite", "skinny", "--only", "640x640x24576", "--no-inductor"])
    assert exit_.value.code == 2
    assert "640x640x24576 (in ragged)" in capsys.readouterr().err
