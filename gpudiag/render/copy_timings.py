"""The appendix's copy-timing section: per device, eager and graph-replay timings with their spread, the best
strategy against the installed baseline, the installed variants and env gates, the size sweep and host→device."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from gpudiag.findings.common import as_dict, as_list, dig, fmt_bytes, fmt_us, number, probe
from gpudiag.findings.copies import NOISY_CV, OUTLIER_RATIO, copy_gpus, device_label, workloads
from gpudiag.models import HostResult
from gpudiag.render.blocks import table

STRATEGIES = ("installed", "loop", "grouped_foreach", "grouped_foreach_dma_split", "packed")
NOISY_MARK = "~"
# What each timing method measures, as the methodology states it.
METHOD_TEXT = {"cuda_events": "CUDA events around the eager iterations",
               "cuda_graph_replay": "graph replay (CUDA events around replays of a captured graph, divided by the "
                                    "copies it holds)",
               "perf_counter": "perf_counter wall time (CPU, or host→device with a synchronize after each sample)"}


def copy_section(host: HostResult, charts: Mapping[str, str]) -> list[str]:
    gpus = copy_gpus(host)
    if not gpus:
        return []
    data = as_dict(probe(host, "copy_bench"))
    lines = ["#### Copy timings", "", f"Method: {data.get('method') or '-'}; {_samples_text(timings(data))}. "
             f"Times are per copy step: median (p10–p90); {NOISY_MARK} marks a noisy timing (cv > "
             f"{NOISY_CV:.0%} or flagged by the probe); ×N is the speedup over the per-tensor loop.", ""]
    lines += _installed_line(as_dict(data.get("installed"))) + _paths_line(as_dict(dig(data, "summary", "paths")))
    for gpu in gpus:
        lines += _device(gpu)
    lines += _outliers(as_list(data.get("outliers")))
    if charts.get(f"copy:{host.name}"):
        lines += [f"![copy time vs size, {host.name}]({charts[f'copy:{host.name}']})", ""]
    return lines


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
        found += [as_dict(dig(gate, k)) for k in ("on", "off")] + [as_dict(dig(gate, k, "graph")) for k in ("on", "off")]
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
    where = (f"`_grouped_foreach_copy_` timed from {modules}" if modules else
             "no `_grouped_foreach_copy_` definition to time")
    pairs = ", ".join(_pair(name, pair) for name, pair in sorted(as_dict(installed.get("dtype_pairs")).items()))
    return [f"Installed sglang {installed.get('release') or 'release unknown'}: {where} (modules from "
            f"{installed.get('modules_from') or '-'})" + (f"; buffer dtypes of this release: {pairs}" if pairs else "") + ".", ""]


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
        return [f"[{i}] {text}" + ("  " if i < len(self.texts) else "") for i, text in enumerate(self.texts, 1)] + \
            ([""] if self.texts else [])


def _paths_line(paths: dict[str, Any]) -> list[str]:
    """Per path, across devices: how often each strategy was best and the largest saving vs installed."""
    parts = []
    for path, entry in sorted(paths.items()):
        best = ", ".join(f"{name} ×{count}" for name, count in sorted(as_dict(dig(entry, "best")).items(),
                                                                       key=lambda kv: (-(number(kv[1]) or 0), kv[0])))
        saving = number(dig(entry, "max_saving_vs_installed_us"))
        parts.append(f"{path}: best {best or '-'}" + (f", up to {fmt_us(saving)} saved vs installed"
                                                       if saving is not None else ""))
    return [f"Across devices — {'; '.join(parts)}.", ""] if parts else []


def _pair(name: str, pair: Any) -> str:
    """'seq_lens int64 → int32' from the probe's (buffer dtype, source dtype)."""
    if isinstance(pair, list) and len(pair) == 2:
        return f"{name} {pair[1]} → {pair[0]}" if pair[0] != pair[1] else f"{name} {pair[0]}"
    return f"{name} {pair}"


def _device(gpu: dict[str, Any]) -> list[str]:
    label = device_label(gpu)
    notes = Notes()
    if gpu.get("status", "ok") != "ok":
        return [f"{label}: **{gpu.get('status')}** — {gpu.get('reason') or 'no reason recorded'}", ""]
    rows: list[tuple[Any, ...]] = [("workload", "strategy", "eager", "eager ×loop", "graph replay", "graph ×loop")]
    summary: list[tuple[Any, ...]] = [("workload", "fields", "bytes", "casts (src → dst)", "best", "saving vs installed",
                                       "installed baseline")]
    for w in workloads(gpu):
        name = w.get("name")
        if w.get("status", "ok") != "ok":
            rows.append((name, f"{w.get('status')}: {w.get('reason') or '-'}", "-", "-", "-", "-"))
            continue
        rows += _strategy_rows(name, as_dict(w.get("strategies")), notes)
        summary.append((name, len(as_list(w.get("fields"))), fmt_bytes(w.get("total_bytes")), _casts(w), w.get("best"),
                        fmt_us(w.get("saving_vs_installed_us")),
                        _baseline(as_dict(w.get("installed_baseline")), notes)))
    if not any(row[4] != "-" for row in rows[1:] if len(row) > 4):
        rows = [row[:4] for row in rows]        # no graph was captured on this device (a CPU): no graph columns
    lines = [f"{label}:", ""] + table(rows)
    if len(summary) > 1:
        lines += table(summary)
    return lines + notes.lines() + _sweep(gpu) + _h2d(gpu)


def _strategy_rows(workload: Any, strategies: dict[str, Any], notes: Notes) -> list[tuple[Any, ...]]:
    names = [s for s in STRATEGIES if s in strategies] + sorted(s for s in strategies if s not in STRATEGIES)
    rows: list[tuple[Any, ...]] = []
    for name in names:
        timing = as_dict(strategies[name])
        rows.append(_timing_row(name, timing, notes))     # the installed module is named above the tables
        if name != "installed":
            continue
        for module, variant in sorted(as_dict(timing.get("variants")).items()):
            if module != timing.get("module"):
                rows.append(_timing_row(f"installed variant {module}", as_dict(variant), notes))
        for failed in as_list(timing.get("not_loaded")):
            rows.append((f"installed variant {dig(failed, 'module') or '-'}",
                         f"not loaded {notes.cite(str(dig(failed, 'reason') or 'no reason recorded'))}",
                         "-", "-", "-"))
        for gate, both in sorted(as_dict(timing.get("env")).items()):
            host_value = dig(both, "host_value")
            for side, value in (("on", "1"), ("off", "0")):
                rows.append(_timing_row(f"installed, {gate}={value} (host: "
                                        f"{'unset' if host_value is None else host_value})",
                                        as_dict(dig(both, side)), notes))
    return [(workload if i == 0 else " ",) + row for i, row in enumerate(rows)]


def _timing_row(label: str, timing: dict[str, Any], notes: Notes) -> tuple[Any, ...]:
    graph = as_dict(timing.get("graph"))
    return (label, spread(timing, notes), _speedup(timing), spread(graph, notes) if graph else "-", _speedup(graph))


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


def _speedup(timing: dict[str, Any]) -> str:
    value = number(timing.get("speedup_vs_loop")) if timing.get("status", "ok") == "ok" else None
    return "-" if value is None else f"×{value:.2f}"


def _casts(workload: dict[str, Any]) -> str:
    casts = [f"{f.get('name')} {f.get('src_dtype')} → {f.get('dtype')}" for f in as_list(workload.get("fields"))
             if isinstance(f, dict) and f.get("src_dtype") and f.get("src_dtype") != f.get("dtype")]
    return ", ".join(casts) or "none"


def _baseline(baseline: dict[str, Any], notes: Notes) -> str:
    if not baseline:
        return "-"
    if baseline.get("reason") or number(baseline.get("median_us")) is None:
        return f"{baseline.get('kind') or 'unknown'} {notes.cite(str(baseline.get('reason') or 'no timing'))}"
    exact = "" if baseline.get("exact", True) else ", approximated"
    return f"{baseline.get('kind')}: {baseline.get('strategy')} {fmt_us(baseline.get('median_us'))}{exact}"


def _sweep(gpu: dict[str, Any]) -> list[str]:
    sweep = [s for s in as_list(gpu.get("sweep")) if isinstance(s, dict)]
    head = (f"Split: crossover {fmt_bytes(gpu.get('crossover_bytes'))}, recommended split "
            f"{fmt_bytes(gpu.get('recommended_split_bytes'))}" + (f" — {gpu['split_reason']}"
                                                                   if gpu.get("split_reason") else "") + ".")
    if not sweep:
        return [head, ""]
    rows: list[tuple[Any, ...]] = [("bytes", "copy_()", "foreach", "faster")]
    for s in sweep:
        copy = _sweep_side(s, "copy")
        foreach = _sweep_side(s, "foreach")
        rows.append((fmt_bytes(s.get("bytes")), spread(copy), spread(foreach), _faster(copy, foreach)))
    return [head, ""] + table(rows)


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
    if c90 < f10:                           # type: ignore[operator]
        return "copy_()"
    return "foreach" if f90 < c10 else "overlap"   # type: ignore[operator]


def _h2d(gpu: dict[str, Any]) -> list[str]:
    h2d = as_dict(gpu.get("h2d"))
    if not h2d:
        return [f"Host→device: {gpu.get('h2d_reason') or 'not measured'}.", ""]
    parts = [f"{label} {spread(as_dict(h2d.get(key))) if h2d.get(key) else fmt_us(h2d.get(key + '_us'))}"
             for label, key in (("pinned", "pinned"), ("pageable", "pageable"), ("synchronize", "sync"))]
    return [f"Host→device ({fmt_bytes(h2d.get('bytes'))}, {h2d.get('method') or '-'}): {'; '.join(parts)}.", ""]


def _outliers(outliers: list[Any]) -> list[str]:
    found = [o for o in outliers if isinstance(o, dict)]
    if not found:
        return []
    rows: list[tuple[Any, ...]] = [("GPU", "median ratio", "figures compared", "worst figure", "value",
                                    "siblings' median", "ratio")]
    for o in sorted(found, key=lambda o: number(o.get("index")) or 0):
        ratio = number(o.get("median_ratio"))
        rows.append((o.get("index"), f"{ratio:.2f}" if ratio is not None else "-", o.get("metrics_compared"),
                     o.get("metric"), o.get("value"), o.get("siblings_median"), o.get("ratio")))
    return [f"Outliers as the probe found them over its steady figures (sweep, workloads, host→device): the median "
            f"of a GPU's ratios to its siblings decides, more than {OUTLIER_RATIO:.0%} off.", ""] + table(rows)
