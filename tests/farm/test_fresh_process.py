"""An instrument that fails twice in a worker's process gets the batch a fresh process (Ray, the
interpreter): CUPTI's timestamps drift in a long-lived process until Kineto drops the kernels
(docs/design.md, "Instrument faults"), which timing again in the same process cannot mend. The worker
stops the batch ("instrument_stale"), the driver restarts that worker and requeues the points, unblamed,
for the fresh process; there they get one more pair of tries, then `instrument_error`: one fresh process
a point, so a broken instrument cannot loop. The faults are planted in the worker's clock by
plugins/stale_instrument.py."""

import sqlite3

import pytest
from farmkit import PLUGINS, measurements, write_spec

from cli.sweep import print_summary
from db.records import Status
from farm.driver import Driver, SweepOptions
from farm.faults import INSTRUMENT, FaultPolicy, InFlight
from farm.plan import Batch, Point
from farm.plugins import plugin_folder, read_plugin
from farm.spec import load_spec
from kernels import MatmulConfig

PLUGIN = PLUGINS / "stale_instrument.py"
# As plugins/stale_instrument.py raises it: the clock's own words for a session that lost its launches.
LOST = (
    "torch.profiler: the profile lost the GPU work of 4 of the session's 4 launches "
    "(no activity, or under 1/50 of their stream time)"
)
# One shape, two configs of the variant whose instrument fails and two of `tiled` beside it: 2 batches.
SPEC = """\
name: stale
dtypes: [bfloat16]
variants: [{variant}, tiled]
shapes: [{{m: 24, n: 32, k: 40}}]
configs: {{block_m: [16], block_n: [16, 32], block_k: [16], num_warps: [4], num_stages: [2]}}
timing: {{min_reps: 2, max_reps: 2}}
"""


@pytest.fixture
def pid_file():
    """Where the plugin's copy on this host keeps the pid of the first process that timed it; none
    before the sweep (a run before this one left its own)."""
    path = plugin_folder() / read_plugin(str(PLUGIN)).digest / "stale-process.pid"
    path.unlink(missing_ok=True)
    yield path
    path.unlink(missing_ok=True)


def sweep(tmp_path, variant: str) -> tuple[Driver, object, list[tuple]]:
    """One worker, two batches in flight: the other batch compiles or waits while one meets the fault."""
    spec = write_spec(tmp_path, SPEC.format(variant=variant), "stale.yaml")
    db = tmp_path / "stale.db"
    options = SweepOptions(db=str(db), plugins=[str(PLUGIN)], workers=1, progress=False)
    driver = Driver(load_spec(path=str(spec)), options, "t")
    result = driver.run()
    return driver, result, measurements(db)


def restarts(result) -> list:
    """The instrument's restarts; any other fault can only be Ray's own hiccup test_faults.py tolerates
    (a batch sent just after a restart met "actor is temporarily unavailable"), never a blamed point."""
    assert all(f.kind in (INSTRUMENT, "worker lost") for f in result.faults)
    return [f for f in result.faults if f.kind == INSTRUMENT]


def test_a_stale_instrument_gets_the_batch_a_fresh_process(ray_cluster, tmp_path, pid_file, capsys):
    """The instrument fails in the first process that timed the variant, in no other: the batch is
    stopped there, the worker restarted, and its points measured ok in the fresh process; nobody
    blamed, nothing retried or quarantined."""
    driver, result, rows = sweep(tmp_path, "stale_instrument")
    assert result.status == "finished"
    assert len(rows) == 4 and {status for *_, status in rows} == {Status.OK}
    (fault,) = restarts(result)
    stale_pid = int(pid_file.read_text())
    assert fault.old_pid == stale_pid and driver.workers[0].info.pid != stale_pid  # a fresh process
    assert fault.worker == 0 and fault.point == "" and fault.detail == LOST
    assert fault.recovery_s is not None
    if len(result.faults) == 1:  # no hiccup of Ray's: no attempt counted against any point
        assert not driver.fault_policy.attempts
    assert not driver.fault_policy.quarantine
    assert len(driver.fault_policy.fresh_given) == 2  # the two points of the stale batch, nobody else
    print_summary(result, "stale.db")
    out = capsys.readouterr().out
    assert (
        "1 worker process restarted for the instrument, which failed twice in a batch "
        f"(its points timed again in the fresh process): {LOST}"
    ) in out
    assert "fault: worker 0 instrument on a batch; back after" in out
    assert "exit status 0:" in out


def test_an_instrument_broken_in_every_process_gets_one_fresh_process(
    ray_cluster, tmp_path, pid_file, capsys
):
    """The instrument fails in every process: one fresh process for the batch, then instrument_error
    with the instrument's message, as in one process before; no second restart."""
    driver, result, rows = sweep(tmp_path, "broken_instrument")
    assert result.status == "finished"
    statuses = {variant: set() for variant in ("broken_instrument", "tiled")}
    for variant, *_, status in rows:
        statuses[variant].add(status)
    assert len(rows) == 4
    assert statuses == {"broken_instrument": {Status.INSTRUMENT_ERROR}, "tiled": {Status.OK}}
    (fault,) = restarts(result)
    assert fault.detail == LOST and driver.workers[0].info.pid != fault.old_pid
    with sqlite3.connect(tmp_path / "stale.db") as conn:
        errors = {
            e for (e,) in conn.execute("SELECT error FROM measurements WHERE status = 'instrument_error'")
        }
    assert errors == {f"{LOST}\nthe instrument failed on each of 2 tries; not the kernel's fault"}
    assert not driver.fault_policy.quarantine
    print_summary(result, "stale.db")
    out = capsys.readouterr().out
    assert "1 worker process restarted for the instrument" in out
    assert f"2 points: the instrument failed (profiler/CUPTI/NVML), not the kernels: {LOST}" in out
    assert "exit status 3:" in out


# -- the policy's decision, without Ray ---------------------------------------------------------------

VERSIONS = {"tiled": "v1"}


def flight(*, done=(), phase="timing") -> InFlight:
    points = [Point("tiled", "bfloat16", 24, 32, 40, MatmulConfig(16, bn, 16)) for bn in (16, 32, 64)]
    return InFlight(
        Batch("bfloat16", 24, 32, 40, points, seed=0),
        worker=0,
        index_of={(p.variant, p.config.key): i for i, p in enumerate(points)},
        done=set(done),
        phase=phase,
        timing=(0, 1, 2) if phase == "timing" else (),
    )


def test_a_restart_for_the_instrument_blames_nobody_and_is_given_once():
    """The stale batch's unfinished points go to the fresh process, noted, no attempt counted; the
    worker's other batch (compiling) goes back innocent and may still ask for a fresh process."""
    policy = FaultPolicy(VERSIONS)
    stale, other = flight(done={1}), flight(phase="compile")
    before = [p for p in stale.batch.points if policy.fresh_process([p])]
    outcome = policy.restarted(stale, stale=True)
    assert before == [] and outcome.suspects == [] and outcome.retry == [] and outcome.store == []
    assert outcome.innocent == [] and outcome.fresh == [stale.batch.points[0], stale.batch.points[2]]
    assert policy.fresh_process(outcome.fresh) and not policy.fresh_process([stale.batch.points[1]])
    untouched = FaultPolicy(VERSIONS).restarted(other, stale=False)
    assert untouched.innocent == other.batch.points and untouched.fresh == []
    assert not policy.attempts and not policy.quarantine
    # a batch holding any point given its fresh process is not given another
    assert policy.fresh_process(stale.batch.points)
