"""Findings from classified logs: a file given to `repro --log`, and each live server's own log classified on the
host during a scan (its crashes, joined with the host's source facts where the frames show a replay path; what it
says about DFlash's draft graph; a log that is not text)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpudiag.findings import crash_context
from gpudiag.models import SEVERITY_RANK, Evidence, Finding, HostResult
from gpudiag.probe_view import as_dict, as_list, dig, probe


def classified_log(manifest_extra: dict[str, Any]) -> list[Finding]:
    """What `gpudiag repro cuda-graph-crash --log FILE` found (a run of kind "log", with no hosts)."""
    block = as_dict(manifest_extra.get("log"))
    if not block.get("outcome"):
        return _legacy_classified_log(manifest_extra)
    source = str(block.get("source") or "log")
    crashes = [c for c in as_list(block.get("crashes")) if isinstance(c, dict)]
    if not crashes:
        ready = block.get("ready_line")
        return [
            Finding(
                id="cuda_graph.log_clean",
                severity="info",
                title=f"log {_name(source)}: no crash",
                hosts=(),
                evidence=(
                    Evidence(
                        kind="text",
                        file=source,
                        text=(
                            f"{block.get('lines', 0)} lines read, no crash; "
                            + (f"{block.get('cut_note')}; " if block.get("cut") == "time" else "")
                            + (
                                f"the server came up at line {ready}"
                                if ready
                                else "the log does not show the server coming up"
                            )
                        ),
                    ),
                ),
                recommendation="Nothing to do for this log.",
                sources=("run.json/log",),
            )
        ]
    return [log_crash_finding(crash, block, source, ()) for crash in crashes]


def _legacy_classified_log(manifest_extra: dict[str, Any]) -> list[Finding]:
    """Runs stored before log runs had their own kind: signatures matched in `repro.matches`."""
    repro = as_dict(manifest_extra.get("repro"))
    if not repro.get("log"):
        return []
    findings = []
    for match in (m for m in as_list(repro.get("matches")) if isinstance(m, dict)):
        quoted = [q for q in as_list(match.get("lines")) if isinstance(q, dict)]
        first = quoted[0].get("line") if quoted else None
        severity = str(match.get("severity") or "error")
        findings.append(
            Finding(
                id="cuda_graph.log_signature",
                severity=severity if severity in SEVERITY_RANK else "error",
                title=f"log {str(repro['log']).rsplit('/', 1)[-1]} matches the CUDA-graph failure {match.get('name')}",
                hosts=(),
                evidence=(
                    Evidence(
                        kind="text",
                        text=f"{match.get('meaning') or match.get('name')} — "
                        f"{len(quoted)} matching line(s) in {repro['log']} "
                        f"({match.get('reference') or 'no reference'})",
                        file=str(repro["log"]),
                        line=first if isinstance(first, int) else None,
                        # Several matched lines: each keeps its own number, as in the crash-log appendix.
                        snippet="\n".join(
                            f"{q.get('line')}: {q.get('text')}" if len(quoted) > 1 else str(q.get("text"))
                            for q in quoted[:5]
                        )
                        or None,
                    ),
                ),
                recommendation=str(match.get("recommendation") or "Compare with the referenced report."),
                sources=(f"run.json/repro/{match.get('name')}",),
            )
        )
    return findings


def _name(source: str) -> str:
    return source.rsplit("/", 1)[-1]


def log_crash_finding(
    crash: dict[str, Any], block: dict[str, Any], source: str, hosts: tuple[str, ...], label: str | None = None
) -> Finding:
    """One crash of a classified log (a file given to `repro --log`, or a live server's log read in a scan);
    `label` names the log in the title (the file's name when not given)."""
    severity, title, advice, step = _verdict(crash, label or _name(source))
    return Finding(
        id="cuda_graph.log_crash",
        severity=severity if severity in SEVERITY_RANK else "error",
        title=title,
        hosts=hosts,
        evidence=_crash_evidence(crash, block, source, hosts),
        recommendation=advice,
        sources=("run.json/log",) if not hosts else (source,),
        action=step,
    )


def _crash_evidence(
    crash: dict[str, Any], block: dict[str, Any], source: str, hosts: tuple[str, ...]
) -> tuple[Evidence, ...]:
    """The quoted lines with the crash's family, its last frames, and which release the advice assumes."""
    family, detail = str(crash.get("family") or "unclassified"), str(crash.get("detail") or "")
    quoted = [q for q in as_list(crash.get("quoted")) if isinstance(q, dict)]
    frames = [f for f in as_list(crash.get("last_frames")) if isinstance(f, dict)]
    evidence = [
        Evidence(
            kind="text",
            host=hosts[0] if len(hosts) == 1 else None,
            file=source,
            line=crash.get("line") if isinstance(crash.get("line"), int) else None,
            text=f"{crash.get('summary')} — family {family}{f' ({detail})' if detail else ''}, "
            f"{crash.get('when') or ''}",
            snippet="\n".join(f"{q.get('line')}: {q.get('text')}" for q in quoted) or None,
        )
    ]
    if frames:
        where = " <- ".join(f"{f.get('file')}:{f.get('line')} in {f.get('function')}" for f in reversed(frames))
        evidence.append(Evidence(kind="text", text=f"last frames: {where}"))
    basis = as_dict(block.get("release")).get("basis") or "no basis recorded"
    evidence.append(Evidence(kind="text", text=f"advice assumes {block.get('advice_assumes')}: {basis}"))
    return tuple(evidence)


def _verdict(crash: dict[str, Any], label: str) -> tuple[str, str, str, str]:
    """(severity, title, recommendation, action) from the crash's signature, or from its family."""
    signature = as_dict(crash.get("signature"))
    family, detail = str(crash.get("family") or "unclassified"), str(crash.get("detail") or "")
    if signature:
        return (
            str(signature.get("severity") or "error"),
            f"{label}: {signature.get('name')} ({family})",
            f"{signature.get('meaning')} {signature.get('recommendation')} ({signature.get('reference')})",
            str(signature.get("recommendation") or "Compare the crash with the referenced report"),
        )
    if family == "not_a_graph_problem":
        return (
            "error",
            f"{label}: crash that is not a CUDA-graph problem ({detail})",
            "Fix this first: CUDA graphs are not involved in this crash.",
            "Fix this crash first: CUDA graphs are not involved in it",
        )
    # Graph flags are worth a retry only where the log shows the crash in a capture or a replay.
    graphs = (
        "and check whether it recurs with the graph flags of the release the advice assumes."
        if detail in ("capture", "replay")
        else "the log shows no CUDA-graph capture or replay around it, so graph flags are not the first thing to try."
    )
    return (
        "error",
        f"{label}: unclassified crash at line {crash.get('line')} ({family})",
        f"No known signature matches; the family says where it broke. Report the quoted lines upstream, {graphs}",
        "Report the quoted crash lines upstream (no known signature matches)",
    )


def server_log_findings(hosts: list[HostResult]) -> list[Finding]:
    """Crashes in each live server's log (classified on the host during the scan), and what the log says
    about DFlash's draft CUDA graph."""
    findings = []
    for host in hosts:
        logs = as_dict(dig(probe(host, "deployment"), "server_logs"))
        for pid, block in sorted(logs.items()):
            block = as_dict(block)
            where = as_dict(block.get("source"))
            if not where:
                continue
            source = _server_log_label(pid, where, block)
            if block.get("outcome") == "unreadable":  # not text: nothing in it was read, so nothing reads clean
                findings.append(_unreadable_log(host, source, str(block.get("reason") or "not text")))
            server = crash_context.server_of(host, pid)
            for crash in (c for c in as_list(block.get("crashes")) if isinstance(c, dict)):
                finding = log_crash_finding(crash, block, source, (host.name,), "server log")
                context = crash_context.joined(host, crash, server)
                if context:  # the crash's path joined with this host's source facts and the server's flags
                    evidence, advice, action = context
                    finding = replace(
                        finding, evidence=finding.evidence + (evidence,), recommendation=advice, action=action
                    )
                else:  # the signature's advice, less what the live server already runs with
                    finding = replace(
                        finding,
                        recommendation=crash_context.fitted(finding.recommendation, server),
                        action=crash_context.fitted(finding.action, server),
                    )
                if str(crash.get("when") or "").startswith("before the server last came up"):
                    # The live server started again after this crash: history worth knowing, not its state.
                    finding = replace(finding, severity="warning", title=f"earlier run: {finding.title}")
                findings.append(finding)
            dflash = as_dict(block.get("dflash_draft_graph"))
            if dflash.get("state") == "disabled":
                findings.append(
                    Finding(
                        id="cuda_graph.server_log_dflash",
                        severity="info",
                        title=f"DFlash draft graph disabled at startup: {dflash.get('reason')}",
                        hosts=(host.name,),
                        evidence=(
                            Evidence(
                                kind="text",
                                host=host.name,
                                file=source,
                                line=dflash.get("line"),
                                text=f"DFlash draft graph disabled at startup: {dflash.get('text')}",
                            ),
                        ),
                        recommendation="The draft runs eager (slower drafting); the log line says which setting "
                        "caused it.",
                        sources=(source,),
                    )
                )
    return findings


def _server_log_label(pid: str, where: dict[str, Any], block: dict[str, Any]) -> str:
    """`server pid 4242 log (journalctl -u UNIT)`, with the file behind a descriptor and a read cut by time."""
    path = where.get("path")
    return (
        f"server pid {pid} log ({where.get('where') or where.get('kind')}"
        + (f" → {path}" if path and path != where.get("where") else "")
        + (f"; {block.get('cut_note')}" if block.get("cut") == "time" else "")  # only part of it was read
        + ")"
    )


def _unreadable_log(host: HostResult, source: str, reason: str) -> Finding:
    return Finding(
        id="cuda_graph.server_log_unreadable",
        severity="warning",
        title="a live server's log could not be read as text",
        hosts=(host.name,),
        evidence=(Evidence(kind="text", host=host.name, file=source, text=f"{source}: {reason}"),),
        recommendation="Its crashes, if any, were not classified: check where the server's output goes (a binary "
        "or corrupted file, a wrong path given with server_log:) and name the text log in the inventory.",
        sources=(source,),
        action="Point server_log: in the inventory at the server's text log",
    )
