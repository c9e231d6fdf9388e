"""Small helpers the finding rules share: safe lookups in probe data, evidence builders, number formats.

Probe data comes from hosts we do not control, so every lookup tolerates a missing or odd-typed key.
"""

from __future__ import annotations

import re
import statistics
from typing import Any, Iterable

from gpudiag.models import Evidence, HostResult

SEVERITY_RANK = {"critical": 0, "error": 1, "warning": 2, "info": 3}


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
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def probe(host: HostResult, name: str) -> dict[str, Any] | None:
    """A probe's data when it ran ok and is an object, else None."""
    data = host.probe_data(name)
    return data if isinstance(data, dict) else None


def source(host: HostResult, probe_name: str) -> str:
    return f"{host.name}/probes/{probe_name}"


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
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


def source_evidence(host: HostResult, fact: Any, text: str) -> Evidence:
    """Evidence for a source fact ({file, line, snippet}); plain text when the location is missing."""
    fact = as_dict(fact)
    line = fact.get("line")
    return Evidence(
        kind="source",
        text=text,
        host=host.name,
        file=_str_or_none(fact.get("file")),
        line=line if isinstance(line, int) and not isinstance(line, bool) else None,
        snippet=_str_or_none(fact.get("snippet")),
    )


def _str_or_none(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def version_tuple(text: Any) -> tuple[int, ...] | None:
    """'0.5.14rc2' → (0, 5, 14); None when there is no leading dotted number."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(text or ""))
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def median(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.median(values) if values else None


def truthy_flag(value: Any) -> bool:
    """A server flag value as parsed from a command line: True, 'true', '1', 'yes'."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return str(value).strip().lower() in ("true", "1", "yes", "on")


def sort_findings(findings: Iterable[Any]) -> list[Any]:
    return sorted(findings, key=lambda f: (SEVERITY_RANK.get(f.severity, 9), f.id, f.hosts, f.title))


def safe_stem(name: str) -> str:
    """A host name usable in a file name."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "host"
