"""What physics allows a stored time: the one check every row passes before anything reads it as a time.

A kernel time is impossible when it beats the GPU's roofline (2MNK at its peak rate, or A and B read once
from DRAM at its peak bandwidth: L2 is flushed before every timed launch, so they come from DRAM), or
when it falls far outside the stream time the same launches were read at. The worker measures such a
point again once and stores it `implausible` if it repeats (farm.worker); `farm db check` finds such rows
in older databases and marks them. No view, chart, conclusion, export or search reads an `implausible`
row as a time: they read `ok` rows alone.

Why the margins (docs/design.md, "Physics checks"):
- ROOF_MARGIN 1.1: the datasheet's 989.4 TFLOP/s (H100/H200 SXM, dense bf16) is quoted at 1830 MHz and
  the chips boost to 1980 (1.082x); NVML's bandwidth (bus width x the top memory clock) is a ceiling no
  kernel reaches. Every ok row of the shipped H100 and H200 databases sits under 0.9x both roofs; the
  five rows this check was built for read 5.8-185x above the compute roof.
- STREAM_SLACK 1.5: a launch's kernel time is the union of its GPU activities, which lie inside its
  stream time; shipped rows read kernel/stream up to 1.0. A kernel time 1.5x its stream time is a
  misattributed profile.
- STREAM_SPREAD 50: a stream time holds a launch's kernels and the host's gaps between them; on the
  shipped databases it reads up to 27x the kernel time (persistent_tma at 512^3: 5.3 us of kernel in
  142 us of a host-bound launch). 50x is a profile that lost the launch's main kernel: the cuBLAS rows
  that read 0.75 us of memset beside 180-222 us of stream.
"""

from __future__ import annotations

# Bytes per element: kernels.sizes.DTYPE_BYTES's sizes (db imports nothing of kernels; a test holds the two
# tables equal).
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}

ROOF_MARGIN = 1.1
STREAM_SLACK = 1.5
STREAM_SPREAD = 50.0

# Where a GPU's own peaks are unknown (0 in its environment row), roofs that no GPU sold today passes:
# dense bf16 2,500 TFLOP/s (a B200's datasheet says 2,250) and 8 TB/s of HBM (B200: 8.0).
ANY_GPU_TFLOPS = 2500.0
ANY_GPU_GBPS = 8000.0


def roofline_floor_ms(m: int, n: int, k: int, dtype: str, peak_tflops: float, peak_gbps: float) -> float:
    """The least time the GPU's roofs allow one M x N x K matmul with cold L2: 2MNK at the peak rate, or
    A and B read once at the peak bandwidth, whichever is longer, divided by ROOF_MARGIN. The bf16
    tensor-core peak bounds every dtype (fp32 and tf32 run slower). Peaks of 0 mean unknown."""
    tflops = peak_tflops if peak_tflops > 0 else ANY_GPU_TFLOPS
    gbps = peak_gbps if peak_gbps > 0 else ANY_GPU_GBPS
    compute_ms = 2.0 * m * n * k / (tflops * 1e12) * 1e3
    memory_ms = (m * k + k * n) * DTYPE_BYTES[dtype] / (gbps * 1e9) * 1e3
    return max(compute_ms, memory_ms) / ROOF_MARGIN


def lost_kernels(ms: float, stream_ms: float) -> bool:
    """Did the profile keep only a sliver of a launch's GPU work? Its kernels run inside its stream time,
    so a kernel time under 1/STREAM_SPREAD of it lost the launch's main kernel (the five cuBLAS rows: a
    0.75-1.0 us memset in 19.5-222 us of stream). farm.clock applies it per launch, `implausibility` to a
    point's medians."""
    return stream_ms > STREAM_SPREAD * ms


def implausibility(
    m: int,
    n: int,
    k: int,
    dtype: str,
    ms: float | None,
    stream_ms: float | None,
    peak_tflops: float,
    peak_gbps: float,
) -> str:
    """Why a GPU kernel time of `ms` cannot be right, or "" where nothing forbids it (None times pass:
    nothing was read). Interpreter rows are CPU times: callers check only rows of the cuda backend."""
    if ms is None:
        return ""
    if not ms > 0:
        return f"kernel time {ms} ms is not positive"
    floor = roofline_floor_ms(m, n, k, dtype, peak_tflops, peak_gbps)
    if ms < floor:
        return (
            f"kernel time {ms * 1e3:.3g} us beats the roofline ({floor * ROOF_MARGIN * 1e3:.3g} us at the "
            f"GPU's peaks, {floor * 1e3:.3g} us with the {ROOF_MARGIN}x margin)"
        )
    if stream_ms is not None and stream_ms > 0:
        if ms > STREAM_SLACK * stream_ms:
            return f"kernel time {ms * 1e3:.3g} us exceeds its stream time {stream_ms * 1e3:.3g} us"
        if lost_kernels(ms, stream_ms):
            return (
                f"kernel time {ms * 1e3:.3g} us is under 1/{STREAM_SPREAD:g} of its stream time "
                f"{stream_ms * 1e3:.3g} us: the profile lost the launch's kernels"
            )
    return ""
