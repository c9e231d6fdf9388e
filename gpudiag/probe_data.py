"""Checks probe data against the probes' declared shapes (each SHAPE, indexed by probes/probe_info.py), probe by probe.

`judged(probes)` runs where a frame is classified and where a stored host is read: a probe whose data does not
fit its declaration becomes that probe's error (type `ProbeDataError`, the field named), and the host keeps every
other probe. `check_host_document` refuses a whole document; the recorder of test fixtures uses it.
"""

from __future__ import annotations

from typing import Any

from gpudiag.models import ProbeResult
from probes.probe_info import SHAPES
from probes.schemas import check, complete, fits


class ProbeDataError(ValueError):
    """A stored probe result whose data does not have its probe's declared shape."""


def probe_problem(name: str, result: Any) -> str | None:
    """The first field of one probe result that does not fit its declaration, or None.

    Only `ok` results carry data to check; a probe gpudiag does not declare is left alone (a newer probe
    read by an older gpudiag)."""
    if not isinstance(result, dict) or result.get("status") != "ok" or name not in SHAPES:
        return None
    spec, data = SHAPES[name], result.get("data")
    return None if fits(spec, data) else check(spec, data, f"probes.{name}.data")


def host_problems(doc: dict[str, Any]) -> list[str]:
    """Every probe of a host document whose data does not fit, one line each."""
    probes = doc.get("probes") if isinstance(doc, dict) else None
    found = []
    for name, result in sorted((probes or {}).items()) if isinstance(probes, dict) else ():
        problem = probe_problem(str(name), result)
        if problem:
            found.append(problem)
    return found


DATA_ERROR = "ProbeDataError"


def judged(probes: dict[str, ProbeResult]) -> dict[str, ProbeResult]:
    """The probes with every ok result whose data misfits its declaration turned into that probe's error."""
    out = {}
    for name, result in probes.items():
        problem = probe_problem(name, {"status": result.status, "data": result.data})
        if problem:
            result = ProbeResult(
                status="error",
                duration_s=result.duration_s,
                error={"type": DATA_ERROR, "message": f"its data does not fit its declaration: {problem}"},
            )
        out[name] = result
    return out


def data_errors(probes: dict[str, ProbeResult]) -> list[str]:
    """'<probe>: <field>: <why>' for each probe judged() refused."""
    return [
        f"{name}: {str((result.error or {}).get('message') or '')}"
        for name, result in sorted(probes.items())
        if result.status == "error" and (result.error or {}).get("type") == DATA_ERROR
    ]


def check_host_document(doc: dict[str, Any], where: str) -> None:
    """Raise ProbeDataError('<where>: probes.copy_bench.data.gpus[0].status: missing') on the first misfit."""
    problems = host_problems(doc)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ProbeDataError(f"{where}: {problems[0]}{more}")


def fitted(name: str, partial: Any) -> Any:
    """Hand-written data of probe `name` with every declared key it lacks added, empty (null, [], 0, false):
    what tests build their host documents with, so the store reads them."""
    return complete(SHAPES[name], partial) if name in SHAPES else partial


def fitted_host(doc: dict[str, Any]) -> dict[str, Any]:
    """A host document whose ok probe results are fitted()."""
    probes = {
        name: dict(result, data=fitted(name, result.get("data"))) if result.get("status") == "ok" else result
        for name, result in (doc.get("probes") or {}).items()
    }
    return dict(doc, probes=probes)
