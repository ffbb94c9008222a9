"""Batches and their dealing order: each kernel compiled once per host, not once per GPU."""

import itertools

import pytest
from triton.backends.compiler import BaseBackend
from triton.runtime.jit import native_specialize_impl

from farm.plan import (
    EST_ENERGY_WINDOW_S,
    EST_STEADY_LIMITED_S,
    EST_STEADY_POINT_S,
    batch_kernels,
    compile_key,
    estimate_gpu_seconds,
    estimate_run_seconds,
    expand,
    int_class,
    make_batches,
)
from farm.spec import load_spec, parse_spec

# Ragged sizes next to multiples of 16, in both widths Triton uses for integers.
SIZES = [1, 2, 15, 16, 17, 40, 48, 200, 384, 4097, 8192, 2**31 - 1, 2**31 + 16, 2**31 + 17]

# Three divisibility classes of (m, n, k): all multiples of 16 (twice), m ragged, k ragged.
RAGGED = """\
name: ragged
dtypes: [bfloat16]
variants: [tiled, splitk, cublas]
shapes:
  - {m: 48, n: 64, k: 96}
  - {m: 96, n: 64, k: 160}
  - {m: 40, n: 64, k: 96}
  - {m: 48, n: 64, k: 200}
configs: {block_m: [16, 32], block_n: [32], block_k: [16, 32], split_k: [1, 2, 4], num_warps: [4],
          num_stages: [2]}
"""


def _triton_specialization(value: int):
    return native_specialize_impl(BaseBackend, value, False, True, True)


@pytest.mark.parametrize("a, b", list(itertools.combinations(SIZES, 2)), ids=str)
def test_int_class_matches_what_triton_compiles_for(a, b):
    same_for_triton = _triton_specialization(a) == _triton_specialization(b)
    assert (int_class(a) == int_class(b)) == same_for_triton


def _points(text=RAGGED):
    points, _ = expand(parse_spec(text, "ragged.yaml"))
    return points


def test_shapes_of_one_divisibility_class_share_kernels():
    keys = {}
    for p in _points():
        keys.setdefault((p.variant, p.config.key), {})[p.shape] = compile_key(p)
    tiled = keys[("tiled", next(k for v, k in keys if v == "tiled"))]
    assert tiled[(48, 64, 96)] == tiled[(96, 64, 160)]  # every size a multiple of 16
    assert len({tiled[(48, 64, 96)], tiled[(40, 64, 96)], tiled[(48, 64, 200)]}) == 3
    assert all(compile_key(p) is None for p in _points() if p.variant == "cublas")


@pytest.mark.parametrize("max_points", [3, 48], ids=["chunked", "whole"])
def test_batches_hold_one_shape_and_variant_and_every_point_once(max_points):
    points = _points()
    batches = make_batches(points, seed=7, max_points=max_points)
    assert all(len({(p.dtype, p.shape, p.variant) for p in b.points}) == 1 for b in batches)
    assert all((b.m, b.n, b.k) == b.points[0].shape and len(b.points) <= max_points for b in batches)
    dealt = [p for b in batches for p in b.points]
    assert len(dealt) == len(points) and set(dealt) == set(points)


def _new_kernels(batches):
    """How many kernels each batch brings that no batch before it needed."""
    seen, new = set(), []
    for b in batches:
        kernels = batch_kernels(b)
        new.append(len(kernels - seen))
        seen |= kernels
    return new


@pytest.mark.parametrize(
    "name, text", [("ragged", RAGGED), ("splitk", None), ("smoke", None)], ids=["ragged", "splitk", "smoke"]
)
@pytest.mark.parametrize("seed", [0, 5])
def test_first_batches_compile_different_kernels_and_later_ones_reuse_them(name, text, seed):
    points = _points(text) if text else expand(load_spec(preset=name))[0]
    batches = make_batches(points, seed=seed, max_points=8)
    kernel_sets = [batch_kernels(b) for b in batches]
    # spread: the first batches dealt share no kernel, as many as the grid has disjoint sets of
    spread = next(i for i, ks in enumerate(kernel_sets) if any(ks & other for other in kernel_sets[:i]))
    assert spread >= 3
    assert all(a.isdisjoint(b) for a, b in itertools.combinations(kernel_sets[:spread], 2))
    # cover, then reuse: every batch that brings a new kernel comes before every one that does not
    new = _new_kernels(batches)
    first_reuse = new.index(0)
    assert all(n > 0 for n in new[:first_reuse]) and not any(new[first_reuse:])
    assert set().union(*kernel_sets) == set().union(*kernel_sets[:first_reuse])
    # reuse, longest first: the last batches dealt are the short ones (no idle GPU at the end)
    reuse = [estimate_run_seconds(b.points) for b in batches[first_reuse:]]  # they compile nothing new
    assert reuse == sorted(reuse, reverse=True) and len(set(reuse)) > 1


def test_splitk_preset_first_four_batches_hold_all_48_kernels():
    """Measured grid: 12 shapes, all multiples of 16: 48 kernels (splitk 20, splitk_det 20, grouped
    4, streamk_hybrid 4), where every worker compiled all of them before."""
    points, _ = expand(load_spec(preset="splitk"))
    batches = make_batches(points, seed=0)
    assert {compile_key(p) for p in points} - {None} == set().union(*map(batch_kernels, batches[:4]))
    assert sorted(len(batch_kernels(b)) for b in batches[:4]) == [4, 4, 20, 20]


def test_ties_follow_the_seed():
    points = _points()
    order = {seed: [(b.points[0].variant, b.m, b.k) for b in make_batches(points, seed)] for seed in range(4)}
    assert order[0] == [(b.points[0].variant, b.m, b.k) for b in make_batches(points, 0)]
    assert len({tuple(o) for o in order.values()}) > 1


def test_estimate_counts_the_steady_regimes_blocks_at_the_limit():
    """Tiny shapes stay below the power limit: the steady regime adds EST_STEADY_POINT_S a point;
    a kernel of 0.1 ms or more (8192^3 here) adds a power-limited point's measured block."""
    small = _points()
    big, _ = expand(
        parse_spec(RAGGED.replace("  - {m: 48, n: 64, k: 96}\n", "  - {m: 8192, n: 8192, k: 8192}\n"), "b")
    )
    big = [p for p in big if p.shape == (8192, 8192, 8192)]
    assert big and small
    for points, extra in ((small, EST_STEADY_POINT_S), (big, EST_STEADY_LIMITED_S)):
        steady = estimate_gpu_seconds(points, regime="steady", energy_window_s=0)
        interleaved = estimate_gpu_seconds(points, regime="interleaved", energy_window_s=0)
        assert steady - interleaved == pytest.approx(len(points) * extra)
    # three passes at the limit measure three blocks; points below it pay their passes once
    thrice = estimate_gpu_seconds(big, regime="steady", limit_passes=3, energy_window_s=0)
    assert thrice - estimate_gpu_seconds(big, regime="interleaved", energy_window_s=0) == pytest.approx(
        len(big) * 3 * EST_STEADY_LIMITED_S
    )
    assert estimate_gpu_seconds(small, regime="steady", limit_passes=3) == estimate_gpu_seconds(small)


@pytest.mark.parametrize(
    ("regime", "shape", "windows"),
    [
        ("steady", (48, 64, 96), True),  # below the power limit: no energy reading of its own
        ("steady", (8192, 8192, 8192), False),  # at the limit: its own 300 ms block reads energy
        ("interleaved", (8192, 8192, 8192), True),  # shared blocks: every point takes a window
        ("rest", (48, 64, 96), True),
    ],
    ids=["steady-small", "steady-at-limit", "interleaved-big", "rest-small"],
)
def test_estimate_counts_each_points_energy_window(regime, shape, windows):
    """The dry run's estimate holds the spec's energy window (timing.energy_window_s, 0.35 s by
    default) for every point without an energy reading of its own, and none where the spec turns it
    off."""
    m, n, k = shape
    spec = parse_spec(RAGGED.replace("  - {m: 48, n: 64, k: 96}\n", f"  - {{m: {m}, n: {n}, k: {k}}}\n"), "w")
    points = [p for p in expand(spec)[0] if p.shape == shape]
    assert points
    off = estimate_gpu_seconds(points, regime=regime, energy_window_s=0)
    default = estimate_gpu_seconds(points, regime=regime)
    doubled = estimate_gpu_seconds(points, regime=regime, energy_window_s=0.7)
    assert EST_ENERGY_WINDOW_S == spec.timing.energy_window_s == 0.35
    expected = len(points) * 0.35 if windows else 0.0
    assert default - off == pytest.approx(expected)
    assert doubled - off == pytest.approx(2 * expected)
