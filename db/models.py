"""Typed models of the tables: environments, sweeps, measurements, and the per-shape summaries.

Column names are the field names of `db.records` (the farm's records), so a record becomes a row
without a mapping table. Revisions 0001 to 0006 in `db/migrations` create the same schema with
explicit DDL; `tests/db` checks that the two agree (tests/db/test_columns.py: that records, models,
views, the worker and the migrated schema name the same measurement columns).
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import DateTime, TypeDecorator

from db.records import Backend, Status


class SweepStatus(StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    # stopped by the user (Ctrl-C), or its driver died: the next sweep that opens the database finds its
    # heartbeat stale (db.claims.STALE_AFTER_S) and marks it so
    INTERRUPTED = "interrupted"
    FAILED = "failed"  # the driver gave up (an exception outside any one point)


class UTCDateTime(TypeDecorator[datetime]):
    """Timestamps in UTC on both backends; Python always gets an aware datetime back.

    PostgreSQL stores `timestamptz`; SQLite has no time type and stores ISO text, so values are
    stored as naive UTC there (text in one zone sorts in time order) and made aware on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# A point: what is measured (one config of a variant on one shape and dtype, in one environment and code
# version). Every sweep's measurement of it is kept as a run of it (revision 0006): a `farm sweep --repeat`
# measures every point again under its own sweep, and the views show the newest run (latest = 1).
POINT = ("environment_id", "code_version", "variant", "dtype", "m", "n", "k", "config_key")
# A config's columns, what config_key names (kernels.MatmulConfig's fields; db does not import kernels).
CONFIG_COLUMNS = (
    "block_m", "block_n", "block_k", "group_m", "split_k", "num_warps", "num_stages", "input_precision",
)  # fmt: skip
# The identity of a row: a point in one run. Writing it again in the same sweep updates its row (db.writes).
POINT_KEY = (*POINT, "sweep_id")
# Column order: equality filters first (environment <- gpu_name, status = 'ok', dtype), then what
# filter_options groups by (variant), then the rest of the config, ms last (MIN(ms) is the first entry).
# Equality filters of one shape first (results() of a shape, done_keys per shape), then the rest of
# the point key and the status: done_keys' columns and filters.
SHAPE_INDEX = (
    "environment_id", "dtype", "m", "n", "k", "variant", "code_version", "config_key", "status",
)  # fmt: skip
VIEW_INDEX = (
    "environment_id",
    "status",
    "latest",  # the views read the newest run of each point: an equality filter, with status
    "dtype",
    "variant",
    "m",
    "n",
    "k",
    "block_m",
    "block_n",
    "block_k",
    "split_k",
    "num_warps",
    "num_stages",
    "group_m",
    "ms",
)


# The sweep of rows written without one (a manual import; revision 0006 moved older such rows to it). Its
# identity (name, host, start time) is the same in every database, so db.merge maps it onto itself; it
# holds rows but never ran, so the summary neither counts it nor shows it as the last sweep.
UNATTRIBUTED = {"name": "unattributed", "host": "", "started_at": datetime(1970, 1, 1, tzinfo=UTC)}


def _in(column: str, words: type[StrEnum]) -> str:
    return f"{column} IN ({', '.join(repr(str(w)) for w in words)})"


# Shared column types. Byte counts are BIGINT: an H200 has 141e9 bytes of memory and the operands
# of a 65536^3 fp32 problem take 51e9, both past INTEGER's 2.1e9 on PostgreSQL.
int_pk = Annotated[int, mapped_column(Integer, primary_key=True)]
byte_count = Annotated[int, mapped_column(BigInteger)]
label = Annotated[str, mapped_column(String)]
blank_text = Annotated[str, mapped_column(Text, default="", server_default="")]
utc_time = Annotated[datetime, mapped_column(UTCDateTime)]

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        int: Integer,
        float: Float(53),
        bool: Boolean,
        str: String,
    }


class Environment(Base):
    """One row per distinct `EnvironmentInfo.fingerprint` (GPU model and software stack)."""

    __tablename__ = "environments"

    id: Mapped[int_pk]
    fingerprint: Mapped[str] = mapped_column(String, unique=True)
    gpu_name: Mapped[label] = mapped_column(index=True)
    sm_count: Mapped[int]
    l2_bytes: Mapped[byte_count]
    memory_bytes: Mapped[byte_count]
    compute_capability: Mapped[label]
    driver_version: Mapped[label]
    cuda_version: Mapped[label]
    torch_version: Mapped[label]
    triton_version: Mapped[label]
    ray_version: Mapped[label]
    python_version: Mapped[label]
    host: Mapped[label]
    project_version: Mapped[label]
    backend: Mapped[label]
    peak_tflops: Mapped[float]
    peak_gbps: Mapped[float]
    created_at: Mapped[utc_time]

    __table_args__ = (CheckConstraint(_in("backend", Backend), name="backend"),)


class Sweep(Base):
    __tablename__ = "sweeps"

    id: Mapped[int_pk]
    name: Mapped[label]
    spec: Mapped[str] = mapped_column(Text)  # the expanded grid spec as JSON
    command: Mapped[blank_text]
    host: Mapped[label]
    started_at: Mapped[utc_time]
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    status: Mapped[label]
    n_points: Mapped[int]
    n_ok: Mapped[int] = mapped_column(default=0, server_default="0")
    n_failed: Mapped[int] = mapped_column(default=0, server_default="0")
    # Refreshed by the running driver (db.claims.heartbeat): a running sweep whose heartbeat is stale
    # has died, its claims expire and the next sweep marks it interrupted (revision 0006).
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The driver's process id on `host`: a running sweep of this host whose process is gone died (a kill
    # -9, a crash), and a resume right after it need not wait out the heartbeat (revision 0006).
    pid: Mapped[int | None]

    __table_args__ = (CheckConstraint(_in("status", SweepStatus), name="status"),)


class Measurement(Base):
    """One run (sweep) of one point (variant x dtype x shape x config) in one environment; fields as in
    MeasurementRecord."""

    __tablename__ = "measurements"

    id: Mapped[int_pk]
    environment_id: Mapped[int] = mapped_column(ForeignKey("environments.id"))
    # The run: a write without a sweep (a manual import) goes to the database's unattributed sweep
    # (db.writes.UNATTRIBUTED), as revision 0006 moved older rows without one.
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"))
    # 1 on the newest run of its point (the last measured: db.writes, db.merge), 0 on the older ones;
    # the views, summaries and resume read the newest.
    latest: Mapped[int] = mapped_column(default=1, server_default="1")
    # identity
    code_version: Mapped[label]
    variant: Mapped[label]
    dtype: Mapped[label]
    m: Mapped[int]
    n: Mapped[int]
    k: Mapped[int]
    config_key: Mapped[label]
    # config
    block_m: Mapped[int]
    block_n: Mapped[int]
    block_k: Mapped[int]
    group_m: Mapped[int]
    split_k: Mapped[int]
    num_warps: Mapped[int]
    num_stages: Mapped[int]
    input_precision: Mapped[label]
    # outcome
    status: Mapped[label]
    error: Mapped[blank_text]
    ms: Mapped[float | None]
    ms_p20: Mapped[float | None]
    ms_p80: Mapped[float | None]
    reps: Mapped[int | None]
    stream_ms: Mapped[float | None]
    host_ms: Mapped[float | None]
    eager_ms: Mapped[float | None]  # db.records.eager_ms of the two above (revision 0007)
    timing_regime: Mapped[blank_text]
    tflops: Mapped[float | None]
    rel_err: Mapped[float | None]
    nondeterminism: Mapped[float | None]
    tiles: Mapped[int | None]
    programs: Mapped[int | None]
    tiles_per_sm: Mapped[float | None]
    waves: Mapped[float | None]
    occupancy: Mapped[int | None]
    operand_bytes: Mapped[int | None] = mapped_column(BigInteger)
    registers: Mapped[int | None]
    shared_mem: Mapped[int | None]
    compile_s: Mapped[float | None]
    sm_clock_mhz: Mapped[int | None]
    temperature_c: Mapped[int | None]
    throttled: Mapped[bool | None]
    throttle_reasons: Mapped[blank_text]
    joules_per_launch: Mapped[float | None]
    avg_watts: Mapped[float | None]
    power_limit_w: Mapped[float | None]
    worker: Mapped[blank_text]
    gpu_uuid: Mapped[blank_text]
    backend: Mapped[label]
    created_at: Mapped[utc_time]  # when it was measured (the record's time)
    updated_at: Mapped[utc_time]  # when it was last written here

    __table_args__ = (
        UniqueConstraint(*POINT_KEY, name="uq_measurements_point"),
        # The views' and dashboard's index: rows of one environment, status and dtype, with every
        # config column and ms, so the views rank and pair rows from the index alone and
        # grouping_effect finds a config's group_m = 1 time with one lookup (0.85 s -> 0.11 s on
        # 1M rows); summary and filter_options scan it in order. About 60 bytes a row.
        Index("ix_measurements_view", *VIEW_INDEX),
        Index(None, "sweep_id"),
        # results() per environment (revision 0004): its newest rows of a dtype, read backwards with a
        # LIMIT, and the rows of one shape (1.7-2.4 s and 0.6-0.8 s at 10M through the unique index).
        # The shape index carries the rest of the point key and the status, so a resume's done_keys
        # reads its shapes from it alone, with or without code versions (1.4 s at 10M without).
        Index("ix_measurements_recent", "environment_id", "dtype", "id"),
        Index("ix_measurements_shape", *SHAPE_INDEX),
        CheckConstraint(_in("status", Status), name="status"),
        CheckConstraint(_in("backend", Backend), name="backend"),
    )


# ---- per-shape summaries that the writer keeps (db.summaries; revision 0003) ----
# The fastest ok row of small groups, so the views best_configs, splitk_speedup and vs_cublas rank
# thousands of summary rows instead of every measurement of a GPU and dtype (0.8-1.0 s each on 1M
# rows before; docs/results/db_views.md). Per environment: the views' gpu_name takes the best over
# the environments of that GPU. No foreign keys: the rows are derived data, and SQLite refuses the
# table rebuild of a later migration's batch ALTER of measurements while a foreign key points at it.
SUMMARY_SHAPE = ("environment_id", "dtype", "m", "n", "k")


class ShapeBest(Base):
    """Per (environment, dtype, m, n, k, variant): the fastest ok measurement (lowest ms, then id)."""

    __tablename__ = "shape_best"

    environment_id: Mapped[int] = mapped_column(primary_key=True)
    dtype: Mapped[label] = mapped_column(primary_key=True)
    m: Mapped[int] = mapped_column(primary_key=True)
    n: Mapped[int] = mapped_column(primary_key=True)
    k: Mapped[int] = mapped_column(primary_key=True)
    variant: Mapped[label] = mapped_column(primary_key=True)
    measurement_id: Mapped[int]
    ms: Mapped[float]


class SplitBest(Base):
    """Per (environment, dtype, m, n, k, block_m, block_n, is_split): the fastest ok measurement of any
    variant but cuBLAS with split_k = 1 (is_split 0) or split_k > 1 (is_split 1)."""

    __tablename__ = "split_best"

    environment_id: Mapped[int] = mapped_column(primary_key=True)
    dtype: Mapped[label] = mapped_column(primary_key=True)
    m: Mapped[int] = mapped_column(primary_key=True)
    n: Mapped[int] = mapped_column(primary_key=True)
    k: Mapped[int] = mapped_column(primary_key=True)
    block_m: Mapped[int] = mapped_column(primary_key=True)
    block_n: Mapped[int] = mapped_column(primary_key=True)
    is_split: Mapped[int] = mapped_column(primary_key=True)
    measurement_id: Mapped[int]
    ms: Mapped[float]
    # The row's columns that splitk_speedup shows (revision 0005): it fetched 36k rows by id at 10M.
    split_k: Mapped[int]
    variant: Mapped[label]
    tiles: Mapped[int | None]
    tiles_per_sm: Mapped[float | None]


# ---- summaries for the dashboard's other questions (db.summaries; revision 0004) ----
# Counts and accuracy aggregates per status, so summary, filter_options, environments and accuracy
# read a few hundred rows instead of every measurement (1.0-4.5 s each on 10M rows before), and the
# grouping_effect view's own rows. The aggregates combine across rows: counts and sums add up, maxima
# take the max; rel_err_mean is rel_err_sum / rel_err_n.
class _Stats:
    """Rows of one status, and over them the accuracy columns as accuracy() aggregates them."""

    n_rows: Mapped[int]
    rel_err_max: Mapped[float | None]
    rel_err_sum: Mapped[float | None]
    rel_err_n: Mapped[int]  # rows with a rel_err
    nondet_max: Mapped[float | None]
    nondet_sq_per_k_max: Mapped[float | None]  # max(nondeterminism^2 / k)
    n_nondet: Mapped[int]  # rows with nondeterminism > 0


class ShapeStats(_Stats, Base):
    """Per (environment, dtype, variant, m, n, k, status): what variant_stats is recomputed from when a
    write touches one shape (a variant of an environment holds up to 10^5 rows; a shape about 100)."""

    __tablename__ = "shape_stats"

    environment_id: Mapped[int] = mapped_column(primary_key=True)
    dtype: Mapped[label] = mapped_column(primary_key=True)
    variant: Mapped[label] = mapped_column(primary_key=True)
    m: Mapped[int] = mapped_column(primary_key=True)
    n: Mapped[int] = mapped_column(primary_key=True)
    k: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[label] = mapped_column(primary_key=True)


class VariantStats(_Stats, Base):
    """Per (environment, dtype, variant, status), with the range of m, n and k of its rows."""

    __tablename__ = "variant_stats"

    environment_id: Mapped[int] = mapped_column(primary_key=True)
    dtype: Mapped[label] = mapped_column(primary_key=True)
    variant: Mapped[label] = mapped_column(primary_key=True)
    status: Mapped[label] = mapped_column(primary_key=True)
    m_min: Mapped[int]
    m_max: Mapped[int]
    n_min: Mapped[int]
    n_max: Mapped[int]
    k_min: Mapped[int]
    k_max: Mapped[int]


GROUPING_BEST_COLUMNS = (
    "gpu_name", "dtype", "m", "n", "k", "variant", "block_m", "block_n", "block_k", "split_k", "num_warps",
    "num_stages", "group_m", "ms", "ms_group1", "operand_bytes", "l2_bytes",
)  # fmt: skip


class GroupingBest(Base):
    """The grouping_effect view's rows: per (gpu_name, dtype, m, n, k, variant, block config, group_m > 1),
    the fastest ok time, the fastest ok time of group_m = 1 with the same config (ms_group1), and the
    largest operand_bytes and l2_bytes of those rows; kept per GPU model, as the view compares."""

    __tablename__ = "grouping_best"

    gpu_name: Mapped[label] = mapped_column(primary_key=True)
    dtype: Mapped[label] = mapped_column(primary_key=True)
    m: Mapped[int] = mapped_column(primary_key=True)
    n: Mapped[int] = mapped_column(primary_key=True)
    k: Mapped[int] = mapped_column(primary_key=True)
    variant: Mapped[label] = mapped_column(primary_key=True)
    block_m: Mapped[int] = mapped_column(primary_key=True)
    block_n: Mapped[int] = mapped_column(primary_key=True)
    block_k: Mapped[int] = mapped_column(primary_key=True)
    split_k: Mapped[int] = mapped_column(primary_key=True)
    num_warps: Mapped[int] = mapped_column(primary_key=True)
    num_stages: Mapped[int] = mapped_column(primary_key=True)
    group_m: Mapped[int] = mapped_column(primary_key=True)
    ms: Mapped[float]
    ms_group1: Mapped[float]
    operand_bytes: Mapped[int | None] = mapped_column(BigInteger)
    l2_bytes: Mapped[int | None] = mapped_column(BigInteger)

    # Every column, key first (revision 0005): grouping_effect of a GPU and dtype reads it alone and in
    # the query's order. PostgreSQL scanned the table and sorted instead (10M rows: 0.19 s for 54,577
    # rows, an index-only scan 0.02-0.03 s). About 130 bytes a row.
    __table_args__ = (Index("ix_grouping_best_rows", *GROUPING_BEST_COLUMNS),)


class SweepCount(Base):
    """Per sweep: its rows (those no later sweep rewrote). stale = 1 marks a sweep that a write in progress
    may have changed: refresh recounts it from the sweep_id index before the transaction ends."""

    __tablename__ = "sweep_counts"

    sweep_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    n_rows: Mapped[int]
    stale: Mapped[int]


# The key of gpu_best and of the best_configs view: the best row per GPU model, dtype, shape and variant.
GPU_BEST_KEY = ("dtype", "m", "n", "k", "variant")
# The winning measurement's columns that gpu_best keeps a copy of (revision 0005): all but its id (kept
# as measurement_id), the key and `latest` (a winner is the newest run of its point). best_configs then
# reads gpu_best alone; fetching the 14,175 winners of a GPU and dtype by id was 0.33 s of its 0.42 s of
# SQL on PostgreSQL at 10M rows.
GPU_BEST_COPIED = tuple(
    c.name for c in Measurement.__table__.c if c.name not in ("id", "latest", *GPU_BEST_KEY)
)


class GpuBest(Base):
    """Per (gpu_name, dtype, m, n, k, variant): the fastest ok measurement over the GPU model's environments
    (the best of their shape_best rows), with a copy of its columns, which the best_configs view reads.

    Declared from Measurement's columns (same types and nullability, no foreign keys: derived rows),
    so the copy keeps in step with the table it copies.
    """

    __table__ = Table(
        "gpu_best",
        Base.metadata,
        Column("gpu_name", String, primary_key=True),
        *(Column(name, Measurement.__table__.c[name].type, primary_key=True) for name in GPU_BEST_KEY),
        Column("measurement_id", Integer, nullable=False),
        *(
            Column(c.name, c.type, nullable=c.nullable)
            for c in Measurement.__table__.c
            if c.name in GPU_BEST_COPIED
        ),
    )


# ---- point claims (revision 0006) ----
CLAIM_KEY = (*POINT, "run")


class Claim(Base):
    """A point a running sweep is about to measure, so that a second sweep into the same database skips
    it instead of measuring it too (db.claims). Deleted when its row is written or its sweep ends; one
    whose sweep's heartbeat went stale has expired. No foreign keys: transient rows.

    run is 0 for a sweep that measures what no run holds yet (every such sweep competes for the same
    claim), and a `--repeat` sweep's own id: it measures every point again as its own run.
    """

    __tablename__ = "claims"

    environment_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    code_version: Mapped[label] = mapped_column(primary_key=True)
    variant: Mapped[label] = mapped_column(primary_key=True)
    dtype: Mapped[label] = mapped_column(primary_key=True)
    m: Mapped[int] = mapped_column(primary_key=True)
    n: Mapped[int] = mapped_column(primary_key=True)
    k: Mapped[int] = mapped_column(primary_key=True)
    config_key: Mapped[label] = mapped_column(primary_key=True)
    run: Mapped[int] = mapped_column(primary_key=True)
    sweep_id: Mapped[int]
    claimed_at: Mapped[utc_time]

    # A sweep's claims: released together when it ends, expired together when it dies.
    __table_args__ = (Index(None, "sweep_id"),)
