"""Helpers of the farm tests: the tiny spec, database readers, subprocess commands."""

import hashlib
import os
import sqlite3
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLUGINS = Path(__file__).parent / "plugins"

# 40x48x64: tiled 2 + grouped 4 + splitk 8 + cublas 1 = 15 points; 24x32x40 has a single 32-wide tile
# column, so group_m 2 is pruned there: 2 + 3 + 6 + 1 = 12. A few seconds of interpreter work.
TINY_SPEC = """\
name: tiny
dtypes: [bfloat16]
variants: [tiled, grouped, splitk, cublas]
shapes:
  - {m: 40, n: 48, k: 64}
  - {m: 24, n: 32, k: 40}
configs: {block_m: [16], block_n: [16, 32], block_k: [16], group_m: [1, 2], split_k: [1, 2],
          num_warps: [4], num_stages: [2]}
timing: {min_reps: 2, max_reps: 2, nondeterminism_repeats: 2}
"""
TINY_POINTS = 27

# Smaller grids for tests that need fewer points: a point is about 0.6 s of a worker's time under the
# interpreter on the 2-core test machine.
# The tiny spec's second shape alone: 2 + 3 + 6 + 1 = 12 points in 4 batches (one per variant), enough
# for a sweep to be stopped or to lose a node half-way.
HALF_SPEC = TINY_SPEC.replace("name: tiny", "name: half").replace("  - {m: 40, n: 48, k: 64}\n", "")
HALF_POINTS = 12
# The same 12 points timed over 20 repetitions, not 2: their rows reach the database over about 4 s
# (9-14 s into the run) instead of 1-2 s, so a stop sent at the first stored row lands mid-sweep. With
# 2, one fresh-clone CI run (session 21) found all 12 stored at the first flush in three attempts running;
# 8 were enough (3.5 s) until the interpreter's repeated and discarded work went (kernels.interpreter):
# then its rows came over 0.5-2 s.
SLOW_HALF_SPEC = HALF_SPEC.replace("min_reps: 2, max_reps: 2", "min_reps: 20, max_reps: 20")
assert SLOW_HALF_SPEC != HALF_SPEC, "the tiny spec's timing line changed: say the repetitions again"
# Two batches of 2 points (one per shape): one for each worker of a 2-GPU Ray, dealt to the least busy.
TWO_BATCH_SPEC = """\
name: two_batches
dtypes: [bfloat16]
variants: [tiled]
shapes:
  - {m: 40, n: 48, k: 64}
  - {m: 24, n: 32, k: 40}
configs: {block_m: [16], block_n: [16, 32], block_k: [16], num_warps: [4], num_stages: [2]}
timing: {min_reps: 2, max_reps: 2, nondeterminism_repeats: 2}
"""
TWO_BATCH_POINTS = 4
# For what a sweep does around its points (imports, masking a password): a single point.
ONE_POINT_SPEC = """\
name: one_point
dtypes: [bfloat16]
variants: [tiled]
shapes: [{m: 24, n: 32, k: 40}]
configs: {block_m: [16], block_n: [32], block_k: [16], num_warps: [4], num_stages: [2]}
timing: {min_reps: 2, max_reps: 2}
"""


def write_spec(folder: Path, text: str = TINY_SPEC, name: str = "tiny.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def measurements(db: Path) -> list[tuple]:
    """(variant, m, n, k, config_key, status) of every stored measurement."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT variant, m, n, k, config_key, status FROM measurements ORDER BY 1, 2, 3, 4, 5"
        ).fetchall()


def file_digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def farm_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "cli", *args]


def subprocess_env() -> dict:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)  # the workers choose the interpreter themselves
    env["PYTHONPATH"] = str(REPO)
    # This Python first on PATH, as a cluster's setup makes its own: `ray job submit -- python ...`
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env
