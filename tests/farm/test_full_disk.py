"""A full disk at whatever write comes next: a real file system with N bytes left (a tmpfs of the test's
own), not a fault injected at one statement. For each write of a sweep (creating the database, the
sweep's row, the first claim, a flush of measurements, a heartbeat, the sweep's end) N is chosen so
that the disk fills there, from a calibration run that notes the space taken before each write; each
run ends with one line and exit status 3, the sweep `interrupted` where its row exists, no claim left
behind, and the same command, once the space is freed, stores every point once. An export onto a full
disk is one line, exit status 3, and no partial file.

Where no tmpfs can be mounted (not root), SQLite's own limit stands in for the disk: PRAGMA
max_page_count on every connection the farm opens. It stops only a write that needs a new page: the
migrations of a new database do, while a sweep of 4 points writes into the pages its tables already
have (and the WAL, which the limit does not count), so there the other cases are skipped.

The sweeps run in this process on a fake GPU worker (tests/db/fakefarm.py: the driver, its sink, its
claims and the CLI are real), on a database migrated once for the module and copied in.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from farmkit import TWO_BATCH_POINTS, TWO_BATCH_SPEC, write_spec
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

import cli
import farm.sink
from db import claims
from db.engine import make_engine
from db.records import Backend
from db.schema import check_before_writing, ensure_current
from db.writes import environment_id
from farm.cluster import WorkerHandle
from farm.errors import WriteFailed
from farm.options import SweepOptions
from farm.sink import ResultSink
from farm.worker import WorkerInfo

sys.path.insert(0, str(Path(__file__).parents[1] / "db"))
import fakefarm

# Room for the database (150 KB migrated) and a sweep of 4 points: 32 KB of -shm and 390 KB of WAL (8 KB
# for the sweep's row, 12 KB a claim, 84 KB a flush of one point and its summaries, 4 KB a heartbeat).
TMPFS_BYTES = 2 * 2**20
PAGE = 4096  # SQLite's default page size, which the farm keeps


@dataclass(frozen=True)
class Where:
    """Where the disk fills: the sink's `nth` write of `kind` ("database": the migrations of a new file,
    before the sink writes), with `room` of the space that write needs left free, and whether the sweep's
    row can then be marked interrupted (on a tmpfs the mark rewrites the WAL space the failed commit had
    taken: with no room it has none; SQLite's page limit never stops the mark, which takes no new page)."""

    kind: str
    nth: int = 0
    room: float = 0.0
    marked: bool = False


WHERE = {
    "database": Where("database"),
    "sweep-row": Where("open"),
    "first-claim": Where("claim", room=0.5, marked=True),
    "measurements": Where("measurements", nth=1),  # the second point's flush: one point stored
    "measurements-room": Where("measurements", nth=1, room=0.5, marked=True),
    "heartbeat": Where("heartbeat"),  # a flush with nothing to store, its heartbeat alone
    "finish": Where("finish"),
}


def _can_mount() -> bool:
    """Whether this process may mount a tmpfs (root, and a kernel and container that allow it)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    probe = Path(f"/tmp/farm-tmpfs-probe-{os.getpid()}")
    probe.mkdir(exist_ok=True)
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True
        )
        if mounted.returncode != 0:
            return False
        subprocess.run(["umount", str(probe)], check=True)
        return True
    finally:
        probe.rmdir()


CAN_MOUNT = _can_mount()


class Tmpfs:
    """A tmpfs of the test's own; `fill(left)` writes a file that leaves `left` bytes, `free` deletes it."""

    kind = "tmpfs"

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(folder)], check=True
        )

    def used(self) -> int:
        st = os.statvfs(self.folder)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def fill(self, left: int) -> None:
        st = os.statvfs(self.folder)
        (self.folder / "filler").write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - left))

    def free(self) -> None:
        (self.folder / "filler").unlink()

    def close(self) -> None:
        # Busy: something still holds a file there open (an engine the driver did not dispose).
        done = subprocess.run(["umount", str(self.folder)], capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(self.folder)], check=False)
        assert done.returncode == 0, done.stderr


class PageLimit:
    """SQLite's own limit instead of a disk: PRAGMA max_page_count on every connection the farm opens,
    `fill(left)` leaving `left` bytes of pages beyond the database's size now."""

    kind = "pages"

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.limit: int | None = None
        event.listen(Engine, "connect", self._on_connect)

    def _on_connect(self, dbapi_conn, _record) -> None:
        if self.limit is not None:
            dbapi_conn.execute(f"PRAGMA max_page_count = {self.limit}")

    def used(self) -> int:
        db = self.folder / "results.db"
        if not db.exists():
            return 0
        with contextlib.closing(sqlite3.connect(db)) as conn:
            return conn.execute("PRAGMA page_count").fetchone()[0] * PAGE

    def fill(self, left: int) -> None:
        self.limit = max(1, (self.used() + left) // PAGE)

    def free(self) -> None:
        self.limit = None

    def close(self) -> None:
        event.remove(Engine, "connect", self._on_connect)


@contextlib.contextmanager
def space(folder: Path) -> Iterator[Tmpfs | PageLimit]:
    disk = Tmpfs(folder) if CAN_MOUNT else PageLimit(folder)
    try:
        yield disk
    finally:
        disk.close()


@dataclass
class Spy:
    """The sink's writes, in order, by the method that made them: (kind, space taken before, after), and
    the kind of the first that raised WriteFailed. It only watches: it raises nothing, changes nothing."""

    disk: Tmpfs | PageLimit
    writes: list[tuple[str, int, int]] = field(default_factory=list)
    failed: str | None = None
    mark: int = 0  # the space taken when the method under way began its own writes

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        opened = ResultSink.open.__func__

        def open_(cls, *args, **kwargs):  # the sweep's row
            return self._call("open", lambda: opened(cls, *args, **kwargs))

        monkeypatch.setattr(ResultSink, "open", classmethod(open_))
        for name in ("claim", "flush", "close"):
            monkeypatch.setattr(ResultSink, name, self._watched(name, getattr(ResultSink, name)))

    def _watched(self, name: str, method):
        def watched(sink, *args, **kwargs):
            kind = "finish" if name == "close" else name
            if name == "flush":  # with nothing buffered a flush writes the heartbeat alone
                kind = "measurements" if sink.buffer else "heartbeat"
            return self._call(kind, lambda: method(sink, *args, **kwargs))

        return watched

    def _call(self, kind: str, call):
        self.mark = self.disk.used()
        try:
            return call()
        except WriteFailed:
            self.failed = self.failed or kind
            raise
        finally:
            # A flush within close: its write is its own, and close's own (the end) starts after it.
            before, after = self.mark, self.disk.used()
            if after != before:
                self.writes.append((kind, before, after))
            self.mark = after


def _fake_launch(self, plugin_sources):
    """SweepOptions.launch replaced: one fake worker in this process, no Ray."""
    info = WorkerInfo(fakefarm.FAKE_ENV, "fake:0", "", Backend.INTERPRETER, 232448, os.getpid(), "node")
    return fakefarm.FakeLaunched([WorkerHandle(actor=fakefarm.FakeActor(info, 0.0, lambda point: 1.0))])


def _fake_sweeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake workers; a flush after every point and a heartbeat in every flush, so that a sweep of 4
    points makes every kind of write: the sweep's row, 2 claims, 4 flushes of a point, heartbeats alone
    and the end."""
    monkeypatch.setattr(SweepOptions, "launch", _fake_launch)
    monkeypatch.setattr(farm.sink, "FLUSH_EVERY_S", 0.0)
    monkeypatch.setattr(claims, "HEARTBEAT_EVERY_S", 0.0)


@pytest.fixture
def sweeping(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_sweeps(monkeypatch)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database at head holding the fake worker's environment (1 s of migrations, once)."""
    path = tmp_path_factory.mktemp("template") / "results.db"
    engine = make_engine(str(path))
    try:
        ensure_current(engine, create=True)
        with Session(engine) as session:
            environment_id(session, fakefarm.FAKE_ENV)
            session.commit()
    finally:
        engine.dispose()  # the last connection checkpoints: the file alone holds it all
    return path


def _sweep(spec: Path, db: Path) -> int:
    argv = ["sweep", "--spec", str(spec), "--db", str(db), "--backend", "interpreter", "--no-progress"]
    return cli.main(argv)


def _read(db: Path, sql: str) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql).fetchall()


@dataclass
class Calibration:
    """A whole sweep on a disk with room: per (kind of write, which of its kind) the space the sweep had
    taken before it and what it took; and the database it left (what the export tests read)."""

    taken: dict[tuple[str, int], tuple[int, int]]
    db: Path


@pytest.fixture(scope="module")
def calibration(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Calibration:
    folder = tmp_path_factory.mktemp("calibration")
    spec = write_spec(folder, TWO_BATCH_SPEC)
    with pytest.MonkeyPatch.context() as mp, space(folder / "disk") as disk:
        _fake_sweeps(mp)
        shutil.copy(template, disk.folder / "results.db")
        start = disk.used()
        spy = Spy(disk)
        spy.install(mp)
        assert _sweep(spec, disk.folder / "results.db") == 0
        # The driver's engine is disposed: its last connection checkpointed, the file holds it all.
        shutil.copy(disk.folder / "results.db", folder / "results.db")
    taken: dict[tuple[str, int], tuple[int, int]] = {}
    seen: dict[str, int] = {}
    for kind, before, after in spy.writes:
        taken[(kind, seen.get(kind, 0))] = (before - start, after - before)
        seen[kind] = seen.get(kind, 0) + 1
    return Calibration(taken, folder / "results.db")


@pytest.mark.parametrize("where", WHERE.values(), ids=WHERE.keys())
def test_a_full_disk_at_any_write_is_one_line_exit_3_and_the_same_command_resumes(
    tmp_path, monkeypatch, capsys, sweeping, template, calibration, where
) -> None:
    spec = write_spec(tmp_path, TWO_BATCH_SPEC)
    with space(tmp_path / "disk") as disk:
        db = disk.folder / "results.db"
        if where.kind == "database":  # a new database: the disk fills during its migrations (150 KB)
            left = 64 * 2**10
        else:
            if (where.kind, where.nth) not in calibration.taken:
                assert disk.kind == "pages", f"no {where.kind} write seen: {sorted(calibration.taken)}"
                pytest.skip(f"the {where.kind} write takes no new page: SQLite's page limit cannot stop it")
            shutil.copy(template, db)
            before, needs = calibration.taken[(where.kind, where.nth)]
            left = before + int(needs * where.room) // PAGE * PAGE
        disk.fill(left)
        spy = Spy(disk)
        spy.install(monkeypatch)
        code = _sweep(spec, db)
        out, err = capsys.readouterr()
        assert (spy.failed or "database") == where.kind, f"the disk filled at {spy.failed}: {err}"
        assert code == 3, err
        assert out == "" and len(err.splitlines()) == 1, err
        line = err.strip()
        assert line.startswith(f"error: cannot write to {db}: database or disk is full; "), line
        assert line.endswith("then run the same command again to resume"), line

        if where.kind == "database":
            assert "Nothing was stored" in line
            assert _read(db, "SELECT count(*) FROM sqlite_master") == [(0,)]  # the migrations rolled back
        elif where.kind == "open":
            assert "Nothing was stored" in line
            assert _read(db, "SELECT count(*) FROM sweeps") == [(0,)]
        else:
            ((sweep_id, status),) = _read(db, "SELECT id, status FROM sweeps")
            held = {s for (s,) in _read(db, "SELECT sweep_id FROM claims")}
            if where.marked or disk.kind == "pages":
                assert status == "interrupted" and held == set(), (status, held)
                assert f"Sweep #{sweep_id} is left interrupted, its claims released" in line, line
            else:  # its claims lapse: the next sweep finds it dead (db.claims.reap), as below
                assert status == "running" and held <= {sweep_id}, (status, held)
                assert f"Sweep #{sweep_id} could not be marked" in line, line
        stored = _read(db, "SELECT count(*) FROM measurements")[0][0] if where.kind != "database" else 0

        disk.free()
        assert _sweep(spec, db) == 0, capsys.readouterr().err
        points = _read(db, "SELECT DISTINCT variant, m, n, k, config_key FROM measurements")
        assert len(points) == TWO_BATCH_POINTS
        assert _read(db, "SELECT count(*) FROM measurements") == [(TWO_BATCH_POINTS,)]  # each once
        assert _read(db, "SELECT count(*) FROM claims") == [(0,)]
        statuses = [s for (s,) in _read(db, "SELECT status FROM sweeps ORDER BY id")]
        assert statuses == ["interrupted"] * (len(statuses) - 1) + ["finished"]
        assert _read(db, "PRAGMA integrity_check") == [("ok",)]
        if where.kind == "finish":  # every point was stored before the end failed: none measured again
            assert stored == TWO_BATCH_POINTS
        capsys.readouterr()


@pytest.mark.skipif(not CAN_MOUNT, reason="needs a tmpfs of its own (root): SQLite's page limit has no -shm")
def test_no_room_for_a_new_databases_shm_file_is_the_same_line_and_exit_3(tmp_path, capsys, sweeping) -> None:
    """Under 32 KiB free SQLite cannot make a new database's -shm file and says only "disk I/O error"
    (it was exit status 2 and "cannot open SQLite database", as if the file were damaged). That the
    same command then creates the database once there is room: the "database" case above."""
    spec = write_spec(tmp_path, TWO_BATCH_SPEC)
    with space(tmp_path / "disk") as disk:
        db = disk.folder / "results.db"
        disk.fill(16 * 2**10)
        code = _sweep(spec, db)
        out, err = capsys.readouterr()
        assert code == 3 and out == "" and len(err.splitlines()) == 1, err
        assert err.startswith(f"error: cannot write to {db}: disk I/O error (the disk is full); "), err
        assert "Nothing was stored" in err
        disk.free()
        check_before_writing(str(db))  # a sweep would start: an empty database, which it creates into
        assert _read(db, "SELECT count(*) FROM sqlite_master") == [(0,)]


@pytest.mark.skipif(
    not CAN_MOUNT, reason="needs a tmpfs of its own (root); SQLite's page limit cannot fill a file"
)
@pytest.mark.parametrize(
    "argv",
    [["export", "results"], ["export-best", "--include-interpreter"]],
    ids=["export", "export-best"],
)
def test_an_export_onto_a_full_disk_is_one_line_exit_3_and_no_partial_file(
    tmp_path, capsys, calibration, argv
) -> None:
    db = calibration.db  # 4 points
    with space(tmp_path / "disk") as disk:
        out = disk.folder / ("out.csv" if argv[0] == "export" else "best.json")
        out.write_text("kept\n")  # an earlier export: left as it was
        disk.fill(0)
        code = cli.main([*argv, "--db", str(db), "--out", str(out)])
        stdout, err = capsys.readouterr()
        assert code == 3, err
        assert stdout == "" and len(err.splitlines()) == 1, err
        assert err.startswith(f"error: cannot write {out}: No space left on device"), err
        assert out.read_text() == "kept\n"
        assert {p.name for p in disk.folder.iterdir()} == {"filler", out.name}  # no partial file
        disk.free()
        assert cli.main([*argv, "--db", str(db), "--out", str(out)]) == 0
        assert out.read_text() != "kept\n"
