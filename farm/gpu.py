"""What a worker knows about its GPU: limits, the environment fingerprint, and its live state
(SM clock, temperature, throttle reasons) through nvidia-ml-py.

Ray sets CUDA_VISIBLE_DEVICES for each worker, so "the GPU" is always device 0 of the process;
NVML enumerates all GPUs, so the handle is looked up by the UUID torch reports.
"""

from __future__ import annotations

import os
import platform
import socket
from dataclasses import dataclass
from importlib import metadata

import torch
import triton

from db.records import Backend, EnvironmentInfo
from farm.instrument import NVML, calling
from farm.metrics import NOMINAL_GPU, DeviceLimits

# Dense bf16 tensor-core peaks from the vendors' datasheets (TFLOP/s), for the roofline only.
DATASHEET_TFLOPS = {
    "H200": 989.4,
    "H100 80GB HBM3": 989.4,
    "H100": 756.0,
    "A100": 312.0,
    "L40S": 362.1,
    "L4": 121.0,
    "A10": 125.0,
    "RTX 4090": 165.2,
    "MI300X": 1307.0,
}

# Throttle-reason bits that mean the clock is held down by power or heat (nvml.h); "GPU idle" (0x1)
# and "applications clocks setting" (0x2) are not throttling.
THROTTLE_NAMES = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}
THROTTLING = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def project_version() -> str:
    return _version("triton-matmul-farm") or "dev"


def _datasheet_tflops(name: str) -> float:
    matches = [tf for key, tf in DATASHEET_TFLOPS.items() if key in name]
    return max(matches, default=0.0)


@dataclass
class GpuState:
    sm_clock_mhz: int | None = None
    temperature_c: int | None = None
    throttle_mask: int = 0

    @property
    def throttled(self) -> bool:
        return bool(self.throttle_mask & THROTTLING)

    @property
    def reasons(self) -> str:
        return ",".join(name for bit, name in THROTTLE_NAMES.items() if self.throttle_mask & bit)

    def merge(self, other: GpuState) -> GpuState:
        """The state over an interval read at its two ends: lowest clock, highest temperature."""
        clocks = [c for c in (self.sm_clock_mhz, other.sm_clock_mhz) if c is not None]
        temps = [t for t in (self.temperature_c, other.temperature_c) if t is not None]
        return GpuState(
            min(clocks, default=None), max(temps, default=None), self.throttle_mask | other.throttle_mask
        )


class Gpu:
    """The worker's device: CUDA with NVML, or the CPU under Triton's interpreter. Also the meter
    (farm.clock.Meter) its clock reads around blocks: state, energy, power limit."""

    def __init__(self, backend: str):
        self.backend = backend
        self.device = torch.device("cuda" if backend == Backend.CUDA else "cpu")
        self._nvml = None
        self.uuid = ""
        if backend == Backend.CUDA:
            props = torch.cuda.get_device_properties(self.device)
            self.name = props.name
            self.uuid = f"GPU-{props.uuid}"
            self.limits = DeviceLimits(
                props.multi_processor_count,
                props.L2_cache_size,
                props.shared_memory_per_block_optin,
                props.shared_memory_per_multiprocessor,
                props.regs_per_multiprocessor,
                props.max_threads_per_multi_processor,
            )
            self.memory_bytes = props.total_memory
            self.compute_capability = f"{props.major}.{props.minor}"
            self._open_nvml()
        else:
            self.name = "CPU (Triton interpreter)"
            self.limits = NOMINAL_GPU
            self.memory_bytes = 0
            self.compute_capability = ""

    def _open_nvml(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml.nvmlDeviceGetHandleByUUID(self.uuid)
        except Exception:  # no NVML (a non-NVIDIA GPU, a container without the library): no state readings
            self._nvml = None

    def state(self) -> GpuState:
        if self._nvml is None:
            return GpuState()
        import pynvml

        reasons = (
            getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        with calling(NVML, pynvml.NVMLError):  # read around every block: a failure is the instrument's
            return GpuState(
                pynvml.nvmlDeviceGetClockInfo(self._nvml, pynvml.NVML_CLOCK_SM),
                pynvml.nvmlDeviceGetTemperature(self._nvml, pynvml.NVML_TEMPERATURE_GPU),
                reasons(self._nvml),
            )

    def energy_mj(self) -> int | None:
        """NVML's total-energy counter since the driver loaded, in mJ (Volta and later), or None."""
        if self._nvml is None:
            return None
        import pynvml

        try:
            return pynvml.nvmlDeviceGetTotalEnergyConsumption(self._nvml)
        except pynvml.NVMLError:
            return None

    def power_limit_w(self) -> float | None:
        """The power limit the driver enforces now (700 W on the H200 measured), or None."""
        if self._nvml is None:
            return None
        import pynvml

        try:
            return pynvml.nvmlDeviceGetEnforcedPowerLimit(self._nvml) / 1e3
        except pynvml.NVMLError:
            return None

    def max_sm_clock(self) -> int | None:
        if self._nvml is None:
            return None
        import pynvml

        with calling(NVML, pynvml.NVMLError):
            return pynvml.nvmlDeviceGetMaxClockInfo(self._nvml, pynvml.NVML_CLOCK_SM)

    def peaks(self) -> tuple[float, float]:
        """The roofline's peaks (db.physics, the environment's peak columns): dense bf16 TFLOP/s from the
        datasheet and DRAM GB/s from NVML; 0 where unknown, and on the CPU (the interpreter's times are CPU
        times)."""
        if self.backend != Backend.CUDA:
            return 0.0, 0.0
        return _datasheet_tflops(self.name), self._peak_gbps()

    def _peak_gbps(self) -> float:
        if self._nvml is None:
            return 0.0
        import pynvml

        try:  # DDR: two transfers per clock
            bus_bits = pynvml.nvmlDeviceGetMemoryBusWidth(self._nvml)
            mem_mhz = pynvml.nvmlDeviceGetMaxClockInfo(self._nvml, pynvml.NVML_CLOCK_MEM)
            return bus_bits / 8 * mem_mhz * 2 / 1e3
        except Exception:
            return 0.0

    def _driver(self) -> str:
        if self._nvml is None:
            return ""
        import pynvml

        return pynvml.nvmlSystemGetDriverVersion()

    def environment(self) -> EnvironmentInfo:
        peak_tflops, peak_gbps = self.peaks()
        return EnvironmentInfo(
            gpu_name=self.name,
            sm_count=self.limits.sm_count,
            l2_bytes=self.limits.l2_bytes,
            memory_bytes=self.memory_bytes,
            compute_capability=self.compute_capability,
            driver_version=self._driver(),
            cuda_version=torch.version.cuda or "",
            torch_version=str(torch.__version__),  # a TorchVersion: unpickling it imports torch (2.8 s)
            triton_version=triton.__version__,
            ray_version=_version("ray"),
            python_version=platform.python_version(),
            host=socket.gethostname(),
            project_version=project_version(),
            backend=self.backend,
            peak_tflops=peak_tflops,
            peak_gbps=peak_gbps,
        )

    def worker_name(self) -> str:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        return f"{socket.gethostname()}:gpu{visible or '?'}:pid{os.getpid()}"
