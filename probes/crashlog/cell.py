"""A repro cell's failure through the one classifier: the text a failed cell left (its server's log, or its
child's stderr and error) gets the signature, family and advice `gpudiag repro --log` gives for the same
text, with the advice worded for the installed release when the text does not say which one wrote it."""
from probes.crashlog.classify import classify


def classify_cell(text, installed_release=None, known=""):
    """{signature, family, phase, crash, advice_assumes, note} for one cell's output.

    `signature` names the first crash a known signature matches (the most specific entry wins), with the
    crash's quoted lines as `lines`; `family` and `phase` are those of that crash (or the first crash);
    `note` is the first non-crash signature the text shows (acceptance stuck at 1.00, …), or None."""
    result = classify(text or "", None, installed_release, known)
    crashes = result["crashes"]
    crash = next((c for c in crashes if c["signature"]), crashes[0] if crashes else None)
    signature = None
    if crash is not None and crash["signature"]:
        signature = dict(crash["signature"], lines=crash["quoted"])
    notes = [n for n in result["notes"] if n.get("severity") != "info"]
    note = None
    if notes:
        note = dict((k, notes[0].get(k)) for k in ("name", "severity", "meaning", "recommendation", "reference"))
        note["lines"] = notes[0].get("quoted") or []
    return {"signature": signature, "family": crash["family"] if crash else None,
            "phase": crash["detail"] if crash else None, "crash": crash["summary"] if crash else None,
            "advice_assumes": result["advice_assumes"], "note": note}


def cell_fields(verdict):
    """What a failed cell records of the verdict."""
    out = {"signature": verdict["signature"] or verdict["note"]}
    if verdict["family"]:
        out.update(family=verdict["family"], crash=verdict["crash"])
    if out["signature"]:
        out["advice_assumes"] = verdict["advice_assumes"]
    return out
