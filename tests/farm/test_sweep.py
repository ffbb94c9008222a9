"""A sweep end to end: spec -> Ray workers (logical GPUs, interpreter) -> checked rows in SQLite."""

import sqlite3

import pytest
from farmkit import ONE_POINT_SPEC, PLUGINS, TINY_POINTS, TINY_SPEC, file_digest, measurements, write_spec

from cli import main as farm
from db.records import Status
from farm.driver import SweepOptions, run_sweep
from farm.spec import load_spec


def test_sweep_end_to_end_then_resume_adds_nothing(ray_cluster, tiny_spec, tmp_path, capsys):
    db = tmp_path / "results.db"
    assert farm(["sweep", "--spec", str(tiny_spec), "--db", str(db), "--no-progress"]) == 0
    rows = measurements(db)
    assert len(rows) == TINY_POINTS
    assert {status for *_, status in rows} == {"ok"}
    out = capsys.readouterr().out
    assert f"{TINY_POINTS} points measured" in out and "next: farm best --db" in out
    with sqlite3.connect(db) as conn:
        backends = conn.execute("SELECT DISTINCT backend FROM measurements").fetchall()
        timed = conn.execute(
            "SELECT count(*) FROM measurements WHERE ms > 0 AND ms_p20 <= ms AND ms <= ms_p80 "
            "AND reps = 2 AND rel_err < 4e-3"
        ).fetchone()[0]
        tiles = conn.execute(
            "SELECT tiles, programs, tiles_per_sm FROM measurements WHERE variant = 'splitk' "
            "AND m = 40 AND block_n = 32 AND split_k = 2"
        ).fetchone()
        sweep = conn.execute("SELECT status, n_points, n_ok FROM sweeps").fetchall()
    assert backends == [("interpreter",)]
    assert timed == TINY_POINTS
    assert tiles == (3 * 2, 3 * 2 * 2, pytest.approx(6 / 132))  # 40x48 in 16x32 tiles, split 2, 132 SMs
    assert sweep == [("finished", TINY_POINTS, TINY_POINTS)]

    assert farm(["sweep", "--spec", str(tiny_spec), "--db", str(db), "--no-progress"]) == 0
    assert measurements(db) == rows
    assert "0 points measured in" in capsys.readouterr().out


def test_buggy_plugin_is_wrong_and_never_best(ray_cluster, tmp_path):
    spec = write_spec(
        tmp_path,
        """\
        name: buggy
        dtypes: [float32]
        variants: [grouped, buggy_grouped]
        shapes: [{m: 48, n: 32, k: 32}]
        configs: {block_m: [16], block_n: [16], block_k: [16], group_m: [1, 2],
                  num_warps: [4], num_stages: [2]}
        timing: {min_reps: 2, max_reps: 2}
        """,
    )
    db = tmp_path / "buggy.db"
    result = run_sweep(
        load_spec(path=str(spec)),
        # two workers, one a batch (a variant's points): the session Ray's four each import torch
        SweepOptions(db=str(db), plugins=[str(PLUGINS / "constant_divisor.py")], workers=2, progress=False),
        "t",
    )
    assert result.status == "finished"
    rows = {(variant, key): status for variant, _, _, _, key, status in measurements(db)}
    # 3 tile rows in groups of 2: the short last group is where the constant divisor breaks.
    assert rows[("buggy_grouped", "bm16_bn16_bk16_gm2_sk1_w4_s2_ieee")] == Status.WRONG
    # group_m = 1 divides by 1, the right height: the same plugin is correct there.
    assert rows[("buggy_grouped", "bm16_bn16_bk16_gm1_sk1_w4_s2_ieee")] == Status.OK
    assert {s for (v, _), s in rows.items() if v == "grouped"} == {Status.OK}
    with sqlite3.connect(db) as conn:
        best = conn.execute("SELECT variant, config_key FROM best_configs").fetchall()
        error = conn.execute("SELECT error FROM measurements WHERE status = 'wrong'").fetchone()[0]
    assert ("buggy_grouped", "bm16_bn16_bk16_gm2_sk1_w4_s2_ieee") not in best
    assert {v for v, _ in best} == {"grouped", "buggy_grouped"}
    assert error.startswith("rel_err ") and "> tolerance" in error


BAD_INPUTS = [
    pytest.param(
        ["--spec", "{spec_dir}/bad.yaml"],
        "bad.yaml:4: shapes[0].m[0]: Input should be greater than 0",
        id="bad-spec",
    ),
    pytest.param(
        ["--spec", "{spec_dir}/unknown.yaml"],
        "unknown.yaml:4: variants[1]: unknown variant 'strassen'; known:",
        id="unknown-variant",
    ),
    pytest.param(
        ["--spec", "{spec_dir}/tiny.yaml", "--plugin", str(PLUGINS / "raises_on_import.py")],
        "raises_on_import.py failed to load: RuntimeError: this plugin is broken on purpose",
        id="plugin-raises",
    ),
    pytest.param(
        ["--spec", "{spec_dir}/tiny.yaml", "--plugin", "{spec_dir}/missing.py"],
        "cannot read plugin {spec_dir}/missing.py: No such file or directory",
        id="plugin-missing",
    ),
    pytest.param(
        ["--spec", "{spec_dir}/nope.yaml"], "cannot read spec {spec_dir}/nope.yaml", id="spec-missing"
    ),
    pytest.param(
        ["--preset", "huge"],
        "unknown preset 'huge'; presets: full, grouping, llm, smoke, splitk",
        id="unknown-preset",
    ),
]


@pytest.mark.parametrize("existing_db", [False, True], ids=["no-db", "existing-db"])
@pytest.mark.parametrize(("args", "message"), BAD_INPUTS)
def test_bad_input_exits_2_and_leaves_the_database_alone(tmp_path, capsys, args, message, existing_db):
    write_spec(tmp_path)
    write_spec(
        tmp_path,
        "name: x\ndtypes: [bfloat16]\nshapes:\n  - {m: 0, n: 1, k: 1}\nvariants: [tiled]\n",
        "bad.yaml",
    )
    write_spec(
        tmp_path,
        "name: x\ndtypes: [bfloat16]\nshapes: [{m: 8, n: 8, k: 8}]\nvariants: [tiled, strassen]\n",
        "unknown.yaml",
    )
    db = tmp_path / "results.db"
    if existing_db:
        db.write_bytes(b"")  # an empty file is a valid, empty SQLite database
        sqlite3.connect(db).execute("CREATE TABLE keep (x)").connection.commit()
    before = file_digest(db)
    argv = [a.format(spec_dir=tmp_path) for a in args]
    assert farm(["sweep", *argv, "--db", str(db), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message.format(spec_dir=tmp_path) in err
    assert err.startswith("error: ")
    assert file_digest(db) == before
    assert not (tmp_path / "results.db-wal").exists() or existing_db


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "{tmp}/missing/results.db",
            "cannot open {tmp}/missing/results.db: folder {tmp}/missing does not exist",
        ),
        (
            "postgresql://farm:secret@127.0.0.1:{port}/farm",
            "cannot connect to postgresql+psycopg://farm:***@127",
        ),
    ],
    ids=["sqlite-folder-missing", "postgresql-unreachable"],
)
def test_a_database_that_cannot_open_fails_before_ray_starts(tmp_path, capsys, monkeypatch, target, message):
    from tools.ports import free_port

    write_spec(tmp_path)
    monkeypatch.setattr(
        SweepOptions, "launch", lambda *a: pytest.fail("Ray started before the database was checked")
    )
    values = dict(tmp=tmp_path, port=free_port())
    assert farm(["sweep", "--spec", str(tmp_path / "tiny.yaml"), "--db", target.format(**values)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message.format(**values) in err
    assert "secret" not in err


def test_dry_run_prints_the_pruned_grid_without_ray_or_database(tmp_path, capsys, tiny_spec):
    db = tmp_path / "never.db"
    assert farm(["sweep", "--spec", str(tiny_spec), "--db", str(db), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "sweep 'tiny': 27 points over 2 shapes x 1 dtype(s)" in out
    assert [line.split() for line in out.splitlines() if line.strip().startswith("splitk")] == [
        ["splitk", "14", "2"]
    ]
    assert "estimated GPU time" in out
    assert not db.exists()


@pytest.mark.parametrize("window_s", [0, 20], ids=["no-window", "20s-window"])
def test_dry_run_estimate_holds_the_specs_energy_window(tmp_path, monkeypatch, window_s):
    """Each of the tiny spec's 27 points (all below the power limit) takes the spec's energy window
    (timing.energy_window_s, 0.35 s by default) in the dry run's GPU time."""
    import cli.sweep

    seconds = {}
    monkeypatch.setattr(
        cli.sweep, "print_plan", lambda spec, points, pruned, s, memory: seconds.update({spec.name: s})
    )
    timed = TINY_SPEC.replace("name: tiny", "name: timed").replace(
        "nondeterminism_repeats: 2}", f"nondeterminism_repeats: 2, energy_window_s: {window_s}}}"
    )
    for name, text in (("tiny", TINY_SPEC), ("timed", timed)):
        spec = write_spec(tmp_path, text, f"{name}.yaml")
        assert farm(["sweep", "--spec", str(spec), "--db", str(tmp_path / "never.db"), "--dry-run"]) == 0
    assert seconds["timed"] - seconds["tiny"] == pytest.approx(TINY_POINTS * (window_s - 0.35))


def test_dry_run_columns_line_up_under_a_long_variant_name(tmp_path, capsys):
    spec = write_spec(
        tmp_path,
        """\
        name: long
        dtypes: [bfloat16]
        variants: [tiled, persistent_tma_bands]
        shapes: [{m: 256, n: 256, k: 256}]
        configs: {block_m: [64], block_n: [64], block_k: [32], num_warps: [4], num_stages: [3]}
        """,
    )
    assert farm(["sweep", "--spec", str(spec), "--db", str(tmp_path / "never.db"), "--dry-run"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    header, rows = table[0], table[1:3]
    assert [row.split()[0] for row in rows] == ["tiled", "persistent_tma_bands"]
    # every row's counts end where the header's "points" and "pruned" end
    ends = [header.index("points") + len("points"), len(header)]
    for row in rows:
        points = row.split()[1]
        assert [row.index(f" {points} ") + len(points) + 1, len(row)] == ends, (header, row)


def test_a_kernel_that_cannot_compile_is_a_row_and_the_sweep_goes_on(ray_cluster, tmp_path):
    spec = write_spec(
        tmp_path,
        """\
        name: broken
        dtypes: [float16]
        variants: [tiled, broken]
        shapes: [{m: 32, n: 32, k: 32}]
        configs: {block_m: [16, 32], block_n: [16], block_k: [16], num_warps: [4], num_stages: [2]}
        timing: {min_reps: 2, max_reps: 2}
        """,
    )
    db = tmp_path / "broken.db"
    # two workers, one a batch (a variant's points): the session Ray's four each import torch
    options = SweepOptions(db=str(db), plugins=[str(PLUGINS / "broken.py")], workers=2, progress=False)
    result = run_sweep(load_spec(path=str(spec)), options, "t")
    statuses = {(variant, key): status for variant, _, _, _, key, status in measurements(db)}
    assert {s for (v, _), s in statuses.items() if v == "tiled"} == {Status.OK}
    # On a GPU Triton fails while compiling ahead (compile_error); the interpreter fails at launch.
    assert {s for (v, _), s in statuses.items() if v == "broken"} == {Status.LAUNCH_ERROR}
    with sqlite3.connect(db) as conn:
        errors = [e for (e,) in conn.execute("SELECT error FROM measurements WHERE variant = 'broken'")]
    assert len(errors) == 2 and all("no_such_function" in e for e in errors)
    assert result.status == "finished" and result.faults == []


@pytest.mark.postgres
def test_a_url_password_reaches_no_output_and_no_stored_command(
    ray_cluster, tmp_path, pg_target, capsys, monkeypatch
):
    """`farm sweep` and `farm summary` on postgresql://user:secret@...: the password is masked in what
    they print, in error messages and in the command stored with the sweep (the test server trusts any
    password). One point: what is printed and stored around it is the same for 27 (the tiny spec's,
    15 s more)."""
    from sqlalchemy import make_url, text

    from db.engine import make_engine

    spec = write_spec(tmp_path, ONE_POINT_SPEC)
    url = make_url(pg_target).set(password="secret").render_as_string(hide_password=False)
    argv = ["sweep", "--spec", str(spec), "--db", url, "--no-progress", "--workers", "1"]  # one point
    monkeypatch.setattr("sys.argv", ["farm", *argv])  # the command the sweep row records
    assert farm(argv) == 0
    assert farm(["summary", "--db", url]) == 0
    bad = url.rsplit("/", 1)[0] + "/no_such_database"
    assert farm(["summary", "--db", bad]) == 2
    said = capsys.readouterr()
    assert "secret" not in said.out + said.err
    assert ":***@" in said.out and ":***@" in said.err  # the target is still named, masked
    with make_engine(url).connect() as conn:
        [command] = conn.execute(text("SELECT command FROM sweeps")).scalars().all()
    assert "secret" not in command and ":***@" in command
