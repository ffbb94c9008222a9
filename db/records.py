"""Plain records that cross process boundaries: GPU workers build them, the driver writes them.

They are dataclasses, not ORM objects (STYLE: no ORM objects across processes), and their field
order is the column order of CSV exports. The status words are the design's contract.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum


class Status(StrEnum):
    """How one measurement ended. A failed point is a row with one of these, never a gap."""

    OK = "ok"
    WRONG = "wrong"  # ran, but failed the accuracy check
    COMPILE_ERROR = "compile_error"  # Triton could not compile it, or it does not fit the device
    LAUNCH_ERROR = "launch_error"  # the launcher or the launch raised
    CRASHED = "crashed"  # the worker process died (after one retry)
    TIMEOUT = "timeout"  # ran past its deadline; the worker was killed
    TOO_LARGE = "too_large"  # its operands and output cannot fit in the target's memory: not run
    # its time broke physics twice (db.physics: under the roofline, or far outside its stream time):
    # the times are kept for inspection, never read as times
    IMPLAUSIBLE = "implausible"
    # the instrument failed (the profiler, CUPTI, NVML), twice: not the kernel's fault
    INSTRUMENT_ERROR = "instrument_error"


# The most a point's average power may exceed its enforced limit before its energy counts as
# misread. Grouping sweeps on an H200 that read energy at each block's two ends stored 1084 W on
# average (up to 2596 W) for rows throttled at a 700 W limit: no board holds that over a block.
# The farm stores no such energy (docs/design.md, "Energy"); db.queries leaves older rows' out of what
# it reports.
POWER_LIMIT_EXCESS = 1.1

# The steady regime's first sub-block, in seconds of GPU work: 20 ms tells a GPU below its power limit
# (docs/design.md, "The steady regime"). A config at the limit settles only where a sweep's
# max_settle_s outlasts it (docs/design.md, "No settling at the power limit"): the farm's timing policy
# times with it, and the dashboard reads stored sweep specs with it (it may not import the farm).
FIRST_SUB_BLOCK_S = 0.02


# The early cut (docs/design.md, "The early cut"): a point whose first samples read over CUT_FACTOR times
# the best kernel time stored for its shape stops at the minimum repetitions, and its stored regime
# carries CUT_SUFFIX ("steady+cut"). The same config differs by 0.8% between two runs at the median and
# 6.8% at the 90th percentile (docs/design.md, "Search"), so a point 3x off the best is hopeless by a
# margin no noise closes; its time is still a measurement. The farm cuts with these; the dashboard
# reads stored regimes with them.
CUT_FACTOR = 3.0
CUT_SUFFIX = "+cut"


def eager_ms(stream_ms: float | None, host_ms: float | None) -> float | None:
    """What a caller without CUDA graphs waits for per call: the host issuing the launcher's kernels or the
    GPU running them (idle gaps included), whichever is longer; None unless both were measured (rows
    from before revision 0002 have no host time). The one definition: records fill their eager_ms from
    it, revision 0007 filled older rows with the same CASE, and kernels.dispatch's
    `Candidate.eager_wait_ms` estimates it (kernels imports nothing of db)."""
    if stream_ms is None or host_ms is None:
        return None
    return max(stream_ms, host_ms)


class Backend(StrEnum):
    CUDA = "cuda"
    INTERPRETER = "interpreter"  # TRITON_INTERPRET=1 on the CPU: times are not GPU times


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class EnvironmentInfo:
    """What a result depends on besides the code: the GPU model and the software stack.

    One row per distinct fingerprint. A point measured on a machine with the same fingerprint
    (same host, GPU model and versions) counts as done when a sweep resumes. The fingerprint
    hashes what the hardware and software are (IDENTITY_FIELDS), not the display data beside
    them: the roofline's peaks come from a datasheet table, and editing that table must not make
    a new environment that measures everything again.
    """

    gpu_name: str
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    compute_capability: str  # "9.0"; "" on the interpreter
    driver_version: str
    cuda_version: str
    torch_version: str
    triton_version: str
    ray_version: str
    python_version: str
    host: str
    project_version: str
    backend: str = Backend.CUDA
    # Datasheet-free ceilings for the roofline; 0 where unknown.
    peak_tflops: float = 0.0  # dense bf16/fp16 tensor-core TFLOP/s
    peak_gbps: float = 0.0  # DRAM bandwidth, GB/s, from NVML bus width x max memory clock

    @property
    def fingerprint(self) -> str:
        blob = json.dumps({f: getattr(self, f) for f in IDENTITY_FIELDS}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass
class MeasurementRecord:
    """One point (variant x dtype x shape x config) as measured by one worker.

    Identity (the unique key, with the environment): code_version, variant, dtype, m, n, k,
    config_key. Everything else is a measurement. Optional fields stay None when the point
    failed before they could be measured or the backend cannot tell (interpreter).
    """

    # identity
    code_version: str
    variant: str
    dtype: str
    m: int
    n: int
    k: int
    config_key: str
    # config columns
    block_m: int
    block_n: int
    block_k: int
    group_m: int
    split_k: int
    num_warps: int
    num_stages: int
    input_precision: str
    # outcome
    status: str
    error: str = ""
    # timing, milliseconds per call. ms (median, p20, p80) is kernel time: the launcher's GPU kernels
    # as CUPTI times them; stream_ms adds the idle gaps between them (CUDA events around the call);
    # host_ms is the host's time per call. All three are one wall time on the interpreter.
    ms: float | None = None
    ms_p20: float | None = None
    ms_p80: float | None = None
    reps: int | None = None
    stream_ms: float | None = None
    host_ms: float | None = None
    # eager_ms(stream_ms, host_ms), filled from them when left None: the objective "eager" ranks by it,
    # "kernel" by ms (db.queries.best_configs)
    eager_ms: float | None = None
    # "steady" | "interleaved" | "rest" (docs/design.md, "Timing regimes"); "" if never timed
    timing_regime: str = ""
    tflops: float | None = None
    # accuracy
    rel_err: float | None = None
    nondeterminism: float | None = None  # max |c1 - c2| over repeated runs (atomic variants)
    # derived (farm.metrics computes; nothing else recomputes)
    tiles: int | None = None
    programs: int | None = None
    tiles_per_sm: float | None = None
    waves: float | None = None
    occupancy: int | None = None  # programs resident per SM
    operand_bytes: int | None = None  # A + B + C bytes
    # compiled kernel
    registers: int | None = None
    shared_mem: int | None = None  # bytes per program
    compile_s: float | None = None
    # GPU state around the measurement
    sm_clock_mhz: int | None = None
    temperature_c: int | None = None
    throttled: bool | None = None
    throttle_reasons: str = ""
    # energy: NVML's energy counter over the timed blocks (docs/design.md, "Energy")
    joules_per_launch: float | None = None
    avg_watts: float | None = None
    power_limit_w: float | None = None  # the limit the driver enforced
    # where and when
    worker: str = ""
    gpu_uuid: str = ""
    backend: str = Backend.CUDA
    created_at: datetime = field(default_factory=utcnow)

    def __post_init__(self) -> None:
        if self.eager_ms is None:
            self.eager_ms = eager_ms(self.stream_ms, self.host_ms)

    @property
    def key(self) -> tuple:
        """The identity of the point within one environment (the resume key)."""
        return point_key(self.code_version, self.variant, self.dtype, self.m, self.n, self.k, self.config_key)


def point_key(code_version: str, variant: str, dtype: str, m: int, n: int, k: int, config_key: str) -> tuple:
    return (code_version, variant, dtype, int(m), int(n), int(k), config_key)


MEASUREMENT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(MeasurementRecord))
ENVIRONMENT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(EnvironmentInfo))
# Stored and shown, but not part of what the environment is (see EnvironmentInfo).
DISPLAY_FIELDS: tuple[str, ...] = ("peak_tflops", "peak_gbps")
IDENTITY_FIELDS: tuple[str, ...] = tuple(f for f in ENVIRONMENT_FIELDS if f not in DISPLAY_FIELDS)
