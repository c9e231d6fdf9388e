"""Q1: is torch._foreach_copy_ present and correct for the replay dtype pairs, on the CPU and each GPU, and which
copy ran for each kind of tensor list? The answer's value holds, per device, the dtype pairs that were right and
wrong (or why the device was not checked) and its copy paths; its sentence is rendered from that value."""

from __future__ import annotations

import re
from typing import Any

from gpudiag.findings.answers import ANSWERED, NOT_CHECKED, PARTIAL, Answer, no_gpu_reason, probe_gap, with_scope
from gpudiag.findings.copies import COPY_LIST_KINDS, COPY_PATH_NAMES, copy_path_text
from gpudiag.findings.facts import sglang_interpreter, torch_facts
from gpudiag.findings.gpu_room import force_helps
from gpudiag.findings.server_scope import scope
from gpudiag.models import HostResult
from gpudiag.probe_view import as_dict, as_list, dig, probe

QID = "Q1"
COMMAND = "gpudiag scan HOST --probes torch_caps"


def _gap(host: HostResult) -> str | None:
    """Why torch_caps has no data, naming the interpreter torch was looked for in when it was not importable."""
    gap = probe_gap(host, "torch_caps", "--probes torch_caps")
    if gap and "not importable" in gap and " in /" not in gap and "by /" not in gap:
        tried = (
            dig(probe(host, "env"), "torch", "interpreter", "path")
            or dig(probe(host, "env"), "python", "executable")
            or host.python
            or "the probing Python"
        )
        explicit = dig(probe(host, "env"), "torch", "interpreter", "why") == "explicit"
        hint = "" if explicit else "; point --python at the serving venv"
        gap = f"torch not importable in {tried} ({gap}){hint}"
    return gap


def _paths(check: dict[str, Any]) -> dict[str, Any]:
    """{list kind: {path: fast|per_tensor|unknown, reason}} from one device's torch_caps `paths`."""
    out = {}
    for kind, _label in COPY_LIST_KINDS:
        found = as_dict(as_dict(check.get("paths")).get(kind))
        if found:
            path = str(found.get("path") or "unknown")
            out[kind] = {"path": path if path in COPY_PATH_NAMES else "unknown", "reason": found.get("reason")}
    return out


def _device(name: str, check: dict[str, Any]) -> dict[str, Any]:
    pairs = as_dict(check.get("pairs"))
    wrong = sorted(k for k, v in pairs.items() if v != "ok")
    if check.get("status") != "ok":
        why = re.sub(r",? e\.g\. pid \d+", "", str(check.get("reason") or check.get("status")))
        return {"device": name, "checked": False, "reason": why}
    return {
        "device": name,
        "checked": True,
        "pairs_ok": len(pairs) - len(wrong),
        "pairs_total": len(pairs),
        "pairs_wrong": wrong,
        "paths": _paths(check),
    }


def q1_value(host: HostResult) -> dict[str, Any]:
    """What torch_caps found, per device, in the torch it read."""
    caps = probe(host, "torch_caps") or {}
    version, interpreter = torch_facts(host)
    value: dict[str, Any] = {
        "torch_version": version,
        "interpreter": interpreter[0] if interpreter else None,
        "has_foreach_copy": caps.get("has_foreach_copy"),
    }
    if value["has_foreach_copy"] is False:
        return value
    checks = as_dict(caps.get("checks"))
    visible = [
        f"cuda:{d.get('index')}"
        for d in as_list(dig(probe(host, "env"), "gpus", "devices"))
        if isinstance(d, dict) and d.get("index") is not None
    ]
    serving = sglang_interpreter(host)
    value.update(
        devices=[_device(name, as_dict(check)) for name, check in sorted(checks.items())],
        no_gpu=no_gpu_reason(host),
        unrecorded=[name for name in visible if name not in checks],
        scope=scope(host, value["interpreter"], "torch facts") or None,
        serving_interpreter=serving[0] if serving and interpreter and serving[0] != interpreter[0] else None,
    )
    return value


def _copy_path_clauses(devices: list[dict[str, Any]]) -> list[str]:
    """Which copy ran on each checked device (devices that read the same share one clause)."""
    by_text: dict[str, list[str]] = {}
    for device in devices:
        text = copy_path_text({"paths": device.get("paths") or {}}) if device["checked"] else ""
        if text:
            by_text.setdefault(text, []).append(device["device"])
    return [f"copy path on {', '.join(names)}: {text}" for text, names in by_text.items()]


def q1_text(value: dict[str, Any]) -> str:
    """Q1's sentence, from its value: devices with the same result share one clause."""
    where = f"torch {value.get('torch_version') or '?'} in {value.get('interpreter') or '?'}"
    if value.get("has_foreach_copy") is False:
        return f"absent in {where}: sglang falls back to a per-tensor loop"
    same: dict[str, list[str]] = {}
    for d in (d for d in value["devices"] if d["checked"]):
        wrong = f" (wrong: {', '.join(d['pairs_wrong'])})" if d["pairs_wrong"] else ""
        same.setdefault(f"{d['pairs_ok']} of {d['pairs_total']} dtype pairs correct{wrong}", []).append(d["device"])
    texts = [f"{', '.join(names)}: {text}" for text, names in same.items()]
    unchecked: dict[str, list[str]] = {}
    for d in (d for d in value["devices"] if not d["checked"]):
        unchecked.setdefault(d["reason"], []).append(d["device"])
    texts += [f"{', '.join(names)} not checked — {why}" for why, names in unchecked.items()]
    texts += _copy_path_clauses(value["devices"])
    if value.get("no_gpu"):
        texts.append(f"GPUs not checked — {value['no_gpu']}")
    if value.get("unrecorded"):
        texts.append(f"{', '.join(value['unrecorded'])} not checked — torch_caps recorded no check for them")
    text = with_scope(f"present in {where}; " + "; ".join(texts), value)
    if value.get("serving_interpreter"):
        text += f"; read in {value['interpreter']}, not in the serving {value['serving_interpreter']}: "
        text += "not judged against sglang"
    return text


def q1_foreach_copy(host: HostResult) -> Answer:
    gap = _gap(host)
    if gap:
        return Answer(QID, NOT_CHECKED, f"not checked — {gap}", COMMAND)
    value = q1_value(host)
    if value["has_foreach_copy"] is False:
        return Answer(QID, ANSWERED, q1_text(value), "", value)
    if value["serving_interpreter"]:
        return Answer(
            QID,
            PARTIAL,
            q1_text(value),
            f"gpudiag scan HOST --python {value['serving_interpreter']} --probes torch_caps",
            value,
        )
    unchecked = [d["reason"] for d in value["devices"] if not d["checked"]] + (
        ["missing"] if value["unrecorded"] else []
    )
    # --force is offered only where it would let a check run (a GPU busy with something else), never for serving GPUs.
    rerun = COMMAND + (" --force" if force_helps(unchecked) else "")
    return Answer(QID, PARTIAL if unchecked or value["no_gpu"] else ANSWERED, q1_text(value), rerun, value)
