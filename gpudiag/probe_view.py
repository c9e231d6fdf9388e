"""Read-only views of probe data in a HostResult, shared by the finding rules and the renderers.

Probe data comes from hosts we do not control, so every lookup tolerates a missing or odd-typed key and returns an
empty or None value instead of raising. Nothing here judges the data: verdicts belong to gpudiag.findings.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from gpudiag.models import HostResult


def dig(value: Any, *keys: Any) -> Any:
    """value[k1][k2]…, or None as soon as a step is missing or of the wrong type."""
    for key in keys:
        if isinstance(value, dict) and isinstance(key, str):
            value = value.get(key)
        elif isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value):
            value = value[key]
        else:
            return None
    return value


def as_list(value: Any) -> list[Any]:
    return value if type(value) is list or isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if type(value) is dict or isinstance(value, dict) else {}


def probe(host: HostResult, name: str) -> dict[str, Any] | None:
    """A probe's data when it ran ok and is an object, else None."""
    data = host.probe_data(name)
    return data if isinstance(data, dict) else None


def number(value: Any) -> float | None:
    kind = type(value)
    if kind is float or kind is int:  # the common case, told without isinstance
        return float(value)
    if kind is bool or not isinstance(value, (int, float)):
        return None
    return float(value)


def fmt_us(value: Any) -> str:
    x = number(value)
    if x is None:
        return "-"
    return f"{x:.1f} µs" if x < 1000 else f"{x / 1000:.2f} ms"


def fmt_bytes(value: Any) -> str:
    x = number(value)
    if x is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if x >= size:
            return f"{x / size:.2f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{int(x)} B"


def safe_stem(name: str) -> str:
    """A host name usable in a file name, one per name: a name that had to change ends in a short digest of
    itself, so "a b" and "a_b" never share a chart file (nor two processes writing it at once)."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "host"
    if stem == name:
        return stem
    return f"{stem}-{hashlib.blake2b(name.encode('utf-8', 'surrogatepass'), digest_size=4).hexdigest()}"


def copy_gpus(host: HostResult, cuda_only: bool = False) -> list[dict[str, Any]]:
    """copy_bench's per-device results; with cuda_only, none measured on a CPU (no DMA engine, no launches)."""
    data = probe(host, "copy_bench")
    gpus = [g for g in as_list(dig(data, "gpus")) if isinstance(g, dict)]
    if cuda_only:
        gpus = [g for g in gpus if (g.get("device") or dig(data, "device") or "cuda") == "cuda"]
    return sorted(gpus, key=lambda g: number(g.get("index")) or 0)


def cut_short(gpu: dict[str, Any]) -> dict[str, Any]:
    """A GPU's benchmark cut short (timeout, hang, death): {measured, planned, needs_s}, its measured workloads
    kept; {} for a GPU measured in full or not at all."""
    return as_dict(gpu.get("cut_short"))


def workloads(gpu: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPU's workloads by path, then batch size (numerically), then name."""
    found = [w for w in as_list(gpu.get("workloads")) if isinstance(w, dict)]
    return sorted(
        found,
        key=lambda w: (
            str(w.get("path")),
            number(w.get("batch_size")) or 0,
            number(w.get("hidden_size")) or 0,
            str(w.get("name")),
        ),
    )


def device_label(gpu: dict[str, Any]) -> str:
    """'GPU 4 (NVIDIA H200)', or 'CPU' for timings taken without CUDA."""
    if gpu.get("index") is None:
        return "CPU" if str(gpu.get("device") or gpu.get("name") or "cpu") == "cpu" else str(gpu.get("name"))
    return f"GPU {gpu.get('index')} ({gpu.get('name') or '-'})"


def cells(host: HostResult) -> list[dict[str, Any]]:
    found = [c for c in as_list(dig(probe(host, "cuda_graph"), "cells")) if isinstance(c, dict)]
    return sorted(
        found, key=lambda c: (str(c.get("path")), number(c.get("batch_size")) or 0, number(c.get("draft_tokens")) or 0)
    )
