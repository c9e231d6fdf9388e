"""Checks probe data against the probes' declared shapes (each SHAPE, indexed by probes/probe_info.py), probe by probe.

`judged(probes)` runs where a frame is classified and where a stored host is read: a record of a list (or map)
that does not fit its declaration is dropped, named in the data's `dropped_records`, and the probe keeps its other
records; data that misfits outside any record becomes that probe's error (type `ProbeDataError`, the field named),
and the host keeps every other probe. `check_host_document` refuses a whole document; the recorder of test fixtures uses it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpudiag.models import ProbeResult
from probes.probe_info import SHAPES
from probes.schemas import Spec, check, complete, fits


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
DROPPED = "dropped_records"  # added to a probe's data: one line per record judged() left out
MAX_DROPPED = 50


def _pruned(spec: Spec, value: Any, where: str, dropped: list[str]) -> Any:
    """`value` without the list and map entries that misfit `spec` (each named in `dropped`); an entry is
    first pruned inside, so a bad inner record costs that inner record, not the one holding it."""
    if spec.kind == "obj" and isinstance(value, dict) and spec.fields:
        out = dict(value)
        for key, field in spec.fields.items():
            if key in value:
                out[key] = _pruned(field, value[key], f"{where}.{key}", dropped)
        return out
    if spec.kind in ("list", "map") and isinstance(value, (list, dict)) and spec.item is not None:
        entries = enumerate(value) if isinstance(value, list) else value.items()
        kept = []
        for key, entry in entries:
            at = f"{where}[{key}]" if isinstance(value, list) else f"{where}.{key}"
            entry = _pruned(spec.item, entry, at, dropped)
            problem = check(spec.item, entry, at)
            if problem:
                dropped.append(problem)
            else:
                kept.append((key, entry))
        return [e for _, e in kept] if isinstance(value, list) else dict(kept)
    return value


def _salvaged(name: str, data: Any) -> Any:
    """The data with every misfitting record dropped and named under DROPPED, or None when what misfits is
    not inside a record (the probe's data as a whole is then refused)."""
    dropped: list[str] = []
    pruned = _pruned(SHAPES[name], data, f"probes.{name}.data", dropped)
    if not dropped or not isinstance(pruned, dict) or not fits(SHAPES[name], pruned):
        return None
    more = len(dropped) - MAX_DROPPED
    return dict(pruned, **{DROPPED: dropped[:MAX_DROPPED] + ([f"and {more} more"] if more > 0 else [])})


def judged(probes: dict[str, ProbeResult]) -> dict[str, ProbeResult]:
    """The probes with every misfitting record of an ok result dropped (and named), and an ok result whose data
    misfits outside its records turned into that probe's error."""
    out = {}
    for name, result in probes.items():
        problem = probe_problem(name, {"status": result.status, "data": result.data})
        if problem:
            salvaged = _salvaged(name, result.data)
            if salvaged is not None:
                result = replace(result, data=salvaged)
            else:
                result = ProbeResult(
                    status="error",
                    duration_s=result.duration_s,
                    error={"type": DATA_ERROR, "message": f"its data does not fit its declaration: {problem}"},
                )
        out[name] = result
    return out


def dropped_records(result: ProbeResult) -> list[str]:
    """The records judged() left out of an ok result's data, one line each."""
    data = result.data if result.status == "ok" else None
    lines = data.get(DROPPED) if isinstance(data, dict) else None
    return [str(line) for line in lines] if isinstance(lines, list) else []


def data_errors(probes: dict[str, ProbeResult]) -> list[str]:
    """'<probe>: <field>: <why>' for each probe judged() refused, and for each probe that lost records."""
    out = []
    for name, result in sorted(probes.items()):
        if result.status == "error" and (result.error or {}).get("type") == DATA_ERROR:
            out.append(f"{name}: {str((result.error or {}).get('message') or '')}")
        lost = dropped_records(result)
        if lost:
            out.append(f"{name}: {len(lost)} record(s) did not fit the declaration and were left out: {lost[0]}")
    return out


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
