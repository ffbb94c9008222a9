"""The interpreter's bf16 fix reaches every launcher without the caller asking: a process that runs
the kernels under TRITON_INTERPRET=1 and never calls kernels.interpreter.fix_bf16() gets bf16
products within the accuracy check's tolerance (before: 1e10 off, Triton's interpreter multiplied
bf16's uint16 bit patterns). So does the rest of kernels.interpreter.prepare(): a launch patches
triton.language once, and once more at most for the helpers, not at every helper call of every
program; no integer overflow check is computed where device_assert would drop it. A subprocess,
since this test session prepared the interpreter at start-up (tests/conftest.py)."""

import json
import subprocess
import sys
import textwrap

import pytest
from farmkit import REPO, subprocess_env

VARIANTS = ("tiled", "grouped", "splitk", "splitk_det", "streamk", "streamk_hybrid")

# Ragged 72x40x56 (no dimension a multiple of the 32-wide tiles), two K blocks and a split of 2.
PROGRAM = textwrap.dedent(
    """
    import json, os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import kernels
    from kernels import MatmulConfig, check_accuracy, get_variant, reference_matmul

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(72, 56, generator=gen).to(torch.bfloat16)
    b = torch.randn(56, 40, generator=gen).to(torch.bfloat16)
    ref = reference_matmul(a, b)
    out = {}
    for name in sys.argv[1:]:
        cfg = MatmulConfig(block_m=32, block_n=32, block_k=32, split_k=2 if "splitk" in name else 1,
                           num_warps=4, num_stages=2)
        acc = check_accuracy(get_variant(name).launch(a, b, cfg), ref, torch.bfloat16, 56)
        out[name] = [acc.rel_err, acc.tolerance]
    acc = check_accuracy(kernels.matmul(a, b), ref, torch.bfloat16, 56)
    out["kernels.matmul"] = [acc.rel_err, acc.tolerance]
    # One more launch, of 15 programs of 4 K steps, with Triton's patching of triton.language counted
    from triton.runtime import interpreter
    patched, patch = [], interpreter._patch_lang
    interpreter._patch_lang = lambda fn: patched.append(fn.__name__) or patch(fn)
    cfg = MatmulConfig(block_m=16, block_n=16, block_k=16, num_warps=4, num_stages=2)
    get_variant("tiled").launch(a, b, cfg)
    out["patched"] = patched
    options = interpreter.interpreter_builder.options
    out["overflow_checks"] = [options.sanitize_overflow, options.debug]
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def results() -> dict[str, list]:
    """[relative error, tolerance] by variant; "patched": the functions whose calls patched
    triton.language in the last launch; "overflow_checks": the interpreter's sanitize_overflow and
    debug options after the launches."""
    run = subprocess.run(
        [sys.executable, "-c", PROGRAM, *VARIANTS],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", [*VARIANTS, "kernels.matmul"], ids=[*VARIANTS, "kernels.matmul"])
def test_bf16_under_the_interpreter_is_within_tolerance_unasked(results, name: str) -> None:
    rel_err, tolerance = results[name]
    assert rel_err <= tolerance, (
        f"{name}: relative error {rel_err:.3g} over the bf16 tolerance {tolerance:.3g}"
    )


def test_a_launch_patches_the_language_once_and_its_helpers_once_at_most_unasked(results) -> None:
    # Triton's own patching: at the launch and at every helper call of each of the 15 programs
    # (tile_accumulate, tile_offsets, tl.zeros, store_tile, five of _aligned), 136 in all. With the
    # repeats skipped: the launch, and the first helper that sees tl.core (the kernel sees only tl).
    patched = results["patched"]
    assert patched[:1] == ["_tiled_kernel"], patched
    assert len(patched) <= 2, f"triton.language patched {len(patched)} times in one launch: {patched}"


def test_no_overflow_check_is_computed_for_device_assert_to_drop_unasked(results) -> None:
    # Triton's interpreter computes one for every 32-bit +, - and * with sanitize_overflow on, and its
    # device_assert drops it with debug off: half the interpreter's time on these kernels.
    assert results["overflow_checks"] == [False, False]
