"""Datasheet peaks per GPU and interconnect defaults for collectives, each row with its source.

GPU rows are matched against the name nvidia-smi prints, most specific pattern first. Tensor figures are dense
(NVIDIA's sparse figures halved). Interconnect rows are used only when nothing on the host measured the
collectives; they are labelled `assumed` wherever they enter a figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    name: str
    mem_bw_gbps: float  # GB/s (1e9 bytes per second)
    bf16_tflops: float  # dense
    fp8_tflops: float | None
    l2_mb: float  # a copy must be ≥ 8× this for its bandwidth to be DRAM's
    links: str  # what joins GPUs of this model: nvlink | pcie
    source: str

    @property
    def ridge(self) -> float:
        """FLOP per byte where BF16 compute and memory bandwidth take equal time."""
        return self.bf16_tflops * 1e12 / (self.mem_bw_gbps * 1e9)


LLM_VIEWER = "https://github.com/hahnyuan/LLM-Viewer/blob/main/hardwares/hardware_params.py"
GPUS: tuple[tuple[str, Gpu], ...] = (
    (
        r"RTX PRO 6000 Blackwell",
        Gpu(
            "RTX PRO 6000 Blackwell",
            1792,
            503.8,
            1007.6,
            128,
            "pcie",
            "https://hmc-tech.com/gpu/nvidia-rtx-pro-6000-blackwell-vs-amd-radeon-pro-duo-polaris (GDDR7 1,792 GB/s, "
            "512-bit; no NVLink)",
        ),
    ),
    (
        r"H200",
        Gpu(
            "H200",
            4800,
            989,
            1979,
            50,
            "nvlink",
            "https://www.nvidia.com/en-us/data-center/h200/ (sparse tensor figures halved)",
        ),
    ),
    (
        r"H100.*PCIe",
        Gpu("H100 PCIe", 2000, 756, 1513, 50, "pcie", "https://www.nvidia.com/en-us/data-center/h100/"),
    ),
    (
        r"H100|H800",
        Gpu("H100 SXM", 3350, 989, 1979, 50, "nvlink", "https://www.nvidia.com/en-us/data-center/h100/"),
    ),
    (r"B300|GB300", Gpu("B300", 8000, 2250, 4500, 126, "nvlink", "https://glennklockwood.com/garden/processors/B300")),
    (r"B200|GB200", Gpu("B200", 8000, 2250, 4500, 126, "nvlink", "https://glennklockwood.com/garden/processors/B300")),
    (r"A100.*40GB", Gpu("A100 40GB", 1555, 312, None, 40, "nvlink", LLM_VIEWER)),
    (r"A100", Gpu("A100 80GB", 2039, 312, None, 40, "nvlink", LLM_VIEWER)),
    (r"L40S", Gpu("L40S", 864, 362, 733, 96, "pcie", "https://www.nvidia.com/en-us/data-center/l40s/")),
)


def gpu_of(name: str) -> Gpu | None:
    """The datasheet row for an nvidia-smi GPU name, or None when the table has no row for it."""
    for pattern, gpu in GPUS:
        if re.search(pattern, name or "", re.I):
            return gpu
    return None


@dataclass(frozen=True)
class Link:
    kind: str  # pcie | nvlink
    busbw_gbps: float  # all-reduce bus bandwidth, nccl-tests definition, 8 GPUs
    alpha_us: float  # latency of a small (8-byte) all-reduce
    source: str


LINKS = {
    "pcie": Link(
        "pcie",
        28,
        40,
        "busbw: 8x RTX 5090 on PCIe Gen5, https://github.com/NVIDIA/nccl/issues/1639; latency: 8-byte all-reduce "
        "42 µs on 8x RTX 4090, https://github.com/NVIDIA/nccl/issues/1530 (54 µs on 8x RTX 3090, "
        "https://github.com/NVIDIA/nccl/issues/1439)",
    ),
    "nvlink": Link(
        "nvlink",
        370,
        15,
        "busbw: ring all-reduce on 8x H100/H200 NVLink4, https://github.com/NVIDIA/nccl-tests/issues/212 (NVLS about "
        "480, https://github.com/NVIDIA/nccl-tests/issues/272); latency 15 µs is assumed, no published figure read",
    ),
}


def link_kind(topology_summary: str, gpu: Gpu | None) -> str | None:
    """nvlink | pcie from `nvidia-smi topo -m` (env probe's summary), else from the GPU model; None if unknown."""
    if topology_summary in ("nvlink", "pcie"):
        return topology_summary
    if topology_summary == "mixed":
        return "pcie"  # a ring is as slow as its slowest hop
    return gpu.links if gpu else None
