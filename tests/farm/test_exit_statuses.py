"""`farm sweep` under misuse: every option checked before anything starts, exit statuses that say how
the sweep ended (cli.sweep.EXIT_STATUSES), GPU-sized plans refused under the interpreter, and points
too large for the target's memory stored as `too_large` without running."""

import sqlite3
from collections import Counter
from types import SimpleNamespace

import pytest
from farmkit import ONE_POINT_SPEC, PLUGINS, measurements, write_spec

from cli import main as farm
from cli.sweep import EXIT_STATUSES, exit_status
from farm import ray_connect
from farm.errors import UserError
from farm.options import SweepOptions
from farm.plan import INTERPRETER_MAX_MNK, Point, interpreter_refusal, point_bytes, split_too_large
from kernels import MatmulConfig

# One shape of 10^6 x 10^6 x 10^6 (the 4 TB of bf16 operands and output; with the fp64
# reference the farm builds, 38 TB), and the one small point beside it.
HUGE_SPEC = """\
name: huge
dtypes: [bfloat16]
variants: [tiled]
shapes: [{m: 1000000, n: 1000000, k: 1000000}, {m: 24, n: 32, k: 40}]
configs: {block_m: [16], block_n: [32], block_k: [16], num_warps: [4], num_stages: [2]}
timing: {min_reps: 2, max_reps: 2}
"""
RAISES_SPEC = ONE_POINT_SPEC.replace("name: one_point", "name: raises").replace(
    "variants: [tiled]", "variants: [tiled, raises]"
)


@pytest.fixture
def no_gpu_here(monkeypatch):
    """This host as the sweep sees it before Ray starts: no GPU, no Ray head, no RAY_ADDRESS."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray_connect, "local_head", lambda *a: None)
    monkeypatch.setattr(ray_connect, "nvml_gpu_count", lambda: 0)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        pytest.param(
            ["--compile-threads", "0"], "--compile-threads must be at least 1, not 0", id="threads-0"
        ),
        pytest.param(
            ["--point-timeout", "0"], "--point-timeout must be more than 0 seconds, not 0", id="timeout-0"
        ),
        pytest.param(
            ["--point-timeout", "-5"], "--point-timeout must be more than 0 seconds, not -5", id="timeout-neg"
        ),
        pytest.param(
            ["--point-timeout", "inf"],
            "--point-timeout must be more than 0 seconds, not inf",
            id="timeout-inf",
        ),
        pytest.param(["--workers", "0"], "--workers must be at least 1, not 0", id="workers-0"),
        pytest.param(["--wait-s", "-1"], "--wait-s must be more than 0 seconds, not -1", id="wait-neg"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_2_before_anything(tmp_path, capsys, argv, said) -> None:
    db = tmp_path / "r.db"
    # Also with --dry-run: the options are checked before the plan is printed.
    for dry in ([], ["--dry-run"]):
        assert farm(["sweep", "--preset", "smoke", "--db", str(db), *argv, *dry]) == 2
        out, err = capsys.readouterr()
        assert err == f"error: {said}\n" and out == ""
    assert not db.exists()


def test_sweep_options_check_library_callers_too() -> None:
    with pytest.raises(UserError, match="--compile-threads must be at least 1"):
        SweepOptions(db="r.db", compile_threads=0)
    with pytest.raises(UserError, match="--backend must be one of auto, cuda, interpreter"):
        SweepOptions(db="r.db", backend="gpu")


def _result(status: str, **counts: int) -> SimpleNamespace:
    return SimpleNamespace(status=status, counts=Counter(counts))


@pytest.mark.parametrize(
    ("result", "code"),
    [
        pytest.param(_result("finished", ok=3), 0, id="all-ok"),
        pytest.param(_result("finished", ok=3, wrong=1), 0, id="wrong-is-a-finding"),
        pytest.param(_result("finished", ok=3, launch_error=1), 3, id="launch-error"),
        pytest.param(_result("finished", timeout=2), 3, id="all-timeout"),
        pytest.param(_result("finished", ok=1, too_large=1), 3, id="too-large"),
        pytest.param(_result("failed", ok=1), 3, id="no-worker-left"),
        pytest.param(_result("finished"), 0, id="nothing-to-do"),
        pytest.param(_result("interrupted", ok=1), 130, id="interrupted"),
    ],
)
def test_exit_status_says_how_the_sweep_ended(result, code: int) -> None:
    assert exit_status(result) == code and code in EXIT_STATUSES


def test_help_documents_every_exit_status(capsys) -> None:
    with pytest.raises(SystemExit):
        farm(["sweep", "--help"])
    out = capsys.readouterr().out
    for code, what in EXIT_STATUSES.items():
        assert f"{code:3d}  {what}" in out


def test_a_plan_too_big_for_the_interpreter_is_refused_before_anything(no_gpu_here, tmp_path, capsys) -> None:
    db = tmp_path / "r.db"
    assert farm(["sweep", "--preset", "splitk", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 588 of 588 points are GPU-sized for Triton's interpreter")
    assert "--preset smoke" in err and "--backend interpreter" in err and "3.8 min on one H100" in err
    assert len(err.splitlines()) == 1 and not db.exists()
    # The dry run says the same beside its GPU estimate.
    assert farm(["sweep", "--preset", "splitk", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "this machine has no GPU; a sweep would stop here: 588 of 588 points" in out


def test_the_threshold_lets_the_smoke_preset_through() -> None:
    cfg = MatmulConfig(block_m=16, block_n=32, block_k=16)
    smoke = Point("tiled", "bfloat16", 80, 64, 96, cfg)  # the smoke preset's largest shape
    over = Point("tiled", "bfloat16", 257, 256, 256, cfg)
    assert smoke.m * smoke.n * smoke.k < INTERPRETER_MAX_MNK < over.m * over.n * over.k
    assert interpreter_refusal([smoke], 1.0) is None
    assert interpreter_refusal([smoke, over], 1.0).startswith("1 of 2 points are GPU-sized")


def test_point_bytes_counts_what_the_worker_allocates() -> None:
    """bf16 100x60x80: operands 2 B + their fp64 copies 8 B; the product in fp64, the output in bf16 and
    its fp64 copy; split 4 adds an fp32 workspace of 4 outputs."""
    plain = Point("tiled", "bfloat16", 100, 60, 80, MatmulConfig())
    split = Point("splitk", "bfloat16", 100, 60, 80, MatmulConfig(split_k=4))
    assert point_bytes(plain) == (100 * 80 + 80 * 60) * 10 + 100 * 60 * 18
    assert point_bytes(split) == point_bytes(plain) + 4 * 100 * 60 * 4
    assert split_too_large([plain, split], point_bytes(plain)) == ([plain], [split])
    assert split_too_large([plain, split], 0) == ([plain, split], [])  # unknown memory: all fit


def test_the_dry_run_reports_points_that_cannot_fit(tmp_path, capsys) -> None:
    spec = write_spec(tmp_path, HUGE_SPEC)
    assert farm(["sweep", "--spec", str(spec), "--dry-run", "--backend", "interpreter"]) == 0
    out = capsys.readouterr().out
    assert "1 points cannot fit in an 80 GB GPU (the largest, tiled bfloat16 1000000x1000000x1000000" in out
    assert "needs 38,000,000.00 TB" not in out and "needs 38.00 TB" in out
    assert "stores them as too_large without running them" in out


@pytest.mark.parametrize(
    ("spec_text", "plugins", "code", "statuses"),
    [
        pytest.param(ONE_POINT_SPEC, [], 0, {("tiled", "ok")}, id="all-measured"),
        pytest.param(
            RAISES_SPEC,
            [str(PLUGINS / "raises.py")],
            3,
            {("tiled", "ok"), ("raises", "launch_error")},
            id="raises",
        ),
    ],
)
def test_sweep_exit_status_and_summary(
    ray_cluster, tmp_path, capsys, spec_text, plugins, code, statuses
) -> None:
    spec = write_spec(tmp_path, spec_text)
    db = tmp_path / "r.db"
    # One worker: the session Ray's four each import torch (seconds) for one or two points.
    argv = ["sweep", "--spec", str(spec), "--db", str(db), "--no-progress", "--workers", "1"]
    assert farm([*argv, *(a for p in plugins for a in ("--plugin", p))]) == code
    assert {(v, s) for v, *_, s in measurements(db)} == statuses
    assert f"exit status {code}: {EXIT_STATUSES[code]}" in capsys.readouterr().out


def test_a_point_too_large_for_the_target_is_stored_too_large_and_never_run(
    ray_cluster, tmp_path, capsys
) -> None:
    spec = write_spec(tmp_path, HUGE_SPEC)
    db = tmp_path / "r.db"
    assert (
        farm(["sweep", "--spec", str(spec), "--db", str(db), "--no-progress", "--backend", "interpreter"])
        == 3
    )
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT m, status, error, ms FROM measurements ORDER BY m").fetchall()
    assert [(m, s) for m, s, _, _ in rows] == [(24, "ok"), (1000000, "too_large")]
    assert "needs 38,000.0 GB" in rows[1][2] and rows[1][3] is None
    assert "too_large 1" in capsys.readouterr().out
