"""A number with its source: {"v": value, "src": measured | config | datasheet | assumed, "note": why/where}."""

from __future__ import annotations

from typing import Any

MEASURED, CONFIG, DATASHEET, ASSUMED = "measured", "config", "datasheet", "assumed"


def fig(value: Any, src: str, note: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"v": value, "src": src}
    if note:
        out["note"] = note
    return out


def mix(*sources: str) -> str:
    """'config+measured': the sources a derived figure rests on, each named once."""
    seen = []
    for src in sources:
        for part in src.split("+"):
            if part and part not in seen:
                seen.append(part)
    return "+".join(sorted(seen))


def rounded(value: float, digits: int = 3) -> float:
    """Significant figures, so reports neither print 17 digits nor lose small quantities."""
    if value == 0:
        return 0.0
    from math import floor, log10

    return round(value, max(0, digits - 1 - int(floor(log10(abs(value))))))
