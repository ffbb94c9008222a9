"""`farm db check`: the `ok` rows no time may be read from, found and (with --mark) marked `implausible`.

Two kinds of row fail (docs/design.md, "Physics checks"):
- impossible: a GPU kernel time db.physics.implausibility forbids (under the roofline, or far outside
  the stream time it was read beside). Rows of the cuda backend only: interpreter rows are CPU times.
- inconsistent: columns of one row that contradict each other, on any backend: the stored tflops is
  not 2MNK over the stored ms, or the median ms lies outside [ms_p20, ms_p80] (all three are
  quantiles of one sample set, farm.timing.samples.summarize).
Every ok row of the three shipped databases passes both but five impossible cuBLAS rows of the H100
study, which revision 0009 marks.

find() reads a database at any schema revision, so an older one is checked before it is upgraded:
it asks the measurements table for the columns it holds (stream_ms came in revision 0002; an older
row has none and is checked against the roofline alone). SQL picks the candidates, a superset of
what the rules reject (the thresholds loosened by CANDIDATE_SLACK, so floating-point rounding in
either database's arithmetic drops no row), and the rules in Python decide: one pass over the
measurements, however many there are. mark() needs revision 0009 (the status word).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, bindparam, inspect, text, update

from db import physics, schema
from db.engine import describe, make_engine
from db.errors import DatabaseError
from db.models import Measurement
from db.records import Status, utcnow
from db.summaries import Group, refresh

# The stored tflops is kernels.sizes.tflops(m, n, k, ms) of the stored ms (farm.metrics), so the two
# agree to the last bit on every shipped row; 0.1% lets a row whose tflops was rounded to 4
# significant digits pass (at most 0.05% off).
TFLOPS_TOLERANCE = 1e-3
# p20, median and p80 of one sorted sample set are ordered; shipped rows sit inside to 2e-16 (float
# rounding of the interpolated quantiles), so this allows rounding and nothing more.
QUANTILE_TOLERANCE = 1e-9
# How much the SQL that picks candidates loosens every threshold: 1% admits any row SQL's floating
# point could put on the wrong side, and the Python rules decide.
CANDIDATE_SLACK = 1.01

# What the check shows of a row (`farm db check`'s table), then the reason.
SHOWN = ("id", "sweep_id", "variant", "dtype", "m", "n", "k", "config_key", "ms", "stream_ms")
# Columns an older revision may lack, read as NULL there.
OPTIONAL = ("stream_ms", "sweep_id")


@dataclass(frozen=True)
class Finding:
    """One ok row that fails a check, and why."""

    id: int
    environment_id: int
    sweep_id: int | None
    variant: str
    dtype: str
    m: int
    n: int
    k: int
    config_key: str
    ms: float | None
    stream_ms: float | None
    reason: str

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"


@dataclass(frozen=True)
class Report:
    """What find() read: the database's revision, the ok rows it checked, and the rows that failed."""

    revision: str
    n_ok: int
    findings: list[Finding]


def inconsistency(
    m: int, n: int, k: int, ms: float | None, ms_p20: float | None, ms_p80: float | None, tflops: float | None
) -> str:
    """Why one row's columns contradict each other, or "" where they agree (missing columns pass)."""
    if ms is None or not ms > 0:
        return ""  # no time to check against (a non-positive one is physics' to name)
    if tflops is not None:
        derived = 2.0 * m * n * k / (ms * 1e-3) / 1e12
        if abs(tflops - derived) > TFLOPS_TOLERANCE * derived:
            return f"stored tflops {tflops:.4g} is not 2MNK / ms = {derived:.4g}"
    low, high = ms * (1 - QUANTILE_TOLERANCE), ms * (1 + QUANTILE_TOLERANCE)
    if ms_p20 is not None and ms_p20 > high:
        return f"median {ms * 1e3:.4g} us is below its p20 {ms_p20 * 1e3:.4g} us"
    if ms_p80 is not None and ms_p80 < low:
        return f"median {ms * 1e3:.4g} us is above its p80 {ms_p80 * 1e3:.4g} us"
    return ""


def _bytes_sql() -> str:
    cases = " ".join(f"WHEN '{d}' THEN {b}" for d, b in physics.DTYPE_BYTES.items())
    return f"CASE r.dtype {cases} ELSE 0 END"


def _candidates(physics_only: bool, stream: str) -> str:
    """SQL over `measurements r JOIN environments e`: a superset of the ok rows the rules reject.
    `stream`: the stream time's column (NULL where the revision has none)."""
    s = CANDIDATE_SLACK
    tflops = f"CASE WHEN e.peak_tflops > 0 THEN e.peak_tflops ELSE {physics.ANY_GPU_TFLOPS} END"
    gbps = f"CASE WHEN e.peak_gbps > 0 THEN e.peak_gbps ELSE {physics.ANY_GPU_GBPS} END"
    # Floats from the first product: M x K passes PostgreSQL's 32-bit integer at 36000 x 65536.
    mnk = "CAST(r.m AS FLOAT) * r.n * r.k"
    operands = f"(CAST(r.m AS FLOAT) * r.k + CAST(r.k AS FLOAT) * r.n) * {_bytes_sql()}"
    margin = physics.ROOF_MARGIN / s
    rules = [
        "r.ms <= 0",
        # db.physics.roofline_floor_ms in ms: 2MNK / (TFLOP/s x 1e9), bytes / (GB/s x 1e6)
        f"r.ms * {margin} < 2.0 * {mnk} / (({tflops}) * 1e9)",
        f"r.ms * {margin} < {operands} / (({gbps}) * 1e6)",
        f"({stream} > 0 AND r.ms * {s} > {physics.STREAM_SLACK} * {stream})",
        f"({stream} > 0 AND {stream} * {s} > {physics.STREAM_SPREAD} * r.ms)",
    ]
    where = f"(r.backend = 'cuda' AND ({' OR '.join(rules)}))"
    if not physics_only:
        derived = f"(2.0 * {mnk} / (r.ms * 1e9))"
        consistency = [
            f"(r.tflops IS NOT NULL AND r.ms > 0 AND ABS(r.tflops - {derived}) * {s} > "
            f"{TFLOPS_TOLERANCE} * {derived})",
            "r.ms_p20 > r.ms",
            "r.ms_p80 < r.ms",
        ]
        where = f"({where} OR {' OR '.join(consistency)})"
    return f"r.status = 'ok' AND r.ms IS NOT NULL AND {where}"


def find(conn: Connection, *, physics_only: bool = False) -> list[Finding]:
    """Every ok row that fails a check (only the physics rules with physics_only), by id. Reads a
    measurements table of any revision (OPTIONAL columns it lacks read as NULL)."""
    held = {c["name"] for c in inspect(conn).get_columns("measurements")}
    col = {c: f"r.{c}" if c in held else "NULL" for c in OPTIONAL}
    stream = col["stream_ms"]
    stmt = text(
        f"SELECT r.id, r.environment_id, {col['sweep_id']}, r.variant, r.dtype, r.m, r.n, r.k, r.config_key, "
        f"r.ms, {stream}, r.ms_p20, r.ms_p80, r.tflops, r.backend, e.peak_tflops, e.peak_gbps "
        "FROM measurements r JOIN environments e ON e.id = r.environment_id "
        f"WHERE {_candidates(physics_only, stream)} ORDER BY r.id"
    )
    out = []
    for row in conn.execute(stmt):
        id_, env, sweep, variant, dtype, m, n, k, key, ms, stream_ms, p20, p80, tflops, backend, pt, pg = row
        reason = ""
        # The farm measures these dtypes alone (kernels.sizes.DTYPE_BYTES); another has no roof here.
        if backend == "cuda" and dtype in physics.DTYPE_BYTES:
            reason = physics.implausibility(m, n, k, dtype, ms, stream_ms, pt or 0.0, pg or 0.0)
        if not reason and not physics_only:
            reason = inconsistency(m, n, k, ms, p20, p80, tflops)
        if reason:
            out.append(Finding(id_, env, sweep, variant, dtype, m, n, k, key, ms, stream_ms, reason))
    return out


def ok_rows(conn: Connection) -> int:
    return int(conn.execute(text("SELECT COUNT(*) FROM measurements WHERE status = 'ok'")).scalar_one())


_UNCOUNT_OK = text(
    "UPDATE sweeps SET n_ok = CASE WHEN n_ok > :c THEN n_ok - :c ELSE 0 END, n_failed = n_failed + :c "
    "WHERE id = :s"
)


def mark(conn: Connection, findings: Iterable[Finding]) -> int:
    """Store each finding's row as `implausible` with its reason in `error` (its times kept, for
    inspection), in the caller's transaction, and bring what the writers keep in line: the summaries of
    the rows' groups (db.summaries.refresh: no best row, count or view reads them as times any more) and
    their sweeps' n_ok and n_failed. Rows no longer ok are left alone. How many rows it marked."""
    findings = list(findings)
    if not findings:
        return 0
    t = Measurement.__table__
    stmt = (
        update(t)
        .where(t.c.id == bindparam("row_id"), t.c.status == Status.OK)
        .values(status=Status.IMPLAUSIBLE, error=bindparam("reason"), updated_at=bindparam("now"))
    )
    now = utcnow()
    marked = []
    for f in findings:  # one by one: the rowcount says whether a concurrent write had changed it
        if conn.execute(stmt, {"row_id": f.id, "reason": f.reason, "now": now}).rowcount:
            marked.append(f)
    groups: dict[int, set[Group]] = defaultdict(set)
    for f in marked:
        groups[f.environment_id].add((f.dtype, f.m, f.n, f.k, f.variant))
    for env_id, touched in sorted(groups.items()):
        refresh(conn, env_id, touched)
    # A sweep counted each of these points ok when it finished: it did not give a time.
    per_sweep = Counter(f.sweep_id for f in marked if f.sweep_id is not None)
    if per_sweep:
        conn.execute(_UNCOUNT_OK, [{"s": s, "c": c} for s, c in sorted(per_sweep.items())])
    return len(marked)


# ---- `farm db check` on a target ----


def read(target: str) -> Report:
    """Check the database at `target` read-only, at whatever revision it is (never upgraded). Raises
    DatabaseError for what is no farm results database: missing, damaged, empty, or of a newer revision."""
    engine = make_engine(target, readonly=True)
    try:
        revision = _known_revision(engine)
        with engine.connect() as conn:
            return Report(revision, ok_rows(conn), find(conn))
    finally:
        engine.dispose()


def mark_target(target: str) -> tuple[str, str, int]:
    """Bring the database at `target` to head (an upgrade from before revision 0009 marks the impossible
    rows on its way), then mark every row find() still names, in one transaction. (revision before,
    revision after, rows marked by both steps together)."""
    read(target)  # refuses what is no farm results database before it is opened for writing
    engine = make_engine(target)
    try:
        before = _known_revision(engine)
        with engine.connect() as conn:
            implausible_before = _count(conn, Status.IMPLAUSIBLE)
        schema.upgrade(engine)
        with engine.begin() as conn:
            mark(conn, find(conn))
            marked = _count(conn, Status.IMPLAUSIBLE) - implausible_before
        return before, schema.current(engine) or "", marked
    finally:
        engine.dispose()


def _count(conn: Connection, status: str) -> int:
    stmt = text("SELECT COUNT(*) FROM measurements WHERE status = :s")
    return int(conn.execute(stmt, {"s": str(status)}).scalar_one())


def _known_revision(engine: Engine) -> str:
    revision = schema.current(engine)
    if revision is None:
        raise DatabaseError(f"{describe(engine)} is not a farm results database (it has no schema revision)")
    if not schema.known(revision):
        raise DatabaseError(
            f"{describe(engine)} is at schema revision {revision}, which this version of the code does not "
            f"know (it knows up to {schema.head()}): it was written by a newer version; use that version"
        )
    return revision
