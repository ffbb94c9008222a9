"""kernels.matmul: decisions from a tiny best-configs file, no tuning at call time."""

import json
import warnings

import pytest
import torch

import kernels
from kernels import LIBRARY_CONFIG, MatmulConfig, check_accuracy, reference_matmul
from kernels.cublas import padded_matmul
from kernels.dispatch import BEST_CONFIGS_ENV, Dispatcher, Matmul, shape_bucket

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
    # N = 97 halves is 194 B a row: no TMA descriptor on B as it is; the config serves on padded copies
    assert dispatch.choose(96, 97, 96, torch.float16, GPU, programs=SMS).variant == "persistent_tma_pad"


def test_unaligned_rows_prefer_a_tuned_shape_that_is_unaligned_too(tmp_path):
    """cuBLAS runs 2-4x slower where rows are not 16-byte aligned (docs/results/vs_libraries_h200.csv):
    an aligned shape's cuBLAS win says nothing there, however near it is. (The unaligned shape ran
    TMA on padded copies too: one that did not meets the aligned shapes' padded estimates, a test below.)"""
    dispatch = Dispatcher.load(
        _write(
            tmp_path,
            [
                _entry((64, 64, 64), "cublas", 0.010),
                _entry((64, 64, 64), "grouped", 0.012, SMALL),
                _entry((96, 96, 100), "grouped", 0.020, SMALL),  # K = 100 halves: 200 B rows
                _entry((96, 96, 100), "cublas", 0.050),
                _entry((96, 96, 100), "persistent_tma_pad", 0.030, SMALL),
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
        ((4000, 4000, 3001), "persistent_tma_bands"),  # 4 of K 3001 (512 tiles): 150 us, a long call
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


def test_an_aligned_problem_takes_no_verdict_from_a_shape_of_unaligned_rows(tmp_path):
    """At 4097^3 the bands beat cuBLAS four times over because cuBLAS slows on unaligned rows; carried to
    the aligned 768x768x12288 (the only tuned shapes unaligned) they read 75.6 us against cuBLAS's 34.0
    (H200 bf16, visit 144). An aligned problem is decided by aligned shapes alone, else by the library."""
    unaligned = [
        ("persistent_tma_bands", 0.2555, 0.100),
        ("persistent_tma_pad", 0.2788, 0.070),
        ("cublas", 1.026, 0.012),
    ]
    dispatch = _tuned_at(tmp_path, (4097, 4097, 4097), *unaligned)
    choice = dispatch.choose(768, 768, 12288, torch.bfloat16, GPU, programs=SMS)
    assert (choice.variant, choice.tuned_shape) == ("cublas", None)
    # control: an unaligned problem still takes the unaligned shape's fastest (K 12289: 24578 B rows)
    assert dispatch.choose(768, 768, 12289, torch.bfloat16, GPU, programs=SMS).tuned_shape == (
        4097,
        4097,
        4097,
    )
    # an aligned shape in the file decides, however much farther it is than 4097^3
    entries = [
        _entry((4097, 4097, 4097), v, ms, None if v == "cublas" else BIG_TILE, dtype="bfloat16", host_ms=h)
        for v, ms, h in unaligned
    ] + [
        _entry((16384, 16384, 16384), "persistent_tma", 12.0, BIG_TILE, dtype="bfloat16"),
        _entry((16384, 16384, 16384), "cublas", 12.5, dtype="bfloat16"),
    ]
    farther = Dispatcher.load(_write(tmp_path, entries)).choose(
        768, 768, 12288, torch.bfloat16, GPU, programs=SMS
    )
    assert farther.tuned_shape == (16384, 16384, 16384)


def test_an_unaligned_problem_decided_from_aligned_shapes_runs_on_padded_copies(tmp_path):
    """With a sweep of aligned shapes only, the unaligned 2500^3 (5,000-byte rows) took 2048^3's cuBLAS win
    and ran 193 us on the unaligned rows against Inductor's 74.5 (H100 bf16). Carried across alignment,
    cuBLAS and TMA serve on copies of aligned rows (both estimates carry the same copies), as Inductor's
    max-autotune serves cuBLAS (3333x1111x4444: 52.3 us on 3336x4448 @ 4448x1112, its Triton GEMM 92.4);
    the pointer kernels count 3x slower. 2048^3's times are the H100 study's."""
    study = (("cublas", 0.0246, 0.012), ("persistent_tma", 0.0253, 0.030), ("grouped", 0.0258, 0.030))
    dispatch = _tuned_at(tmp_path, (2048, 2048, 2048), *study)
    choice = dispatch.choose(2500, 2500, 2500, torch.bfloat16, GPU, programs=SMS, objective="kernel")
    assert (choice.variant, choice.config) == ("cublas_pad", LIBRARY_CONFIG)
    # control: an aligned problem as near takes the library's win, as it was measured
    assert dispatch.choose(2560, 2560, 2560, torch.bfloat16, GPU, programs=SMS).variant == "cublas"
    # only K unaligned: TMA copies A alone, cuBLAS B too (K padded to whole vectors takes zero rows of B),
    # and 2048^3's cuBLAS was only 3% ahead: TMA serves
    choice = dispatch.choose(2048, 2048, 2500, torch.bfloat16, GPU, programs=SMS, objective="kernel")
    assert choice.variant == "persistent_tma_pad"
    # where TMA beat cuBLAS at the aligned shape, TMA serves on the copies
    (tmp_path / "tma").mkdir()
    tma_ahead = _tuned_at(tmp_path / "tma", (2048, 2048, 2048), ("cublas", 0.0300, 0.012), *study[1:])
    choice = tma_ahead.choose(2500, 2500, 2500, torch.bfloat16, GPU, programs=SMS, objective="kernel")
    assert (choice.variant, choice.config) == ("persistent_tma_pad", BIG_TILE)


def test_the_library_on_padded_copies_computes_the_product(device):
    """kernels.cublas.padded_matmul: A copied where K's rows are unaligned, B where N's or K's are, K
    padded with zeros to whole vectors, the (M, N) product returned either way, its padding dropped."""
    for m, n, k in ((33, 45, 70), (40, 48, 63), (40, 33, 64), (40, 48, 64), (40, 45, 63)):
        a = torch.randn((m, k), device=device, dtype=torch.bfloat16)
        b = torch.randn((k, n), device=device, dtype=torch.bfloat16)
        c = padded_matmul(a, b)
        assert c.shape == (m, n)
        assert check_accuracy(c, reference_matmul(a, b), a.dtype, k).ok, (m, n, k)


def test_a_call_decided_for_the_padded_library_runs_it_and_keeps_it_as_its_route(device, tmp_path):
    """Served, not only chosen: an unaligned problem carried from an aligned cuBLAS win multiplies
    through padded_matmul, and its route is padded_matmul itself."""
    dispatch = _tuned_at(tmp_path, (64, 64, 64), ("cublas", 0.010, None), ("grouped", 0.030, None))
    a = torch.randn((48, 70), device=device, dtype=torch.bfloat16)  # K = 70: 140-byte rows
    b = torch.randn((70, 40), device=device, dtype=torch.bfloat16)
    assert dispatch.choose(48, 40, 70, torch.bfloat16, GPU, programs=SMS).variant == "cublas_pad"
    for _ in range(2):  # the first decides, the second takes the route
        assert check_accuracy(dispatch(a, b), reference_matmul(a, b), a.dtype, 70).ok
    assert list(dispatch.routes.values()) == [padded_matmul] and dispatch.routes.served == 1


def _h100_study(tmp_path, *extra) -> Dispatcher:
    """The shipped H100 study's bf16 entries at three shapes (dashboard/demo/h100-study.db's export):
    two unaligned ones measured with grouped, splitk and cuBLAS only, and the aligned 3000^3 and 1024^3."""
    w8s3, w4s3, w8s4, w4s4 = ({"num_warps": w, "num_stages": s} for w, s in ((8, 3), (4, 3), (8, 4), (4, 4)))
    study = [
        ((2999, 1501, 1234), "grouped", 0.116, MatmulConfig(128, 128, 32, group_m=8, **w8s3), 0.0327),
        ((2999, 1501, 1234), "cublas", 0.1234, None, 0.0317),
        ((1000, 1500, 700), "grouped", 0.0135, MatmulConfig(64, 128, 32, **w4s3), 0.0385),
        ((1000, 1500, 700), "cublas", 0.0198, None, 0.0175),
        ((3000, 3000, 3000), "cublas", 0.0818, None, 0.0363),
        ((3000, 3000, 3000), "persistent_tma", 0.138, MatmulConfig(128, 256, 64, **w8s4), 0.0367),
        ((1024, 1024, 1024), "cublas", 0.0065, None, 0.032),
        ((1024, 1024, 1024), "persistent_tma", 0.008, MatmulConfig(64, 128, 64, **w4s4), 0.0297),
    ]
    rows = [_entry(shape, v, ms, cfg, dtype="bfloat16", host_ms=host) for shape, v, ms, cfg, host in study]
    return Dispatcher.load(_write(tmp_path, rows + list(extra)))


def test_an_unaligned_shape_that_never_ran_padded_copies_meets_the_aligned_shapes_padded_estimate(tmp_path):
    """Decided from the H100 study's unaligned shapes alone, the unseen 5000x1234x3000 took
    2999x1501x1234's `grouped` and ran 199 us against Inductor's 67 (H100 bf16); `persistent_tma_pad`
    decided from 3000^3 ran 79, and Inductor's own pick was cuBLAS on N padded to 1240 (56.9 us and the
    copy). The unaligned shape never ran padded copies: its decision meets 3000^3's padded estimate,
    where cuBLAS beat TMA."""
    choice = _h100_study(tmp_path).choose(5000, 1234, 3000, torch.bfloat16, GPU, programs=SMS)
    assert (choice.variant, choice.tuned_shape) == ("cublas_pad", (3000, 3000, 3000))
    # control: an unaligned shape that measured padded TMA decides alone (here it ran slower than grouped)
    measured = _entry((2999, 1501, 1234), "persistent_tma_pad", 0.2, BIG_TILE, dtype="bfloat16", host_ms=0.04)
    choice = _h100_study(tmp_path, measured).choose(5000, 1234, 3000, torch.bfloat16, GPU, programs=SMS)
    assert (choice.variant, choice.tuned_shape) == ("grouped", (2999, 1501, 1234))


def test_the_padded_estimate_counts_what_an_eager_caller_waits_for(tmp_path):
    """At 1000x1500x700 (a short call) the padded estimate from 1024^3 is cuBLAS's 6.5 us there in rounds
    of its TMA rival's tiles (8.9) and the copies (2.8), but an eager caller waits for the host's 32 us
    there: less for cuBLAS's 20 us on the unaligned rows, as measured (a padded pick read 71.5 us
    eagerly against cuBLAS's 22.7, H100). Under the kernel objective the kernel estimates decide: 11.7
    us padded against the shape's own `grouped`, 13.5."""
    dispatch = _h100_study(tmp_path)
    assert dispatch.choose(1000, 1500, 700, torch.bfloat16, GPU, programs=SMS).variant == "cublas"
    kernel = dispatch.choose(1000, 1500, 700, torch.bfloat16, GPU, programs=SMS, objective="kernel")
    assert (kernel.variant, kernel.tuned_shape) == ("cublas_pad", (1024, 1024, 1024))


def test_a_pad_twin_costs_its_copies(tmp_path):
    """A read and a write of each unaligned operand, nothing for an aligned one or for C."""
    from kernels.dispatch import PAD_COPY_BYTES_PER_MS, pad_copy_ms
    from kernels.space import Problem

    assert pad_copy_ms(Problem(2048, 2048, 2048, torch.bfloat16)) == 0
    only_a = 2 * 2048 * 2500 * 2 / PAD_COPY_BYTES_PER_MS  # K = 2500 halves: A's rows unaligned, B's not
    assert pad_copy_ms(Problem(2048, 4096, 2500, torch.bfloat16)) == pytest.approx(only_a)
    both = 2 * (2500 * 2500 + 2500 * 2500) * 2 / PAD_COPY_BYTES_PER_MS
    assert pad_copy_ms(Problem(2500, 2500, 2500, torch.bfloat16)) == pytest.approx(both)
    only_b = 2 * 1000 * 4097 * 2 / PAD_COPY_BYTES_PER_MS  # N = 4097: B's rows unaligned, A's aligned
    assert pad_copy_ms(Problem(64, 4097, 1000, torch.bfloat16)) == pytest.approx(only_b)
    # cuBLAS's copies pad K itself: B copied too where K is odd, to take its zero rows
    assert pad_copy_ms(Problem(2048, 4096, 2500, torch.bfloat16), whole_k=True) == pytest.approx(
        only_a + 2 * 2500 * 4096 * 2 / PAD_COPY_BYTES_PER_MS
    )
    assert pad_copy_ms(Problem(64, 4097, 1000, torch.bfloat16), whole_k=True) == pytest.approx(only_b)


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
