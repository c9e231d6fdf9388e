"""The run as a markdown report: summary, fleet table, findings with evidence, per-host appendix, methodology.

Pure and deterministic: the same run and findings give the same bytes (no clock, everything sorted).
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from gpudiag.findings.common import SEVERITY_RANK, as_dict, as_list, dig, fmt_bytes, fmt_us, probe
from gpudiag.findings.copies import copy_gpus, device_label, workloads
from gpudiag.findings.cuda_graph import cells
from gpudiag.findings.facts import command_line, host_facts, servers_of
from gpudiag.models import SEVERITIES, Evidence, Finding, HostResult
from gpudiag.store import LoadedRun

TOP_FINDINGS = 5
STRATEGIES = ("installed", "loop", "grouped_foreach", "grouped_foreach_dma_split", "packed")


def cell(value: Any) -> str:
    text = "-" if value in (None, "") else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table(rows: Sequence[Sequence[Any]]) -> list[str]:
    header, *body = rows
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in body]
    return lines + [""]


def fenced(file: str | None, line: int | None, snippet: str, language: str = "python") -> list[str]:
    where = f"# {file}:{line}" if file and line else (f"# {file}" if file else None)
    fence = "````" if "```" in snippet else "```"
    return [fence + language] + ([where] if where else []) + snippet.splitlines() + [fence, ""]


def render_markdown(run: LoadedRun, findings: Sequence[Finding], charts: Mapping[str, str] | None = None) -> str:
    charts = charts or {}
    out: list[str] = []
    for section in (_title(run), _summary(findings), _fleet(run), _findings(findings),
                    _appendix(run, charts), _methodology(run), _next_steps(findings)):
        out += section
    return "\n".join(out).rstrip("\n") + "\n"


def _title(run: LoadedRun) -> list[str]:
    m = run.manifest
    statuses = Counter(h.status for h in run.hosts)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    date = (m.started_at or "unknown date")[:10]
    lines = [f"# gpudiag report — run {m.run_id} ({date})", "",
             f"- Run: `{m.run_id}` ({m.kind}), started {m.started_at or '-'}, finished {m.finished_at or '-'}"
             + (" — **interrupted**" if m.interrupted else ""),
             f"- Hosts: {len(run.hosts)} ({counts or 'none'})",
             f"- gpudiag {m.gpudiag_version or '-'}" + (f": `{' '.join(m.argv[1:])}`" if m.argv else ""), ""]
    return lines


def _summary(findings: Sequence[Finding]) -> list[str]:
    counts = Counter(f.severity for f in findings)
    lines = ["## Executive summary", ""]
    lines += table([("severity", "findings")] + [(s, counts.get(s, 0)) for s in SEVERITIES])
    if not findings:
        return lines + ["No findings: nothing in this run calls for action.", ""]
    lines.append("Top findings:")
    lines.append("")
    for f in list(findings)[:TOP_FINDINGS]:
        lines.append(f"- **{f.severity}** — {f.title}" + (f" ({', '.join(f.hosts)})" if f.hosts else ""))
    if len(findings) > TOP_FINDINGS:
        lines.append(f"- … and {len(findings) - TOP_FINDINGS} more below.")
    return lines + [""]


def _fleet(run: LoadedRun) -> list[str]:
    rows: list[tuple[Any, ...]] = [("host", "status", "GPUs", "driver", "torch", "sglang", "speculative",
                                    "CUDA graphs")]
    for h in run.hosts:
        f = host_facts(h)
        rows.append((f.name, f.status, f.gpus, f.driver, f.torch, f.sglang, f.speculative, f.cuda_graphs))
    return ["## Fleet", ""] + table(rows)


def _findings(findings: Sequence[Finding]) -> list[str]:
    lines = ["## Findings", ""]
    number = 0
    for severity in SEVERITIES:
        group = [f for f in findings if f.severity == severity]
        if not group:
            continue
        lines += [f"### {severity.capitalize()} ({len(group)})", ""]
        for f in group:
            number += 1
            lines += [f"#### {number}. {f.title}", "", f"- Rule: `{f.id}`"]
            if f.hosts:
                lines.append(f"- Hosts: {', '.join(f.hosts)}")
            lines += ["", "Evidence:", ""]
            for e in f.evidence:
                lines += _evidence(e)
            lines += [f"**Recommendation:** {f.recommendation}", ""]
            if f.sources:
                lines += [f"Sources: {', '.join(f'`{s}`' for s in f.sources)}", ""]
    if number == 0:
        lines += ["None.", ""]
    return lines


def _evidence(e: Evidence) -> list[str]:
    where = f" — `{e.file}:{e.line}`" if e.file and e.line else (f" — `{e.file}`" if e.file else "")
    host = f"[{e.host}] " if e.host else ""
    lines = [f"- {host}{e.text}{where}", ""]
    if e.snippet:
        lines += fenced(e.file, e.line, e.snippet, "python" if e.kind == "source" else "text")
    if e.table:
        lines += table(e.table)
    return lines


def _appendix(run: LoadedRun, charts: Mapping[str, str]) -> list[str]:
    lines = ["## Appendix: hosts", ""]
    for host in run.hosts:
        lines += [f"### {host.name}", "", f"Status: {host.status}" + (f" — {host.reason}" if host.reason else ""), ""]
        if host.probes:
            lines += table([("probe", "status", "time", "note")] + [
                (name, p.status, f"{p.duration_s:.1f} s", p.reason or dig(p.error, "message") or "")
                for name, p in sorted(host.probes.items())])
        for section in (_environment(host), _source_facts(host), _deployment(host), _copy_timings(host, charts),
                        _repro_matrix(host, charts)):
            lines += section
    return lines


def _environment(host: HostResult) -> list[str]:
    env = probe(host, "env")
    if env is None:
        return []
    f = host_facts(host)
    python = as_dict(env.get("python"))
    torch = as_dict(env.get("torch"))
    rows: list[tuple[Any, ...]] = [("fact", "value"), ("hostname", env.get("hostname")), ("os", env.get("os")),
                                   ("kernel", env.get("kernel")), ("CPUs", env.get("cpu_count")),
                                   ("memory", f"{env['memory_total_mib']} MiB"
                                    if env.get("memory_total_mib") else None),
                                   ("python", f"{python.get('version', '-')} ({python.get('executable', '-')})"
                                    + (", venv" if python.get("venv") else "")),
                                   ("torch", f.torch + (f" (CUDA {torch['cuda']})" if torch.get("cuda") else "")
                                    if torch.get("available", True) else f"not available: {torch.get('reason')}"),
                                   ("driver / CUDA", f"{f.driver} / {f.cuda}"), ("GPUs", f.gpus),
                                   ("compute capability", f.compute_capability),
                                   ("topology", dig(env, "topology", "summary"))]
    lines = ["#### Environment", ""] + table(rows)
    devices = [d for d in as_list(dig(env, "gpus", "devices")) if isinstance(d, dict)]
    if devices:
        lines += table([("GPU", "name", "PCI bus", "memory used / total", "util", "processes")] + [
            (d.get("index"), d.get("name"), d.get("pci_bus_id"),
             f"{d.get('memory_used_mib', '-')} / {d.get('memory_total_mib', '-')} MiB", d.get("utilization_pct"),
             ", ".join(f"{p.get('name')} ({p.get('pid')})" for p in as_list(d.get("processes")) if isinstance(p, dict)))
            for d in devices])
    elif dig(env, "gpus", "reason"):
        lines += [f"GPUs: {dig(env, 'gpus', 'status')} — {dig(env, 'gpus', 'reason')}", ""]
    return lines


def _fact_rows(items: Iterable[tuple[str, Any]]) -> list[tuple[Any, ...]]:
    rows = []
    for what, fact in items:
        fact = as_dict(fact)
        where = f"{fact.get('file')}:{fact.get('line')}" if fact.get("file") else "-"
        rows.append((what, where, fact.get("snippet") or ""))
    return rows


def _source_facts(host: HostResult) -> list[str]:
    sg = probe(host, "sglang_source")
    if sg is None:
        return []
    if sg.get("found") is False:
        return ["#### Source facts (sglang)", "", f"sglang not found: {sg.get('reason') or '-'}", ""]
    grouped = as_dict(sg.get("grouped_foreach_copy"))
    items: list[tuple[str, Any]] = [(f"version {sg.get('version') or '-'}", sg.get("version_source"))]
    items += [(f"_grouped_foreach_copy_ in {d.get('module')}", d) for d in as_list(grouped.get("definitions"))]
    items += [(f"fast path {p.get('kind')}", p) for d in as_list(grouped.get("definitions"))
              for p in as_list(dig(d, "fast_paths"))]
    items += [("hasattr(torch, '_foreach_copy_')", f) for f in as_list(grouped.get("has_foreach_copy_flag"))]
    items += [(f"call {c.get('qualname')} ({', '.join(map(str, as_list(c.get('fields'))))})", c)
              for c in as_list(grouped.get("call_sites"))]
    for name, fact in sorted(as_dict(sg.get("eagle")).items()):
        fact = as_dict(fact)
        state = "batched" if fact.get("batched") else f"{fact.get('per_tensor_copies', '?')} per-tensor copies"
        replay = {"file": fact.get("file"), "line": fact.get("replay_line") or fact.get("line"),
                  "snippet": next((e.get("snippet") for e in as_list(fact.get("evidence"))
                                   if isinstance(e, dict) and e.get("role") == "replay_method"), None)}
        items.append((f"EAGLE {name}: {fact.get('class')}.{fact.get('replay_method')} — {state}", replay))
    items += [(f"DFlash guard: {g.get('message') or g.get('condition')}", g)
              for g in as_list(dig(sg, "dflash", "draft_graph_guards"))]
    lines = ["#### Source facts (sglang)", "",
             f"Package `{sg.get('package_dir') or '-'}` under `{sg.get('site_packages') or '-'}`; speculative "
             f"algorithms: {', '.join(map(str, as_list(sg.get('speculative_algorithms')))) or '-'}.", ""]
    lines += table([("fact", "file:line", "snippet")] + _fact_rows(items))
    integrity = as_dict(sg.get("integrity"))
    if integrity:
        lines += [f"Integrity ({integrity.get('method', '-')}): {integrity.get('checked', '-')} files checked, "
                  f"{len(as_list(integrity.get('modified')))} modified, {len(as_list(integrity.get('missing')))} "
                  "missing" + (f"; editable checkout {dig(integrity, 'editable', 'path')} at "
                               f"{dig(integrity, 'editable', 'commit')}" if dig(integrity, "editable", "path") else "")
                  + ".", ""]
    return lines


def _deployment(host: HostResult) -> list[str]:
    if probe(host, "deployment") is None:
        return []
    servers = servers_of(host)
    if not servers:
        return ["#### Deployment", "", "No running sglang server found.", ""]
    lines = ["#### Deployment", ""]
    for s in servers:
        lines += [f"Server pid {s.get('pid', '-')} ({s.get('python') or '-'}):", "", "```", command_line(s),
                  "```", ""]
    return lines


def _copy_timings(host: HostResult, charts: Mapping[str, str]) -> list[str]:
    gpus = copy_gpus(host)
    if not gpus:
        return []
    lines = ["#### Copy timings", "", f"Method: {dig(probe(host, 'copy_bench'), 'method') or '-'}", ""]
    for gpu in gpus:
        rows: list[tuple[Any, ...]] = [("workload", "fields") + STRATEGIES + ("best",)]
        for w in workloads(gpu):
            strategies = as_dict(w.get("strategies"))
            rows.append((w.get("name"), len(as_list(w.get("fields")))) + tuple(
                _strategy_cell(as_dict(strategies.get(s))) for s in STRATEGIES) + (w.get("best"),))
        lines += [f"{device_label(gpu)}, median per replay:", ""] + table(rows)
    first = gpus[0]
    sweep = [s for s in as_list(first.get("sweep")) if isinstance(s, dict)]
    if sweep:
        lines += [f"Size sweep on {device_label(first)} (crossover {fmt_bytes(first.get('crossover_bytes'))}, "
                  f"recommended split {fmt_bytes(first.get('recommended_split_bytes'))}):", ""]
        lines += table([("bytes", "copy_()", "foreach")] + [
            (fmt_bytes(s.get("bytes")), fmt_us(s.get("copy_us")), fmt_us(s.get("foreach_us"))) for s in sweep])
    if charts.get(f"copy:{host.name}"):
        lines += [f"![copy time vs size, {host.name}]({charts[f'copy:{host.name}']})", ""]
    return lines


def _strategy_cell(timing: dict[str, Any]) -> str:
    if not timing:
        return "-"
    if timing.get("status", "ok") != "ok":
        return str(timing.get("status"))
    return fmt_us(timing.get("median_us"))


def _repro_matrix(host: HostResult, charts: Mapping[str, str]) -> list[str]:
    found = cells(host)
    if not found:
        return []
    data = probe(host, "cuda_graph") or {}
    gpu = as_dict(data.get("gpu"))
    sizes = sorted({c.get("batch_size") for c in found if isinstance(c.get("batch_size"), int)})
    keys = sorted({(str(c.get("path")), str(c.get("draft_tokens", "-"))) for c in found})
    status = {(str(c.get("path")), str(c.get("draft_tokens", "-")), c.get("batch_size")): str(c.get("status"))
              for c in found}
    rows: list[tuple[Any, ...]] = [("path", "draft tokens") + tuple(f"bs {s}" for s in sizes)]
    rows += [k + tuple(status.get(k + (s,), "-") for s in sizes) for k in keys]
    where = (f"on GPU {gpu.get('index', '-')} {gpu.get('name', '-')} ({gpu.get('compute_capability', '-')})" if gpu
             else f"not run: {data.get('skip_reason') or 'no GPU was chosen'}")
    lines = ["#### CUDA-graph repro matrix", "", f"{data.get('mode', '-')} mode {where}.", ""] + table(rows)
    if dig(data, "boundary", "text"):
        lines += [f"Boundary: {dig(data, 'boundary', 'text')}", ""]
    if charts.get(f"repro:{host.name}"):
        lines += [f"![repro matrix, {host.name}]({charts[f'repro:{host.name}']})", ""]
    return lines


def _methodology(run: LoadedRun) -> list[str]:
    methods = sorted({str(dig(probe(h, "copy_bench"), "method")) for h in run.hosts
                      if dig(probe(h, "copy_bench"), "method")})
    lines = ["## Methodology", "",
             "- Environment: hostname, OS, Python and torch read on each host by the probing interpreter; GPUs, "
             "driver and topology from `nvidia-smi` (each command under a timeout).",
             "- Source facts: the installed sglang read as text and AST on the host (never imported); every fact "
             "names its file (relative to site-packages) and line.",
             "- Integrity: installed files hashed and compared with the wheel's RECORD, or `git status` of an "
             "editable checkout.",
             "- Deployment: running sglang servers found from the process table; flags parsed from their "
             "command lines.",
             "- torch capabilities: `torch._foreach_copy_` looked up with hasattr, then run on each dtype pair "
             "and compared with a per-tensor `copy_`.",
             "- Copy timings: each strategy copies the same tensors a replay copies; medians with p10/p90 over "
             "the stated samples. Methods recorded in this run: " + ("; ".join(methods) or "none (not measured)")
             + ".",
             "- CUDA-graph repro: each cell (path, batch size, draft tokens) captures and replays in its own "
             "child process, output compared with eager; failures matched against known signatures.",
             "- Outliers: a GPU is flagged when a median is more than 20% away from the median of its siblings "
             "on the same host (three GPUs or more).", ""]
    return lines


def _next_steps(findings: Sequence[Finding]) -> list[str]:
    lines = ["## Next steps", ""]
    seen: list[str] = []
    for f in sorted(findings, key=lambda f: SEVERITY_RANK.get(f.severity, 9)):
        step = f"{f.recommendation} ({', '.join(f.hosts) or 'fleet'}; `{f.id}`)"
        if f.severity != "info" and step not in seen:
            seen.append(step)
    if not seen:
        lines.append("1. Nothing urgent. Rerun `gpudiag scan --deep` after any sglang, torch or driver change.")
    lines += [f"{i}. {step}" for i, step in enumerate(seen, 1)]
    return lines + [""]
