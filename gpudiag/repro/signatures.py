"""The crash-signature table and log classification, as the control side uses them.

Both live probe-side (probes/crashlog, standard library only) so that a host classifies its live server's
log with exactly the rules `gpudiag repro --log` uses here; this module validates the table and adapts it.
"""
from __future__ import annotations

import re
from typing import Any

from probes.crashlog import releases
from probes.crashlog.classify import OUTCOMES, classify, render_advice
from probes.crashlog.table import SIGNATURES as TABLE

SEVERITIES = ("critical", "error", "warning", "info")
REQUIRED = ("name", "match", "meaning", "recommendation", "reference")
__all__ = ["OUTCOMES", "SignatureError", "classify_log", "load_table"]


class SignatureError(ValueError):
    """An entry of the signature table cannot be used; the message names the entry and the field."""


def load_table(table: list[Any] | None = None) -> list[dict[str, Any]]:
    """The entries as sent to the cuda_graph probe, validated, with advice worded for any release (the probe
    matches repro cells whose release it does not reword)."""
    words = releases.flag_words(None)
    entries = []
    for index, entry in enumerate(TABLE if table is None else table):
        where = f"signature table entry {index}"
        if not isinstance(entry, dict):
            raise SignatureError(f"{where}: not an object")
        missing = [key for key in REQUIRED if not entry.get(key)]
        if missing:
            raise SignatureError(f"{where} ({entry.get('name', '?')}): missing {', '.join(missing)}")
        if entry.get("severity", "error") not in SEVERITIES:
            raise SignatureError(f"{where} ({entry['name']}): severity {entry.get('severity')!r} is not one of "
                                 f"{', '.join(SEVERITIES)}")
        for key in ("match", "requires", "context"):
            patterns = entry.get(key) or []
            if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
                raise SignatureError(f"{where} ({entry['name']}): {key} must be a list of strings")
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise SignatureError(f"{where} ({entry['name']}): bad pattern {pattern!r}: {exc}") from None
        entries.append(dict(entry, recommendation=render_advice(str(entry["recommendation"]), words)))
    return entries


def classify_log(text: str, installed_release: str | None = None) -> dict[str, Any]:
    """known_signature | unclassified_crash | clean, with every crash in order (probes.crashlog.classify)."""
    load_table()   # a broken table is an input error before anything is read
    return classify(text, None, installed_release)
