"""Small helpers the finding rules share: safe lookups in probe data, evidence builders, number formats.

Probe data comes from hosts we do not control, so every lookup tolerates a missing or odd-typed key.
"""

from __future__ import annotations

import re
import statistics
from typing import Any, Iterable

from gpudiag.models import SEVERITY_RANK, Evidence, HostResult
from gpudiag.probe_view import as_dict


def source(host: HostResult, probe_name: str) -> str:
    return f"{host.name}/probes/{probe_name}"


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
