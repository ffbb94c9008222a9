"""The small items of the farm under misuse: export-best says what it left out, a merge that fails
leaves no target file behind, `db downgrade` takes --revision as `db upgrade` does, and joining a
head with token authentication fails in a second with one line."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from farmkit import REPO, farm_command, subprocess_env

from cli import main as farm
from tools.sample_db import INTERPRETER, Batch, build, interpreter_records


@pytest.fixture
def interpreter_db(tmp_path) -> Path:
    return build(tmp_path / "interp.db", [Batch(INTERPRETER, interpreter_records(), sweep="smoke")])


def test_export_best_says_it_left_interpreter_rows_out_and_how_to_keep_them(interpreter_db, tmp_path, capsys):
    out = tmp_path / "best.json"
    assert farm(["export-best", "--db", str(interpreter_db), "--out", str(out)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0] == f"wrote 0 best configs to {out}"
    tail = "measured by Triton's interpreter (CPU times, not a GPU's): --include-interpreter keeps them"
    assert said[1].startswith("left out ") and said[1].endswith(tail)
    left_out = int(said[1].split()[2])
    assert left_out > 0
    assert farm(["export-best", "--db", str(interpreter_db), "--out", str(out), "--include-interpreter"]) == 0
    assert capsys.readouterr().out == f"wrote {left_out:,} best configs to {out}\n"


def test_a_merge_from_an_old_schema_source_leaves_no_target_file(tmp_path, capsys):
    old = tmp_path / "old.db"
    assert farm(["db", "upgrade", "--db", str(old), "--revision", "0001"]) == 0
    target = tmp_path / "merged.db"
    assert farm(["db", "merge", str(old), "--into", str(target)]) == 2
    assert "error: " in capsys.readouterr().err
    assert not target.exists()


@pytest.mark.parametrize(
    "argv", [["--revision", "0001"], ["0001"]], ids=["option-like-upgrade", "bare-as-before"]
)
def test_db_downgrade_takes_the_revision_as_upgrade_does(tmp_path, capsys, argv):
    db = tmp_path / "r.db"
    assert farm(["db", "upgrade", "--db", str(db)]) == 0
    assert farm(["db", "downgrade", "--db", str(db), *argv]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("to 0001")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        pytest.param([], "give the target revision: `farm db downgrade --revision 0005`", id="none"),
        pytest.param(
            ["--revision", "0001", "0002"], "two target revisions: --revision 0001 and 0002", id="two"
        ),
    ],
)
def test_db_downgrade_without_one_revision_is_one_line(tmp_path, capsys, argv, said):
    db = tmp_path / "r.db"
    assert farm(["db", "upgrade", "--db", str(db)]) == 0
    capsys.readouterr()
    assert farm(["db", "downgrade", "--db", str(db), *argv]) == 2
    assert capsys.readouterr().err.startswith(f"error: {said}")


# A local Ray with token authentication, as `ray start --head` makes it on Ray 2.60.
TOKEN_HEAD = textwrap.dedent(
    """
    import sys, ray
    ray.init(num_cpus=1, num_gpus=1, include_dashboard=False, log_to_driver=False)
    print(ray.get_runtime_context().gcs_address, flush=True)
    sys.stdin.read()
    """
)


@pytest.mark.slow
def test_joining_a_token_head_without_the_token_is_one_line_in_a_second(tmp_path):
    token = tmp_path / "token"
    token.write_text("ab" * 32)
    env = {**subprocess_env(), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    head = subprocess.Popen(
        [sys.executable, "-c", TOKEN_HEAD], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        address = head.stdout.readline().strip()
        assert address, "the token head did not start"
        client_env = {k: v for k, v in subprocess_env().items() if not k.startswith("RAY_AUTH")}
        cmd = farm_command("sweep", "--preset", "smoke", "--db", str(tmp_path / "r.db"), "--address", address)
        start = time.monotonic()
        run = subprocess.run(cmd, cwd=REPO, env=client_env, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - start
    finally:
        head.stdin.close()
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, 9)
            head.wait()
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines() == [
        f"error: cannot join the Ray cluster at {address} (--address): it requires token authentication "
        "(RAY_AUTH_MODE is unset): set RAY_AUTH_MODE=token and give the cluster's token "
        "(~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN)"
    ]
    assert took < 18  # under ray.init's 20 s of retries; the command's start-up (more when loaded) included
    assert not (tmp_path / "r.db").exists()
