"""The run as a markdown report: summary, fleet table, findings with evidence, per-host appendix, methodology.

Pure and deterministic: the same run and findings give the same bytes (no clock, everything sorted).
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from gpudiag.findings.common import SEVERITY_RANK, as_dict, as_list, dig, probe
from gpudiag.findings.cuda_graph import cells
from gpudiag.findings.facts import host_facts
from gpudiag.models import SEVERITIES, Evidence, Finding, HostResult
from gpudiag.render.appendix import host_sections
from gpudiag.repro.logrun import appendix as log_appendix
from gpudiag.render.blocks import fenced, table
from gpudiag.render.copy_timings import METHOD_TEXT, copy_section, methods_and_samples, timings
from gpudiag.models import LoadedRun

TOP_FINDINGS = 5


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
                                    "CUDA graphs (decode)")]
    pythons: list[tuple[Any, ...]] = [("host", "sglang read from (chosen by)", "torch read in")]
    for h in run.hosts:
        f = host_facts(h)
        torch = f"{f.torch} (another Python than sglang's)" if f.torch_elsewhere else f.torch
        rows.append((f.name, f.status, f.gpus, f.driver, torch, f.sglang, f.speculative, f.cuda_graphs))
        if (f.sglang_interpreter, f.torch_interpreter) != ("-", "-"):
            same = f.torch_interpreter.split(" (")[0] == f.sglang_interpreter.split(" (")[0]
            pythons.append((f.name, f.sglang_interpreter, "the same Python" if same else f.torch_interpreter))
    if not run.hosts:
        return ["## Fleet", "", "No hosts: this run read a file on this machine and contacted none.", ""]
    lines = ["## Fleet", ""] + table(rows)
    if len(pythons) > 1:
        lines += ["Interpreters: the Python whose sglang the source facts describe, and the one torch's facts "
                  "(env, torch_caps) were read in.", ""] + table(pythons)
    return lines


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
    lines = log_appendix(run.manifest.extra) or _crash_log(as_dict(run.manifest.extra.get("repro")))
    if not run.hosts:
        return lines
    lines += ["## Appendix: hosts", ""]
    for host in run.hosts:
        lines += [f"### {host.name}", "", f"Status: {host.status}" + (f" — {host.reason}" if host.reason else ""), ""]
        if host.probes:
            lines += table([("probe", "status", "time", "note")] + [
                (name, p.status, f"{p.duration_s:.1f} s", p.reason or dig(p.error, "message") or "")
                for name, p in sorted(host.probes.items())])
        lines += host_sections(host)
        for section in (copy_section(host, charts), _repro_matrix(host, charts)):
            lines += section
    return lines


def _crash_log(repro: dict[str, Any]) -> list[str]:
    """`repro cuda-graph-crash --log FILE`: the file, every signature that matched with its numbered lines, and
    the advice; said plainly when nothing matched."""
    if not repro.get("log"):
        return []
    log = str(repro["log"])
    matches = [m for m in as_list(repro.get("matches")) if isinstance(m, dict)]
    lines = ["## Appendix: crash log", "", f"Log `{log}` classified on this machine: outcome "
             f"{repro.get('outcome') or '-'}, {len(matches)} signature(s) matched.", ""]
    if not matches:
        return lines + ["No known CUDA-graph crash signature matched.", ""]
    for m in matches:
        quoted = [q for q in as_list(m.get("lines")) if isinstance(q, dict)]
        lines += [f"### {m.get('name') or '-'} ({m.get('severity') or '-'})", "", str(m.get("meaning") or "-"), ""]
        if quoted:
            width = len(str(max((q.get("line") or 0) for q in quoted)))
            lines += fenced(log, quoted[0].get("line"), "\n".join(
                f"{str(q.get('line', '?')).rjust(width)}: {q.get('text', '')}" for q in quoted), "text")
        lines += [f"**Advice:** {m.get('recommendation') or '-'}" + (f" ({m['reference']})" if m.get("reference")
                                                                        else ""), ""]
    return lines


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
    methods, samples = methods_and_samples(t for h in run.hosts for t in timings(probe(h, "copy_bench")))
    measured = "; ".join(f"`{m}`: {METHOD_TEXT.get(m, m)}" for m in methods) or "none (not measured)"
    counts = f"{'/'.join(map(str, samples))} samples per timing" if samples else "no sample counts recorded"
    lines = ["## Methodology", "",
             "- Interpreters: sglang's source is read from the Python that serves it (the live server's, else "
             "the one given or the probes' own); torch facts come from the Python that ran the probes unless "
             "torch_caps ran in the serving one. When the two differ the report says so and does not judge that "
             "torch against sglang.",
             "- Environment: hostname, OS, Python and torch read on each host by the probing interpreter; GPUs, "
             "driver and topology from `nvidia-smi` (each command under a timeout).",
             "- Source facts: the installed sglang read as text and AST on the host (never imported); every fact "
             "names its file (relative to site-packages) and line.",
             "- Integrity: installed files hashed and compared with the wheel's RECORD (by default only the files "
             "the facts cite; `gpudiag scan --verify-all` hashes every file), or `git status` of an "
             "editable checkout.",
             "- Deployment: running sglang servers found from the process table; flags parsed from their "
             "command lines.",
             "- torch capabilities: `torch._foreach_copy_` looked up with hasattr, then run on each dtype pair "
             "and compared with a per-tensor `copy_`.",
             "- Copy timings: each strategy copies the same tensors a replay copies and is checked against saved "
             "copies of its sources; medians with p10/p90 over the stated samples, eager and inside a captured "
             f"graph (launch cost apart from copy cost). Methods recorded in this run: {measured}; {counts}.",
             "- CUDA-graph repro: each cell (path, batch size, draft tokens) captures and replays in its own "
             "child process, output compared with eager; failures matched against known signatures.",
             "- Outliers: each steady (not noisy) copy figure of a GPU is divided by its siblings' median on the "
             "same host; the GPU is flagged when the median of those ratios is more than 20% off (three GPUs or "
             "more).", ""]
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
