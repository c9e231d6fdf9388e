"""What a copy run measured beside the replay tables, each said once for the devices that agree: the split
threshold, the single-tensor size sweep (copy_() against the foreach kernel), host→device copies, outlier GPUs."""

from __future__ import annotations

from typing import Any

from gpudiag.findings import OUTLIER_RATIO
from gpudiag.probe_view import as_dict, as_list, fmt_bytes, fmt_us, number
from gpudiag.render.blocks import merge_columns, table
from gpudiag.render.safe_text import md
from gpudiag.render.timing_cells import spread


def column(gpu: dict[str, Any]) -> str:
    return "CPU" if gpu.get("index") is None else f"GPU {gpu.get('index')}"


def said_once(gpus: list[dict[str, Any]], text_of: Any) -> list[str]:
    """A per-device line, said once for all the devices it reads the same on."""
    groups: dict[str, list[str]] = {}
    for gpu in gpus:
        groups.setdefault(text_of(gpu), []).append(column(gpu))
    if len(gpus) == 1:
        return [text for text in groups] + [""]
    return [f"- {', '.join(cols)}: {text}" for text, cols in groups.items()] + [""]


CLOCK_NAMES = {"graph": "GPU stream", "eager": "CPU issue"}


def split_text(gpu: dict[str, Any]) -> str:
    clock = CLOCK_NAMES.get(str(gpu.get("crossover_clock")))
    return (
        f"Split: crossover {fmt_bytes(gpu.get('crossover_bytes'))}"
        + (f" ({clock})" if clock else "")
        + f", recommended split "
        f"{fmt_bytes(gpu.get('recommended_split_bytes'))}"
        + (f" — {md(gpu['split_reason'])}" if gpu.get("split_reason") else "")
        + "."
    )


def sweep(gpus: list[dict[str, Any]]) -> list[str]:
    """Rows by size, a column per device: copy_() / foreach and which wins with room to spare."""
    sizes: dict[Any, dict[int, str]] = {}
    replayed = False
    for i, gpu in enumerate(gpus):
        for s in (s for s in as_list(gpu.get("sweep")) if isinstance(s, dict)):
            if s.get("status") == "skipped":
                sizes.setdefault(number(s.get("bytes")), {})[i] = f"skipped: {md(s.get('reason') or '-')}"
                continue
            copy, foreach = _sweep_side(s, "copy"), _sweep_side(s, "foreach")
            text = f"{spread(copy)} / {spread(foreach)} ({_faster(copy, foreach)})"
            graph_copy, graph_foreach = as_dict(copy.get("graph")), as_dict(foreach.get("graph"))
            if graph_copy or graph_foreach:
                replayed = True
                text += f" · {spread(graph_copy)} / {spread(graph_foreach)} ({_faster(graph_copy, graph_foreach)})"
            sizes.setdefault(number(s.get("bytes")), {})[i] = text
    if not sizes:
        return []
    head = "bytes: copy_() / foreach" + (", eager · in a replayed graph" if replayed else "")
    rows: list[tuple[Any, ...]] = [(head,) + tuple(column(g) for g in gpus)]
    rows += [(fmt_bytes(b),) + tuple(per.get(i, "-") for i in range(len(gpus))) for b, per in sizes.items()]
    return table(merge_columns(rows, 1))


def _sweep_side(row: dict[str, Any], kind: str) -> dict[str, Any]:
    side = as_dict(row.get(kind))
    if row.get(f"{kind}_us") is not None and "median_us" not in side and side.get("status", "ok") == "ok":
        side = dict(side, median_us=row[f"{kind}_us"])
    return side


def _faster(copy: dict[str, Any], foreach: dict[str, Any]) -> str:
    """Which side wins with room to spare: its p90 below the other's p10 (else 'overlap')."""
    if copy.get("status", "ok") != "ok" or foreach.get("status", "ok") != "ok":
        return "-"
    c10, c90, f10, f90 = (number(t.get(k)) for t in (copy, foreach) for k in ("p10_us", "p90_us"))
    if None in (c10, c90, f10, f90):
        return "-"
    if c90 < f10:  # type: ignore[operator]
        return "copy_()"
    return "foreach" if f90 < c10 else "overlap"  # type: ignore[operator]


def h2d_text(gpu: dict[str, Any]) -> str:
    h2d = as_dict(gpu.get("h2d"))
    if not h2d:
        return f"Host→device: {md(gpu.get('h2d_reason') or 'not measured')}."
    parts = [
        f"{label} {spread(as_dict(h2d.get(key))) if h2d.get(key) else fmt_us(h2d.get(key + '_us'))}"
        for label, key in (("pinned", "pinned"), ("pageable", "pageable"), ("synchronize", "sync"))
    ]
    return f"Host→device ({fmt_bytes(h2d.get('bytes'))}, {md(h2d.get('method') or '-')}): {'; '.join(parts)}."


def outlier_lines(outliers: list[Any]) -> list[str]:
    found = [o for o in outliers if isinstance(o, dict)]
    if not found:
        return []
    rows: list[tuple[Any, ...]] = [
        ("GPU", "median ratio", "figures compared", "worst figure", "value", "siblings' median", "ratio")
    ]
    for o in sorted(found, key=lambda o: number(o.get("index")) or 0):
        ratio = number(o.get("median_ratio"))
        rows.append(
            (
                o.get("index"),
                f"{ratio:.2f}" if ratio is not None else "-",
                o.get("metrics_compared"),
                o.get("metric"),
                o.get("value"),
                o.get("siblings_median"),
                o.get("ratio"),
            )
        )
    return [
        f"Outliers as the probe found them over its steady figures (sweep, workloads, host→device): the median "
        f"of a GPU's ratios to its siblings decides, more than {OUTLIER_RATIO:.0%} off.",
        "",
    ] + table(rows)
