"""Reads what Ansible printed for a `script` run of the bundle, host by host, in the forms it comes in:
the json stdout callback (ad-hoc runs and playbooks), the tree callback's one file per host
(`ansible -t DIR`), and the default callback's ad-hoc `host | CHANGED => {...}` blocks.

Every host gets its task results in play order; `ingest` decides from them whether a frame came back
or why not (unreachable, failed, python missing).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


class AnsibleFormatError(ValueError):
    """The text is not the json callback's output."""


@dataclass
class AnsibleHost:
    name: str
    results: list[dict[str, Any]] = field(default_factory=list)  # one per task (loop items flattened)
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
    raise AnsibleFormatError(
        'no Ansible json callback document (an object with "plays"); run ansible with ANSIBLE_STDOUT_CALLBACK=json'
    )


# The default callback's ad-hoc form: `h0 | CHANGED => {` or `h1 | FAILED! | rc=127 >>`-less JSON.
_ADHOC_BLOCK = re.compile(r"^(?P<host>\S+) \| (?:SUCCESS|CHANGED|FAILED!|UNREACHABLE!)(?: \| rc=\d+)? => \{", re.M)
_RESULT_KEYS = {"stdout", "rc", "unreachable", "failed", "msg", "changed"}


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def looks_like_ansible(text: str) -> bool:
    """The json callback's document, one tree-callback result, or default-callback ad-hoc blocks."""
    doc = _json_object(text) if text.lstrip().startswith("{") else None
    if doc is not None:
        return "plays" in doc or _is_result(doc)
    if text.lstrip().startswith("{") and '"plays"' in text:
        return True
    return _ADHOC_BLOCK.search(text) is not None


def _is_result(doc: dict[str, Any]) -> bool:
    return bool(_RESULT_KEYS & set(doc)) and "probes" not in doc


def parse_ansible(text: str, stem: str) -> list["AnsibleHost"]:
    """Hosts from any of the three forms; `stem` names the host of a tree-callback file."""
    doc = _json_object(text)
    if doc is not None and _is_result(doc):
        return [AnsibleHost(stem, _flatten(doc))]
    if _ADHOC_BLOCK.search(text) and '"plays"' not in text:
        return adhoc_hosts(text)
    return hosts_in(load_document(text))


def adhoc_hosts(text: str) -> list["AnsibleHost"]:
    decoder = json.JSONDecoder()
    hosts: dict[str, AnsibleHost] = {}
    for match in _ADHOC_BLOCK.finditer(text):
        try:
            result, _ = decoder.raw_decode(text, match.end() - 1)
        except ValueError:
            result = {"failed": True, "msg": "the result Ansible printed for this host is cut off"}
        host = hosts.setdefault(match.group("host"), AnsibleHost(match.group("host")))
        if isinstance(result, dict):
            host.results.extend(_flatten(result))
    return list(hosts.values())


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
    parts = [str(result.get(key) or "") for key in ("msg", "stderr", "module_stderr", "stdout", "module_stdout")]
    return "\n".join(p for p in parts if p)


def failed(result: dict[str, Any]) -> bool:
    return bool(result.get("unreachable") or result.get("failed"))
