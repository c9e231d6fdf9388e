"""The known CUDA-graph crash signatures (data in gpudiag/data/signatures.json) and log classification.

A signature matches a text when one of its `match` patterns matches a line and each of its `requires`
patterns matches somewhere in the text. Matches keep the line numbers, so a report can quote them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from gpudiag.jsonfile import read_json

SEVERITIES = ("critical", "error", "warning", "info")
CRASH_SEVERITIES = ("critical", "error")
MAX_QUOTED_LINES = 5


class SignatureError(ValueError):
    """The signature table cannot be read; the message names the file and the entry."""


@dataclass(frozen=True)
class Signature:
    name: str
    kind: str
    severity: str
    match: tuple[re.Pattern[str], ...]
    requires: tuple[re.Pattern[str], ...]
    meaning: str
    recommendation: str
    reference: str

    def describe(self) -> dict[str, str]:
        return {"name": self.name, "kind": self.kind, "severity": self.severity, "meaning": self.meaning,
                "recommendation": self.recommendation, "reference": self.reference}


@dataclass(frozen=True)
class QuotedLine:
    number: int          # 1-based, as an editor shows it
    text: str


@dataclass(frozen=True)
class SignatureMatch:
    signature: Signature
    lines: tuple[QuotedLine, ...]

    @property
    def is_crash(self) -> bool:
        return self.signature.severity in CRASH_SEVERITIES

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.signature.describe())
        out["lines"] = [{"line": q.number, "text": q.text} for q in self.lines]
        return out


def table_path() -> Path:
    return Path(str(resources.files("gpudiag").joinpath("data", "signatures.json")))


def load_table(path: Path | None = None) -> list[dict[str, Any]]:
    """The raw entries (JSON-able), as sent to the host probe; validated on the way."""
    path = path or table_path()
    doc = read_json(path, SignatureError)
    entries = doc.get("signatures") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise SignatureError(f"{path}: expected an object with a 'signatures' list")
    for index, entry in enumerate(entries):
        _compile_entry(entry, f"{path}: signatures[{index}]")
    return entries


def load_signatures(path: Path | None = None) -> list[Signature]:
    path = path or table_path()
    return [_compile_entry(e, f"{path}: signatures[{i}]") for i, e in enumerate(load_table(path))]


def _compile_entry(entry: Any, where: str) -> Signature:
    if not isinstance(entry, dict):
        raise SignatureError(f"{where}: not an object")
    for key in ("name", "match", "meaning", "recommendation", "reference"):
        if not entry.get(key):
            raise SignatureError(f"{where}: missing {key!r}")
    severity = entry.get("severity", "error")
    if severity not in SEVERITIES:
        raise SignatureError(f"{where}: severity {severity!r} is not one of {', '.join(SEVERITIES)}")
    return Signature(name=str(entry["name"]), kind=str(entry.get("kind", "crash")), severity=severity,
                     match=_patterns(entry["match"], where), requires=_patterns(entry.get("requires", []), where),
                     meaning=str(entry["meaning"]), recommendation=str(entry["recommendation"]),
                     reference=str(entry["reference"]))


def _patterns(raw: Any, where: str) -> tuple[re.Pattern[str], ...]:
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise SignatureError(f"{where}: patterns must be a list of strings")
    try:
        return tuple(re.compile(p, re.IGNORECASE) for p in raw)
    except re.error as exc:
        raise SignatureError(f"{where}: bad pattern {exc.pattern!r}: {exc}") from None


def classify_text(text: str, signatures: list[Signature]) -> list[SignatureMatch]:
    """Every signature the text shows, most specific first, each with up to five quoted lines."""
    lines = text.splitlines()
    matches = []
    for signature in signatures:
        if not all(p.search(text) for p in signature.requires):
            continue
        quoted = [QuotedLine(n, line.strip()[:300]) for n, line in enumerate(lines, 1)
                  if any(p.search(line) for p in signature.match)]
        if quoted:
            matches.append(SignatureMatch(signature, tuple(quoted[:MAX_QUOTED_LINES])))
    return matches


def crash_found(matches: list[SignatureMatch]) -> bool:
    return any(m.is_crash for m in matches)
