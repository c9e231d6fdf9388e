"""Reads Ansible's json stdout callback output (ad-hoc `-m script` runs and playbooks), host by host.

Every host Ansible names gets its task results in play order; `ingest` decides from them whether a
frame came back or why not (unreachable, failed, python missing).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class AnsibleFormatError(ValueError):
    """The text is not the json callback's output."""


@dataclass
class AnsibleHost:
    name: str
    results: list[dict[str, Any]] = field(default_factory=list)   # one per task (loop items flattened)
    stats: dict[str, Any] = field(default_factory=dict)


def load_document(text: str) -> dict[str, Any]:
    """The callback's JSON object; warnings printed before it are skipped."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            doc, _ = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("\n{", start + 1)
            start = start + 1 if start != -1 else -1
            continue
        if isinstance(doc, dict) and "plays" in doc:
            return doc
        start = text.find("\n{", start + 1)
        start = start + 1 if start != -1 else -1
    raise AnsibleFormatError("no Ansible json callback document (an object with \"plays\"); "
                             "run ansible with ANSIBLE_STDOUT_CALLBACK=json")


def looks_like_ansible_json(text: str) -> bool:
    head = text.lstrip()[:4096]
    return head.startswith("{") and '"plays"' in text[:200000] and '"stats"' in text


def hosts_in(doc: dict[str, Any]) -> list[AnsibleHost]:
    """Hosts in the order Ansible first reports them, each with all its task results."""
    hosts: dict[str, AnsibleHost] = {}
    for play in doc.get("plays") or []:
        for task in (play or {}).get("tasks") or []:
            for name, result in ((task or {}).get("hosts") or {}).items():
                host = hosts.setdefault(str(name), AnsibleHost(str(name)))
                if isinstance(result, dict):
                    host.results.extend(_flatten(result))
    for name, stats in (doc.get("stats") or {}).items():
        host = hosts.setdefault(str(name), AnsibleHost(str(name)))
        host.stats = stats if isinstance(stats, dict) else {}
    return list(hosts.values())


def _flatten(result: dict[str, Any]) -> list[dict[str, Any]]:
    items = result.get("results")
    if isinstance(items, list) and items and all(isinstance(i, dict) for i in items):
        return items
    return [result]


def result_text(result: dict[str, Any]) -> str:
    """Everything a result says about what went wrong, for the status patterns."""
    parts = [str(result.get(key) or "") for key in ("msg", "stderr", "module_stderr", "stdout",
                                                      "module_stdout")]
    return "\n".join(p for p in parts if p)


def failed(result: dict[str, Any]) -> bool:
    return bool(result.get("unreachable") or result.get("failed"))
