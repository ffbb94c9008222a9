"""Sample environments shared by the database and dashboard tests: an H200 as the GPU visits
saw it (driver 580.159.04, CUDA 13.0, torch 2.11, triton 3.6), and an A100."""

import dataclasses

from db.records import EnvironmentInfo

H200 = EnvironmentInfo(
    gpu_name="NVIDIA H200",
    sm_count=132,
    l2_bytes=60 * 2**20,
    memory_bytes=150_754_820_096,
    compute_capability="9.0",
    driver_version="580.159.04",
    cuda_version="13.0",
    torch_version="2.11.0",
    triton_version="3.6.0",
    ray_version="2.60.0",
    python_version="3.12.3",
    host="gpu-node-1",
    project_version="0.1.0",
    peak_tflops=989.4,
    peak_gbps=4800.0,
)
A100 = dataclasses.replace(
    H200,
    gpu_name="NVIDIA A100-SXM4-80GB",
    sm_count=108,
    l2_bytes=40 * 2**20,
    peak_tflops=312.0,
    peak_gbps=2039.0,
)
