"""The appendix's copy-timing section: one table with a column per device (eager and graph-replay timings with
their spread), the best strategy against the installed baseline, the installed variants and env gates, the size
sweep and host→device."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from gpudiag.probe_view import as_dict, as_list, dig, fmt_bytes, number, probe
from gpudiag.findings import NOISY_CV, rank_copies
from gpudiag.probe_view import copy_gpus, device_label, workloads
from gpudiag.models import HostResult
from gpudiag.render.blocks import merge_columns, table
from gpudiag.render.safe_text import md
from gpudiag.render.copy_side_figures import column, h2d_text, outlier_lines, said_once, split_text, sweep
from gpudiag.render.timing_cells import NOISY_MARK, Notes, cell
from probes.copybench import strategies as strategy_facts

STRATEGIES = strategy_facts.SHOWN  # declared once, beside the strategies (probes/copybench/strategies.py)
# What each timing method measures, as the methodology states it.
METHOD_TEXT = {
    "cuda_events": "CUDA events around the eager iterations",
    "cuda_graph_replay": "graph replay (CUDA events around replays of a captured graph, divided by the "
    "copies it holds)",
    "perf_counter": "perf_counter wall time (CPU, or host→device with a synchronize after each sample)",
}


def copy_section(host: HostResult, charts: Mapping[str, str]) -> list[str]:
    gpus = copy_gpus(host)
    if not gpus:
        return []
    data = as_dict(probe(host, "copy_bench"))
    lines = [
        "#### Copy timings",
        "",
        f"Method: {md(data.get('method') or '-')}; {_samples_text(timings(data))}. "
        f"One column per device (devices that read the same share one); a cell is the median (p10–p90) "
        f"eager, then / inside a replayed graph; "
        f"{NOISY_MARK} marks a noisy timing (cv > {NOISY_CV:.0%} or flagged by the probe).",
        "",
    ]
    lines += _installed_line(as_dict(data.get("installed"))) + _paths_line(gpus, as_dict(data.get("installed")))
    measured = [g for g in gpus if g.get("status", "ok") == "ok"]
    lines += [
        f"- {md(device_label(g))}: **{md(g.get('status'))}** — {md(g.get('reason') or 'no reason recorded')}"
        for g in gpus
        if g not in measured
    ]
    if measured:
        lines += ([""] if len(measured) < len(gpus) else []) + _devices(measured, as_dict(data.get("installed")))
    lines += outlier_lines(as_list(data.get("outliers")))
    if charts.get(f"copy:{host.name}"):
        lines += [
            f"![copy time vs size, {md(host.name)}]({md(charts[f'copy:{host.name}'])})",
            f"*{md(charts.get(f'copy:{host.name}:caption') or COPY_CAPTION)}*",
            "",
        ]
    return lines


COPY_CAPTION = "Copy time per replay against the bytes a workload copies, one series per workload and strategy."


def timings(data: Any) -> list[dict[str, Any]]:
    """Every timing dict copy_bench recorded (strategies eager and graph, variants, env gates, sweep, h2d)."""
    found: list[dict[str, Any]] = []
    for gpu in as_list(dig(data, "gpus")):
        for w in as_list(dig(gpu, "workloads")):
            for timing in as_dict(dig(w, "strategies")).values():
                found += _with_nested(as_dict(timing))
        for row in as_list(dig(gpu, "sweep")):
            found += [as_dict(dig(row, k)) for k in ("copy", "foreach")]
        found += [as_dict(dig(gpu, "h2d", k)) for k in ("pinned", "pageable", "sync")]
    return [t for t in found if t.get("method")]


def _with_nested(timing: dict[str, Any]) -> list[dict[str, Any]]:
    found = [timing, as_dict(timing.get("graph"))]
    for variant in as_dict(timing.get("variants")).values():
        found += [as_dict(variant), as_dict(dig(variant, "graph"))]
    for gate in as_dict(timing.get("env")).values():
        found += [as_dict(dig(gate, k)) for k in ("on", "off")] + [
            as_dict(dig(gate, k, "graph")) for k in ("on", "off")
        ]
    return found


def methods_and_samples(found: Iterable[dict[str, Any]]) -> tuple[list[str], list[int]]:
    found = list(found)
    methods = sorted({str(t["method"]) for t in found if t.get("method")})
    samples = sorted({int(t["samples"]) for t in found if isinstance(t.get("samples"), int)})
    return methods, samples


def _samples_text(found: list[dict[str, Any]]) -> str:
    _, samples = methods_and_samples(found)
    return f"{'/'.join(map(str, samples))} samples per timing" if samples else "sample count not recorded"


def _installed_line(installed: dict[str, Any]) -> list[str]:
    if not installed:
        return []
    modules = ", ".join(f"`{m}`" for m in as_list(installed.get("modules")) if isinstance(m, str))
    where = (
        f"`_grouped_foreach_copy_` timed from {modules}"
        if modules
        else "no `_grouped_foreach_copy_` definition to time"
    )
    pairs = ", ".join(_pair(name, pair) for name, pair in sorted(as_dict(installed.get("dtype_pairs")).items()))
    return [
        f"Installed sglang {installed.get('release') or 'release unknown'}: {where} (modules from "
        f"{installed.get('modules_from') or '-'})"
        + (f"; buffer dtypes of this release: {pairs}" if pairs else "")
        + ".",
        "",
    ]


def _paths_line(gpus: list[dict[str, Any]], installed: dict[str, Any]) -> list[str]:
    """Per path, across devices: how often each strategy was fastest by each clock (the one ranking)."""
    counts: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    for gpu in gpus:
        if gpu.get("status", "ok") != "ok":
            continue
        for w in workloads(gpu):
            ranked = rank_copies(w, installed)
            if not any(ranked.fastest):
                continue
            both = counts.setdefault(ranked.path, ({}, {}))
            for clock, name in zip(both, ranked.fastest):
                if name:
                    clock[name] = clock.get(name, 0) + 1
    parts = []
    for path, both in sorted(counts.items()):
        said = [
            ", ".join(f"{name} ×{n}" for name, n in sorted(clock.items(), key=lambda kv: (-kv[1], kv[0]))) or "-"
            for clock in both
        ]
        # Savings are stated once, over the strategies sglang can run (Q5); here only which strategy won.
        parts.append(f"{path}: fastest by CPU issue {said[0]}; by GPU stream {said[1]}")
    return [f"Across devices — {'; '.join(parts)}.", ""] if parts else []


def _pair(name: str, pair: Any) -> str:
    """'seq_lens int64 → int32' from the probe's (buffer dtype, source dtype)."""
    if isinstance(pair, list) and len(pair) == 2:
        return f"{name} {pair[1]} → {pair[0]}" if pair[0] != pair[1] else f"{name} {pair[0]}"
    return f"{name} {pair}"


def _by_clock(pair: tuple[str | None, str | None]) -> str:
    """'X (both clocks)' or 'X (CPU issue) / Y (GPU stream)'."""
    if pair[0] == pair[1]:
        return f"{pair[0] or '-'} (both clocks)"
    return f"{pair[0] or '-'} (CPU issue) / {pair[1] or '-'} (GPU stream)"


def _best_text(ranked: Any, notes: Notes) -> str:
    """The one ranking (gpudiag/findings/savings.py) in a cell: the fastest by each clock, the best sglang can run
    against the baseline, or why there is no baseline."""
    fastest = f"fastest {_by_clock(ranked.fastest)}"
    if ranked.baseline is None:
        usable = f"; of what sglang runs, {_by_clock(ranked.best)}" if ranked.best != ranked.fastest else ""
        return f"{fastest}{usable}; no baseline {notes.cite(str(ranked.no_baseline))}"
    base, saving = ranked.baseline, ranked.saving
    said = f" {notes.cite(base.said)}" if base.kind != "installed" else ""
    return (
        f"{fastest}; of what sglang runs, {_by_clock(ranked.best)} saves {saving.text() if saving else '-'} "
        f"against {base.strategy} ({base.kind}{said})"
    )


def _devices(gpus: list[dict[str, Any]], installed: dict[str, Any]) -> list[str]:
    """One timing table and one workload table with a column per device, then the sweep, split and host→device
    lines, each said once for the devices that agree."""
    notes = Notes()
    names = sorted({str(g.get("name")) for g in gpus})
    head = [f"Devices: {', '.join(column(g) for g in gpus)} ({md(', '.join(names))}).", ""]
    cells: dict[tuple[str, str], dict[int, str]] = {}
    summary: dict[str, dict[Any, Any]] = {}
    for i, gpu in enumerate(gpus):
        for w in workloads(gpu):
            name = str(w.get("name"))
            if w.get("status", "ok") != "ok":
                cells.setdefault((name, "-"), {})[i] = f"{w.get('status')}: {w.get('reason') or '-'}"
                continue
            for label, text in _strategy_cells(as_dict(w.get("strategies")), notes):
                cells.setdefault((name, label), {})[i] = text
            entry = summary.setdefault(
                name,
                {"fields": len(as_list(w.get("fields"))), "bytes": fmt_bytes(w.get("total_bytes")), "casts": _casts(w)},
            )
            entry[i] = _best_text(rank_copies(w, installed), notes)
    columns = tuple(column(g) for g in gpus)
    rows: list[tuple[Any, ...]] = [("workload", "strategy") + columns]
    previous = None
    for (name, label), per in cells.items():
        rows.append((name if name != previous else " ", label) + tuple(per.get(i, "-") for i in range(len(gpus))))
        previous = name
    lines = head + table(merge_columns(rows, 2))
    if summary:
        lines += table(
            merge_columns(
                [("workload", "fields", "bytes", "casts (src → dst)") + tuple(f"best on {c}" for c in columns)]
                + [
                    (name, e["fields"], e["bytes"], e["casts"]) + tuple(e.get(i, "-") for i in range(len(gpus)))
                    for name, e in summary.items()
                ],
                4,
            )
        )
    return lines + notes.lines() + sweep(gpus) + said_once(gpus, split_text) + said_once(gpus, h2d_text)


def _strategy_cells(strategies: dict[str, Any], notes: Notes) -> list[tuple[str, str]]:
    names = [s for s in STRATEGIES if s in strategies] + sorted(s for s in strategies if s not in STRATEGIES)
    out: list[tuple[str, str]] = []
    for name in names:
        timing = as_dict(strategies[name])
        caveat = strategy_facts.CAVEATS.get(name)
        label = f"{name} ({caveat})" if caveat else name
        out.append((label, cell(timing, notes)))
        if name != strategy_facts.INSTALLED:
            continue
        for module, variant in sorted(as_dict(timing.get("variants")).items()):
            if module != timing.get("module"):
                out.append((f"installed variant {module}", cell(as_dict(variant), notes)))
        for failed in as_list(timing.get("not_loaded")):
            out.append(
                (
                    f"installed variant {dig(failed, 'module') or '-'}",
                    f"not loaded {notes.cite(str(dig(failed, 'reason') or 'no reason recorded'))}",
                )
            )
        for gate, both in sorted(as_dict(timing.get("env")).items()):
            host_value = dig(both, "host_value")
            sides = [(value, as_dict(dig(both, side))) for side, value in (("on", "1"), ("off", "0"))]
            if all(_same(t, timing) for _, t in sides):
                out.append((f"installed, {gate}=1 or 0", "same as installed (within p10–p90)"))
                continue
            for value, gated in sides:
                out.append(
                    (
                        f"installed, {gate}={value} (host: {'unset' if host_value is None else host_value})",
                        cell(gated, notes),
                    )
                )
    return out


def _same(timing: dict[str, Any], reference: dict[str, Any]) -> bool:
    """Whether a gated timing's median lies inside the reference's p10–p90 (eager and graph)."""
    for a, b in ((timing, reference), (as_dict(timing.get("graph")), as_dict(reference.get("graph")))):
        median, low, high = number(a.get("median_us")), number(b.get("p10_us")), number(b.get("p90_us"))
        if not b and not a:
            continue
        if median is None or low is None or high is None or not low <= median <= high:
            return False
    return True


def _casts(workload: dict[str, Any]) -> str:
    casts = [
        f"{f.get('name')} {f.get('src_dtype')} → {f.get('dtype')}"
        for f in as_list(workload.get("fields"))
        if isinstance(f, dict) and f.get("src_dtype") and f.get("src_dtype") != f.get("dtype")
    ]
    return ", ".join(casts) or "none"
