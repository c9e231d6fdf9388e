"""The appendix section of a probe that has no section of its own: its data as key path → value rows, each with
the meaning its declared shape gives (its SHAPE, through probes/probe_info.py).

A probe added by declaring itself (docs/adding-a-probe.md) appears in the report through this section until it
earns a custom one. Values come from the host, and the table helpers bound and escape each cell.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from gpudiag.models import HostResult
from gpudiag.probe_view import probe
from gpudiag.render.blocks import table
from gpudiag.render.safe_text import md
from probes.probe_info import SHAPES
from probes.schemas import rows as declared_rows

# Probes whose data the appendix and copy/repro sections already lay out by hand.
CUSTOM_SECTIONS = ("deployment", "env", "torch_caps", "sglang_source", "copy_bench", "cuda_graph")
MAX_ROWS = 80  # a probe's generic section is a summary, not a dump
MAX_DEPTH = 6


def generic_sections(host: HostResult) -> list[str]:
    lines: list[str] = []
    for name in sorted(host.probes):
        data = probe(host, name)
        if name in CUSTOM_SECTIONS or data is None:
            continue
        rows = list(_leaves(data, ""))
        meaning = _meanings(name)
        shown: list[tuple[Any, ...]] = [("key", "value", "meaning")]
        shown += [(key, value, meaning.get(re.sub(r"\[\d+\]", "[]", key), "")) for key, value in rows[:MAX_ROWS]]
        lines += [f"#### Probe {md(name)}", ""] + table(shown)
        if len(rows) > MAX_ROWS:
            lines += [f"{len(rows) - MAX_ROWS} more values are in the stored host file.", ""]
    return lines


def _meanings(name: str) -> dict[str, str]:
    """Declared field path ('a.b[].c') → its one-line doc; {} for a probe without a declared shape."""
    shape = SHAPES.get(name)
    return {path: doc for path, _, _, doc in declared_rows(shape, "") if doc} if shape else {}


def _leaves(value: Any, path: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(dotted key path, scalar) for every leaf, in key order; deeper structures shown as one value."""
    if isinstance(value, dict) and value and depth < MAX_DEPTH:
        for key in sorted(value, key=str):
            yield from _leaves(value[key], f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(value, list) and value and depth < MAX_DEPTH:
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]", depth + 1)
    else:
        yield path or "(value)", "null" if value is None else value
