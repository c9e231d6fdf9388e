"""What the decode-step analysis reads from a host's probe data: the GPU (nvidia-smi's name against the datasheet
table), the interconnect (nvidia-smi's topology, else the GPU model's links), copy_bench's device copy bandwidth,
the config.json records the deployment probe read for each server, and the numbers among a server's flags."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.decode import hardware
from gpudiag.decode.sourced import DATASHEET, MEASURED
from gpudiag.models import HostResult
from gpudiag.probe_view import as_dict, as_list, dig, probe


def number(value: Any) -> float | None:
    """A positive number, or None for anything else (booleans included)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def int_arg(args: dict[str, Any], name: str) -> int | None:
    value = args.get(name)
    try:
        found = int(str(value))
    except (TypeError, ValueError):
        return None
    return found if found > 0 else None


@dataclass(frozen=True)
class Hardware:
    gpu: hardware.Gpu | None
    gpu_name: str
    link: hardware.Link | None
    link_from: str  # measured (nvidia-smi topo) | datasheet (the GPU model's links)
    copy_gbps: float | None
    copy_reason: str


def _copy_bandwidth(host: HostResult, gpu: hardware.Gpu | None) -> tuple[float | None, str]:
    """Device copy bandwidth (read + write bytes per second) from copy_bench's largest copy, when that copy is
    at least 8× the L2 cache (a smaller one measures L2, not DRAM)."""
    data = probe(host, "copy_bench")
    if data is None:
        return None, "copy_bench did not run (a --deep scan measures it)"
    floor = 8 * (gpu.l2_mb if gpu else 128) * 1e6
    best, largest = None, 0
    for entry in as_list(data.get("gpus")):
        for point in as_list(as_dict(entry).get("sweep")):
            size, us = number(as_dict(point).get("bytes")), number(as_dict(point).get("copy_us"))
            if size and us:
                largest = max(largest, int(size))
                if size >= floor:
                    rate = 2 * size / (us * 1e-6) / 1e9
                    best = rate if best is None else max(best, rate)
    if best is None:
        return None, f"copy_bench's largest copy ({largest / 2**20:.0f} MiB) fits in L2; DRAM bandwidth not measured"
    return round(best, 1), ""


def host_hardware(host: HostResult) -> Hardware:
    env = probe(host, "env") or {}
    names = [str(as_dict(d).get("name") or "") for d in as_list(dig(env, "gpus", "devices"))]
    name = names[0] if names else ""
    gpu = hardware.gpu_of(name)
    summary = str(dig(env, "topology", "summary") or "")
    kind = hardware.link_kind(summary, gpu)
    link_from = MEASURED if summary in ("nvlink", "pcie", "mixed") else DATASHEET
    copy, why = _copy_bandwidth(host, gpu)
    return Hardware(gpu, name, hardware.LINKS.get(kind or ""), link_from, copy, why)


def config_record(host: HostResult, server: dict[str, Any], role: str) -> dict[str, Any]:
    """The deployment probe's record of one server's config.json (`role`: model | draft); {} if none."""
    records = as_dict(dig(probe(host, "deployment"), "model_configs"))
    return as_dict(as_dict(records.get(str(server.get("pid")))).get(role))
