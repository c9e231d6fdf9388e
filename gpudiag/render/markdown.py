"""The run as a markdown report: answers, verdict, fleet table, findings with evidence, methodology, next steps;
the per-host appendix (host_appendix) follows it or sits in a file of its own.

Pure and deterministic: the same run and findings give the same bytes (no clock, everything sorted).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Mapping, Sequence

from gpudiag.probe_view import as_dict, as_list, probe
from gpudiag.findings import SEVERITY_RANK, host_facts, reproduce_command
from gpudiag.models import SEVERITIES, Evidence, Finding
from gpudiag.render.host_appendix import link_line, render_appendix
from gpudiag.repro.logrun import appendix as log_appendix
from gpudiag.render.blocks import fenced, merge_rows, table
from gpudiag.render.bench_block import markdown_section as bench_section
from gpudiag.render.answers_block import AnswerSet, answer_set, host_list, markdown_block
from gpudiag.render.copy_timings import METHOD_TEXT, methods_and_samples, timings
from gpudiag.render.safe_text import clean, clean_run, code, md
from gpudiag.models import LoadedRun
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
    host_appendix.appendix_document), without it the appendix follows the report in the same document."""
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
        _findings(findings),
        log_appendix(run.manifest.extra) or _crash_log(as_dict(run.manifest.extra.get("repro"))),
        _methodology(run),
        _next_steps(findings, answers, run.manifest.argv),
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
    for host in verdict.incomplete:
        lines.append(f"- {md(host.name)} incomplete: {md('; '.join(host.reasons), 1200)}")
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
    shown = {h.name: h.status for h in verdict.hosts}
    rows: list[tuple[Any, ...]] = [
        ("host", "status", "GPUs", "driver", "torch", "sglang", "speculative", "CUDA graphs (decode)")
    ]
    pythons: list[tuple[Any, ...]] = [("host", "sglang read from (chosen by)", "torch read in")]
    for h in run.hosts:
        try:
            f = host_facts(h)
        except Exception as exc:  # noqa: BLE001 - one host's odd data never breaks the fleet's report
            rows.append(
                (h.name, shown.get(h.name, h.status), f"data could not be read ({type(exc).__name__})") + ("-",) * 5
            )
            continue
        torch = f"{f.torch} (another Python than sglang's)" if f.torch_elsewhere else f.torch
        rows.append(
            (f.name, shown.get(h.name, f.status), f.gpus, f.driver, torch, f.sglang, f.speculative, f.cuda_graphs)
        )
        if (f.sglang_interpreter, f.torch_interpreter) != ("-", "-"):
            same = f.torch_interpreter.split(" (")[0] == f.sglang_interpreter.split(" (")[0]
            pythons.append((f.name, f.sglang_interpreter, "the same Python" if same else f.torch_interpreter))
    if not run.hosts:
        return ["## Fleet", "", "No hosts: this run read a file on this machine and contacted none.", ""]
    lines = ["## Fleet", ""] + table(rows)
    if len(pythons) > 1 and all(row[2] == "the same Python" for row in pythons[1:]):
        lines += [
            "Interpreters: torch and sglang were read in the same Python on every host: "
            + "; ".join(f"{md(row[0])} {md(row[1])}" for row in pythons[1:])
            + ".",
            "",
        ]
    elif len(pythons) > 1:
        lines += [
            "Interpreters: the Python whose sglang the source facts describe, and the one torch's facts "
            "(env, torch_caps) were read in.",
            "",
        ] + table(pythons)
    return lines


def numbered(findings: Sequence[Finding]) -> list[tuple[int, Finding]]:
    """Findings in the order the report shows and numbers them: by severity, then as given."""
    order = [f for severity in SEVERITIES for f in findings if f.severity == severity]
    return list(enumerate(order, 1))


def _findings(findings: Sequence[Finding]) -> list[str]:
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
            f"Reproduce: {code(reproduce_command(f), 1000)}",
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
METHOD_LINES = (
    (
        "env",
        "Environment: hostname, OS and Python read on each host by the probing interpreter, torch's build in a "
        "child of the serving interpreter; GPUs, driver and topology from `nvidia-smi` (each command under a "
        "timeout).",
    ),
    (
        "sglang_source",
        "Source facts: the installed sglang read as text and AST on the host (never imported); "
        "every fact names its file (relative to site-packages) and line. Integrity: files hashed "
        "against the wheel's RECORD (the cited files; `--verify-all` hashes all), or `git status` "
        "of a checkout.",
    ),
    (
        "deployment",
        "Deployment: running sglang servers found from the process table; flags parsed from their command lines.",
    ),
    (
        "torch_caps",
        "torch capabilities: `torch._foreach_copy_` looked up, then run on each dtype pair and "
        "compared with a per-tensor `copy_`, in the serving interpreter when one is known.",
    ),
    (
        "cuda_graph",
        "CUDA-graph repro: each cell (path, batch size, draft tokens) captures and replays in its own "
        "child process, output compared with eager; failures matched against known signatures.",
    ),
)


def _methodology(run: LoadedRun) -> list[str]:
    ran = {name for h in run.hosts for name, p in h.probes.items() if p.status == "ok"}
    lines = [f"- {text}" for probe_name, text in METHOD_LINES if probe_name in ran]
    if "copy_bench" in ran:
        methods, samples = methods_and_samples(t for h in run.hosts for t in timings(probe(h, "copy_bench")))
        measured = "; ".join(f"`{md(m)}`: {METHOD_TEXT.get(m, md(m))}" for m in methods) or "none recorded"
        counts = f"{'/'.join(map(str, samples))} samples per timing" if samples else "no sample counts recorded"
        lines.append(
            "- Copy timings: each strategy copies the tensors a replay copies, checked against saved "
            "copies of its sources; medians with p10/p90, eager and inside a captured graph. Per decode "
            f"step: one replay per path. Methods: {measured}; {counts}. A GPU is an outlier when the "
            "median of its figures over its siblings' is more than 20% off (three GPUs or more)."
        )
    if not lines:
        return []
    return ["## Methodology", ""] + lines + [""]


def _next_steps(findings: Sequence[Finding], answers: AnswerSet, argv: Sequence[str] = ()) -> list[str]:
    """Each action once, ranked: severity, then the measured saving it names (µs per decode step), then how many
    hosts it helps; then what would answer the questions left unchecked."""
    lines = [
        "## Next steps",
        "",
        "Each action once, most urgent first (severity, then the saving it measured, then "
        "the hosts it helps); the finding numbers point at the evidence.",
        "",
    ]
    number_of = {id(f): n for n, f in numbered(findings)}
    ranked = sorted(findings, key=lambda f: (SEVERITY_RANK.get(f.severity, 9), -_saving_us(f), -len(f.hosts)))
    seen: dict[str, tuple[list[int], list[str]]] = {}
    for f in ranked:
        if f.severity != "info":
            numbers, hosts = seen.setdefault(f.recommendation, ([], []))
            numbers.append(number_of[id(f)])
            hosts.extend(f.hosts)
    steps = [
        f"{md(step, 2000, keep_code=True)} (finding {', '.join(map(str, sorted(numbers)))} · "
        f"{md(host_list(tuple(dict.fromkeys(hosts))) if hosts else 'fleet')})"
        for step, (numbers, hosts) in zip(_said_once(list(seen)), seen.values())
    ]
    gaps: dict[tuple[str, str, str], list[str]] = {}
    for name, per_host in answers.per_host.items():
        for a in per_host:
            if a.status != "answered":
                reason = a.text[a.text.index("not checked — ") :] if "not checked — " in a.text else a.text
                # A command this run already ran would not answer it: then the reason alone is the step.
                flags = [w for w in a.command.split() if w.startswith("--")]
                rerun = a.command if a.command and not all(f in argv for f in flags) else ""
                gaps.setdefault((a.qid, reason, rerun), []).append(name)
    for (qid, reason, rerun), hosts in list(gaps.items())[:8]:
        command = f": {code(rerun.replace('HOST', ' '.join(hosts[:10])))}" if rerun else ""
        steps.append(f"{qid} {md(reason, 400)} ({md(host_list(hosts))}){command}")
    if not steps:
        steps = ["Nothing urgent. Rerun `gpudiag scan --deep` after any sglang, torch or driver change."]
    return lines + [f"{i}. {step}" for i, step in enumerate(steps, 1)] + [""]


_SENTENCE_END = re.compile(r"(?<=[.)])\s+(?=[A-Z(])")


def _said_once(advice: list[str]) -> list[str]:
    """Advice with the sentences an earlier step already gave replaced by "Otherwise as step N.": two findings
    that call for the same action (say, the same safe flag values) do not spell it out twice."""
    first_step: dict[str, int] = {}
    out = []
    for number, text in enumerate(advice, 1):
        sentences = _SENTENCE_END.split(text)
        repeated = sorted({first_step[s] for s in sentences if s in first_step})
        for sentence in sentences:
            first_step.setdefault(sentence, number)
        new = [s for s in sentences if first_step[s] == number]
        if repeated and new:
            steps = ", ".join(map(str, repeated))
            text = " ".join(new) + f" Otherwise as step{'s' if len(repeated) > 1 else ''} {steps}."
        out.append(text)
    return out


def _saving_us(finding: Finding) -> float:
    """The largest µs figure a finding's recommendation names (its measured impact), 0 when none."""
    found = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?) µs", finding.recommendation)]
    return max(found, default=0.0)
