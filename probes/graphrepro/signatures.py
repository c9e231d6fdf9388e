"""Matches a log or traceback against the crash-signature table the control side sends (as data).

Same rules as gpudiag/repro/signatures.py: one `match` pattern on a line and every `requires`
pattern somewhere in the text. Kept here because the probe runs where gpudiag is not installed.
"""
import re

MAX_QUOTED_LINES = 3


def _compile(patterns):
    out = []
    for pattern in patterns or []:
        try:
            out.append(re.compile(pattern, re.IGNORECASE))
        except re.error:
            continue  # a bad pattern in the table must not break a repro on the host
    return out


def match_signatures(text, table, context=""):
    """Every matching signature as {name, meaning, recommendation, reference, severity, kind, lines}.

    `context` (e.g. "compute capability sm_103") takes part in `requires` only, never in quoted lines.
    """
    if not text or not table:
        return []
    lines = text.splitlines()
    whole = text + "\n" + context
    found = []
    for entry in table:
        if not isinstance(entry, dict):
            continue
        if not all(p.search(whole) for p in _compile(entry.get("requires"))):
            continue
        patterns = _compile(entry.get("match"))
        quoted = [{"line": n, "text": line.strip()[:300]} for n, line in enumerate(lines, 1)
                  if any(p.search(line) for p in patterns)]
        if quoted:
            hit = dict((k, entry.get(k)) for k in ("name", "kind", "severity", "meaning", "recommendation",
                                                    "reference"))
            hit["lines"] = quoted[:MAX_QUOTED_LINES]
            found.append(hit)
    return found


def primary_signature(text, table, context=""):
    """The most specific match (the table is ordered most specific first), or None."""
    found = match_signatures(text, table, context)
    return found[0] if found else None
