"""One timing as a table cell: median with p10–p90, the noisy mark, a status with its reason cited once under the
table. Shared by the copy-timing tables and the lines beside them."""

from __future__ import annotations

from typing import Any

from gpudiag.findings import NOISY_CV
from gpudiag.probe_view import as_dict, fmt_us, number

NOISY_MARK = "~"


class Notes:
    """Reasons shown once under a table and cited in its cells as [n]: a skip reason repeated on every
    workload would otherwise fill the table."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def cite(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def lines(self) -> list[str]:
        return [f"[{i}] {text}" + ("  " if i < len(self.texts) else "") for i, text in enumerate(self.texts, 1)] + (
            [""] if self.texts else []
        )


def cell(timing: dict[str, Any], notes: Notes) -> str:
    graph = as_dict(timing.get("graph"))
    return spread(timing, notes) + (f" / {spread(graph, notes)}" if graph else "")


def spread(timing: dict[str, Any], notes: Notes | None = None) -> str:
    """'31.2 µs (30.1–32.7)', with the noisy mark; a status and its reason when the timing is not ok."""
    if not timing:
        return "-"
    if timing.get("status", "ok") != "ok":
        reason = str(timing.get("reason") or "no reason recorded")
        return f"{timing.get('status')} {notes.cite(reason)}" if notes else f"{timing.get('status')}: {reason}"
    text = fmt_us(timing.get("median_us"))
    if number(timing.get("p10_us")) is not None and number(timing.get("p90_us")) is not None:
        text += f" ({_bare(timing['p10_us'])}–{_bare(timing['p90_us'])})"
    return text + (f" {NOISY_MARK}" if is_noisy(timing) else "")


def is_noisy(timing: dict[str, Any]) -> bool:
    cv = number(timing.get("cv"))
    return bool(timing.get("noisy")) or (cv is not None and cv > NOISY_CV)


def _bare(value: Any) -> str:
    return fmt_us(value).replace(" µs", "")
