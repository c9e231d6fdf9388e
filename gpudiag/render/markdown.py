"""The run as a markdown report: answers, verdict, fleet table, findings with evidence, methodology, next steps;
the per-host appendix (host_appendix) follows it or sits in a file of its own.

Pure and deterministic: the same run and findings give the same bytes (no clock, everything sorted).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from gpudiag.probe_view import as_dict, as_list, fmt_us
from gpudiag.findings import next_step, reproduce_command, step_order, with_run_options
from gpudiag.models import SEVERITIES, Evidence, Finding
from gpudiag.render.host_appendix import link_line, render_appendix
from gpudiag.render.crash_log import appendix as log_appendix
from gpudiag.render.blocks import fenced, merge_rows, table
from gpudiag.render.bench_block import markdown_section as bench_section
from gpudiag.render.answers_block import AnswerSet, answer_set, host_list, hosts_label, markdown_block
from gpudiag.render.fleet_table import fleet_section
from gpudiag.render.safe_text import clean, clean_run, code, md
from gpudiag.render.ssh_line import ssh_settings_line
from gpudiag.run_records import LoadedRun
from gpudiag.verdict import EXIT_MEANING, Verdict, verdict as compute_verdict

TOP_FINDINGS = 5


def render_markdown(
    run: LoadedRun,
    findings: Sequence[Finding],
    charts: Mapping[str, str] | None = None,
    verdict: Verdict | None = None,
    appendix_name: str | None = None,
) -> str:
    """The report; with `appendix_name` it links to the appendix in that file (written by the caller, see
    host_appendix.appendix_document_lines), without it the appendix follows the report in the same document."""
    charts = charts or {}
    run = clean_run(run)
    verdict = verdict or compute_verdict(run, findings)
    answers = answer_set(run)
    out: list[str] = []
    for section in (
        _title(run, appendix_name),
        markdown_block(answers),
        bench_section(run),
        _summary(findings, verdict, answers),
        _fleet(run, verdict),
        _findings(findings, run.manifest.argv),
        log_appendix(run.manifest.extra) or _crash_log(as_dict(run.manifest.extra.get("repro"))),
        _next_steps(findings, answers),
        render_appendix(run, charts) if appendix_name is None else [],
    ):
        out += section
    return "\n".join(out).rstrip("\n") + "\n"


def _title(run: LoadedRun, appendix_name: str | None) -> list[str]:
    m = run.manifest
    statuses = Counter(h.status for h in run.hosts)
    counts = md(", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
    date = (m.started_at or "unknown date")[:10]
    lines = [
        f"# gpudiag report — run {md(m.run_id)} ({md(date)})",
        "",
        f"- Run: {code(m.run_id)} ({md(m.kind)}), started {md(m.started_at or '-')}, finished "
        f"{md(m.finished_at or '-')}" + (" — **interrupted**" if m.interrupted else ""),
        f"- Hosts: {len(run.hosts)} ({counts or 'none'})",
        f"- gpudiag {md(m.gpudiag_version or '-')}" + (f": {code(' '.join(m.argv[1:]))}" if m.argv else ""),
    ]
    ssh_line = ssh_settings_line(m.extra)
    lines += [f"- {md(ssh_line)}"] if ssh_line else []
    return lines + ([link_line(appendix_name)] if run.hosts else []) + [""]


def _summary(findings: Sequence[Finding], verdict: Verdict, answers: AnswerSet) -> list[str]:
    counts = Counter(f.severity for f in findings)
    lines = [
        "## Verdict",
        "",
        f"- Exit code {int(verdict.exit_code)}: {EXIT_MEANING.get(int(verdict.exit_code), '-')} "
        f"(`--fail-on {verdict.fail_on}`).",
        f"- Coverage: {answers.coverage}.",
    ]
    incomplete: dict[str, list[str]] = {}  # hosts incomplete for the same reasons share one line
    for host in verdict.incomplete:
        incomplete.setdefault("; ".join(host.reasons), []).append(host.name)
    for reasons, names in incomplete.items():
        lines.append(f"- {md(hosts_label(names))} incomplete: {md(reasons, 1200)}")
    lines += ["", "Findings by severity: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in SEVERITIES) + ".", ""]
    if not findings:
        if answers.unchecked or verdict.incomplete:
            return lines + ["No findings among the checks that ran; not everything was checked (see Answers).", ""]
        return lines + ["No findings: every question was answered and nothing calls for action.", ""]
    top = [f for f in findings if f.severity in ("critical", "error")][:TOP_FINDINGS]
    for f in top:
        lines.append(f"- **{f.severity}** — {md(f.title)}" + (f" ({md(host_list(f.hosts))})" if f.hosts else ""))
    return lines + ([""] if top else [])


def _fleet(run: LoadedRun, verdict: Verdict) -> list[str]:
    """Hosts that agree are one row (render/fleet_table.py)."""
    return fleet_section(run, verdict)


def numbered(findings: Sequence[Finding]) -> list[tuple[int, Finding]]:
    """Findings in the order the report shows and numbers them: by severity, then as given."""
    order = [f for severity in SEVERITIES for f in findings if f.severity == severity]
    return list(enumerate(order, 1))


def _findings(findings: Sequence[Finding], argv: Sequence[str] = ()) -> list[str]:
    lines = ["## Findings", ""]
    if findings:
        lines += [
            "Worst first. Each finding names its rule and hosts, then the evidence (source lines, measured "
            "numbers, flags), what to do, and the command that gathers the evidence again.",
            "",
        ]
    severity = None
    for number, f in numbered(findings):
        if f.severity != severity:
            severity = f.severity
            lines += [f"### {severity.capitalize()} ({sum(1 for g in findings if g.severity == severity)})", ""]
        hosts = f" · {md(host_list(f.hosts))}" if f.hosts else ""
        lines += [f"#### {number}. {md(f.title, keep_code=True)}", "", f"Rule `{md(f.id)}`{hosts}. Evidence:", ""]
        for e in f.evidence:
            lines += _evidence(e)
        lines += ([""] if lines[-1] else []) + [
            f"**Recommendation:** {md(f.recommendation, 2000, keep_code=True)}  ",
            f"Reproduce: {code(with_run_options(reproduce_command(f), argv), 1000)}",
            "",
        ]
    if not findings:
        lines += ["None.", ""]
    return lines


def _evidence(e: Evidence) -> list[str]:
    where = f" — {code(f'{e.file}:{e.line}')}" if e.file and e.line else (f" — {code(e.file)}" if e.file else "")
    host = f"{md(e.host)}: " if e.host else ""
    snippet = clean(e.snippet or "", 4096, keep_newlines=True).strip()
    one_line = bool(snippet) and "\n" not in snippet and len(snippet) <= 160
    lines = [f"- {host}{md(e.text, 2000, keep_code=True)}{where}" + (f": {code(snippet)}" if one_line else "")]
    if snippet and not one_line:
        lines += [""] + fenced(e.file, e.line, snippet, "python" if e.kind == "source" else "text")
    if e.table:  # per-GPU rows that read the same are said once
        lines += [""] + table(merge_rows(e.table) if e.table[0] and e.table[0][0] == "GPU" else e.table)
    return lines


def _crash_log(repro: dict[str, Any]) -> list[str]:
    """`repro cuda-graph-crash --log FILE`: the file, every signature that matched with its numbered lines, and
    the advice; said plainly when nothing matched."""
    if not repro.get("log"):
        return []
    log = str(repro["log"])
    matches = [m for m in as_list(repro.get("matches")) if isinstance(m, dict)]
    lines = [
        "## Appendix: crash log",
        "",
        f"Log {code(log)} classified on this machine: outcome "
        f"{md(repro.get('outcome') or '-')}, {len(matches)} signature(s) matched.",
        "",
    ]
    if not matches:
        return lines + ["No known CUDA-graph crash signature matched.", ""]
    for m in matches:
        quoted = [q for q in as_list(m.get("lines")) if isinstance(q, dict)]
        lines += [
            f"### {md(m.get('name') or '-')} ({md(m.get('severity') or '-')})",
            "",
            md(m.get("meaning") or "-"),
            "",
        ]
        if quoted:
            width = len(str(max((q.get("line") or 0) for q in quoted)))
            lines += fenced(
                log,
                quoted[0].get("line"),
                "\n".join(f"{str(q.get('line', '?')).rjust(width)}: {q.get('text', '')}" for q in quoted),
                "text",
            )
        lines += [
            f"**Advice:** {md(m.get('recommendation') or '-')}"
            + (f" ({md(m['reference'])})" if m.get("reference") else ""),
            "",
        ]
    return lines


# Methodology lines, each shown only when its probe ran on some host.
def _next_steps(findings: Sequence[Finding], answers: AnswerSet) -> list[str]:
    """One line per action, each once, ranked by severity, then the saving it claims (µs per decode step, the
    finding's own number), then how many hosts it helps. Questions left unanswered stay in the coverage line."""
    lines = [
        "## Next steps",
        "",
        "One line per action, most urgent first (severity, then what it costs: a crash, a measured loss, other "
        "findings, drift between hosts; then the measured saving and the hosts it helps); the finding numbers "
        "point at the evidence.",
        "",
    ]
    number_of = {id(f): n for n, f in numbered(findings)}
    ranked = sorted((f for f in findings if f.severity != "info"), key=step_order)
    steps: dict[str, tuple[list[int], list[str], list[float]]] = {}
    for f in ranked:
        numbers, hosts, savings = steps.setdefault(next_step(f), ([], [], []))
        numbers.append(number_of[id(f)])
        hosts.extend(f.hosts)
        if f.saving_us_per_step is not None:
            savings.append(f.saving_us_per_step)
    out = []
    for action, (numbers, hosts, savings) in steps.items():
        said = [f"finding {', '.join(map(str, sorted(numbers)))}"]
        said.append(md(host_list(tuple(dict.fromkeys(hosts)))) if hosts else "fleet")
        if savings:
            said.append(f"saves {fmt_us(max(savings))} per decode step")
        out.append(f"{md(action, 600, keep_code=True)} ({' · '.join(said)})")
    if not out:
        out = [
            "Nothing to change among the checks that ran."
            + (" The questions not checked are listed under Answers." if answers.unchecked else "")
        ]
    return lines + [f"{i}. {step}" for i, step in enumerate(out, 1)] + [""]
