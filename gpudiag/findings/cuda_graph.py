"""CUDA-graph findings: speculative decoding served without graphs and the failures of a repro matrix
(the DFlash draft-graph guards are in dflash.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpudiag.findings.common import SEVERITY_RANK, source
from gpudiag.probe_view import as_dict, as_list, cells, dig, number, probe
from gpudiag.findings.dflash import first_guard_holding
from gpudiag.findings.facts import (
    EAGLE_FAMILY,
    algorithm_of,
    command_line,
    decode_graph_switch,
    graph_max_bs,
    graphs_disabled,
    max_bs_flag,
    server_args,
    servers_of,
)
from gpudiag.findings.server_scope import server_name
from gpudiag.models import Evidence, Finding, HostResult

NOT_FAILURES = ("ok", "skipped")
WRONG_RESULTS = ("mismatch", "silent_failure")  # runs but gives wrong answers: worse than a crash
HARNESS_ERROR = "error"  # the cell could not be run: not a graph failure


def failed(cell: dict[str, Any]) -> bool:
    return cell.get("status") not in NOT_FAILURES


def _algorithm(server: dict[str, Any]) -> str:
    return algorithm_of(server)


def _serves(cell: dict[str, Any], algorithm: str) -> bool:
    """Whether a repro cell exercised what a server with this algorithm replays."""
    family = EAGLE_FAMILY if algorithm in EAGLE_FAMILY else (algorithm,)
    tag = str(cell.get("algorithm") or "").upper()
    path = str(cell.get("path") or "").upper()
    return tag in family or any(path == a or path.startswith(a + "_") for a in family)


def ok_boundary(host: HostResult, algorithm: str) -> tuple[str, int] | None:
    """(paths, largest batch size below every failure) among this algorithm's repro cells, or None."""
    relevant = [c for c in cells(host) if _serves(c, algorithm) and isinstance(c.get("batch_size"), int)]
    failing = [c["batch_size"] for c in relevant if failed(c)]
    limit = min(failing) if failing else None
    clean = [
        c["batch_size"] for c in relevant if c.get("status") == "ok" and (limit is None or c["batch_size"] < limit)
    ]
    if not clean:
        return None
    paths = "/".join(sorted({str(c.get("path")) for c in relevant}))
    return paths, max(clean)


def spec_without_graphs(hosts: list[HostResult]) -> list[Finding]:
    """Rule 5: a deployment serving speculative decoding with decode CUDA graphs disabled."""
    findings = []
    for host in hosts:
        for server in servers_of(host):
            args, algorithm = server_args(server), _algorithm(server)
            disabled, switch = decode_graph_switch(args)
            if not algorithm or algorithm == "NONE" or not disabled:
                continue
            evidence = [
                Evidence(
                    kind="flag",
                    host=host.name,
                    text=f"{server_name(host, server)}: --speculative-algorithm {algorithm} with {switch}",
                    snippet=command_line(server) or None,
                )
            ]
            max_bs = max_bs_flag(host)
            boundary = ok_boundary(host, algorithm)
            if boundary:
                advice = (
                    f"Re-enable graphs within the range the repro proved safe on this host: {_undo(switch)} "
                    f"and set {max_bs} {boundary[1]} ({boundary[0]} captured and replayed cleanly up to "
                    f"batch size {boundary[1]})."
                )
                evidence.append(
                    Evidence(
                        kind="measurement",
                        host=host.name,
                        text=f"repro: {boundary[0]} ok up to batch size {boundary[1]}",
                    )
                )
            else:
                advice = (
                    f"Run `gpudiag repro cuda-graph-crash` on these hosts to find the batch sizes that capture "
                    f"and replay cleanly, then {_undo(switch)} and set {max_bs} at that boundary."
                )
            findings.append(
                Finding(
                    id="cuda_graph.spec_without_graphs",
                    severity="warning",
                    title=f"{algorithm} speculative decoding is served with CUDA graphs disabled",
                    hosts=(host.name,),
                    evidence=tuple(evidence),
                    recommendation=f"Without graphs, {_passes(algorithm, args.get('speculative_num_steps'))} launches its "
                    f"kernels one by one from the CPU (microseconds per launch) instead of replaying a "
                    f"captured graph. {advice}{_guard_after(host, server, algorithm)}",
                    sources=(source(host, "deployment"),)
                    + ((source(host, "cuda_graph"),) if boundary else ())
                    + (
                        (source(host, "sglang_source"),)
                        if algorithm == "DFLASH" and first_guard_holding(host, server)
                        else ()
                    ),
                )
            )
    return findings


def _undo(switch: str) -> str:
    if switch.startswith("--cuda-graph-config"):
        return "set the decode backend in --cuda-graph-config to full (or drop its decode backend)"
    if switch.startswith("--cuda-graph-backend-decode"):
        return "set --cuda-graph-backend-decode full (or drop it)"
    return f"drop {switch}"


def _passes(algorithm: str, steps: Any) -> str:
    """The forward passes of one decode step. EAGLE: the draft loop runs num_steps - 1 draft forwards (its last
    step only selects top-k), then the target verifies and the draft extends over the accepted tokens."""
    steps = (
        steps
        if isinstance(steps, int) and not isinstance(steps, bool)
        else int(steps)
        if str(steps or "").isdigit()
        else None
    )
    if algorithm in EAGLE_FAMILY and steps == 1:
        return "each of the 2 forward passes of a decode step (the target's verify and the draft-extend)"
    if algorithm in EAGLE_FAMILY and steps:
        return (
            f"each of the {steps + 1} forward passes of a decode step ({steps - 1} draft "
            f"step{'' if steps - 1 == 1 else 's'}, the target's verify and the draft-extend)"
        )
    if algorithm in EAGLE_FAMILY:
        return "every forward pass of a decode step (the draft steps, the target's verify and the draft-extend)"
    return "every draft and target-verify forward pass of a decode step"


def _guard_after(host: HostResult, server: dict[str, Any], algorithm: str) -> str:
    """For DFlash: the draft-graph guard that would still hold once decode graphs are back on."""
    if algorithm != "DFLASH":
        return ""
    found = first_guard_holding(host, server)
    if not found:
        return ""
    guard, (_, why, lift) = found
    return (
        f" Even then this release keeps the DFlash draft eager ({guard.get('file') or 'worker'}:"
        f"{guard.get('line', '?')}) because {why}: {lift}."
    )


def repro_failures(hosts: list[HostResult]) -> list[Finding]:
    """Rule 6: CUDA-graph repro cells that failed, grouped by matched signature (or status)."""
    findings = []
    for host in hosts:
        groups: dict[str, list[dict[str, Any]]] = {}
        for cell in cells(host):
            if failed(cell):
                key = str(dig(cell, "signature", "name") or cell.get("status"))
                groups.setdefault(key, []).append(cell)
        for key, group in sorted(groups.items()):
            findings.append(_repro_finding(host, key, group))
    return findings


def _live_servers_against(host: HostResult, failing: list[dict[str, Any]]) -> list[Evidence]:
    """Whether each live server with graphs on runs inside the failing range (batch size and draft tokens)."""
    out = []
    for server in servers_of(host):
        args, algorithm = server_args(server), _algorithm(server)
        max_bs, tokens = graph_max_bs(args), number(args.get("speculative_num_draft_tokens"))
        if tokens is None and str(args.get("speculative_num_draft_tokens") or "").isdigit():
            tokens = float(args["speculative_num_draft_tokens"])
        relevant = [c for c in failing if _serves(c, algorithm)]
        if not relevant or graphs_disabled(args) or max_bs is None or tokens is None:
            continue
        inside = [
            c
            for c in relevant
            if isinstance(c.get("batch_size"), int)
            and c["batch_size"] <= max_bs[0]
            and isinstance(c.get("draft_tokens"), int)
            and c["draft_tokens"] <= tokens
        ]
        verdict = (
            "inside the failing range: it can hit this failure" if inside else "outside the failing range measured here"
        )
        out.append(
            Evidence(
                kind="flag",
                host=host.name,
                text=f"live {server_name(host, server)} ({algorithm}) captures graphs up to "
                f"{max_bs[1]} {max_bs[0]} with {tokens:g} draft tokens: {verdict}",
            )
        )
    return out


def _boundary_texts(data: dict[str, Any], paths: list[str]) -> list[str]:
    entries = [b for b in as_list(data.get("boundaries")) if isinstance(b, dict) and b.get("text")]
    texts = [str(b["text"]) for b in entries if str(b.get("label")) in paths]
    if not texts and dig(data, "boundary", "text"):
        texts = [str(dig(data, "boundary", "text"))]
    return texts


def _severity(statuses: list[str], signature: dict[str, Any]) -> str:
    """From the cells' statuses, raised to the matched signature's own severity when that is worse."""
    severity = (
        "critical"
        if any(s in WRONG_RESULTS for s in statuses)
        else "warning"
        if statuses == [HARNESS_ERROR]
        else "error"
    )
    named = str(signature.get("severity") or "")
    return min((severity, named), key=lambda s: SEVERITY_RANK.get(s, 9))


def _repro_finding(host: HostResult, key: str, failing: list[dict[str, Any]]) -> Finding:
    data = probe(host, "cuda_graph") or {}
    gpu = as_dict(data.get("gpu"))
    signature = as_dict(failing[0].get("signature"))
    rows = (("path", "batch size", "draft tokens", "status", "detail"),) + tuple(
        (
            str(c.get("path")),
            str(c.get("batch_size", "-")),
            str(c.get("draft_tokens", "-")),
            str(c.get("status")),
            " ".join(str(c.get("detail") or "").split())[:160],
        )
        for c in failing
    )
    evidence = [
        Evidence(
            kind="measurement",
            host=host.name,
            table=rows,
            text=f"{len(failing)} failing cell(s) on GPU {gpu.get('index', '?')} {gpu.get('name', '?')} "
            f"({gpu.get('compute_capability', '?')}), {data.get('mode', '?')} mode, each cell in "
            "its own child process",
        )
    ]
    paths = sorted({str(c.get("path")) for c in failing})
    for text in _boundary_texts(data, paths):
        evidence.append(Evidence(kind="measurement", host=host.name, text=f"boundary: {text}"))
    if signature:
        quoted = "\n".join(str(dig(line, "text") or line) for line in as_list(signature.get("lines"))[:5])
        evidence.append(
            Evidence(
                kind="text",
                host=host.name,
                snippet=quoted or None,
                text=f"matches {signature.get('name')}: {signature.get('meaning') or ''} "
                f"({signature.get('reference') or 'no reference'})",
            )
        )
    evidence += _live_servers_against(host, failing)
    statuses = sorted({str(c.get("status")) for c in failing})
    return Finding(
        id="cuda_graph.repro_failure",
        severity=_severity(statuses, signature),
        title=f"CUDA-graph {'/'.join(statuses)} on {', '.join(paths)}"
        + (f" ({signature.get('name')})" if signature else ""),
        hosts=(host.name,),
        evidence=tuple(evidence),
        recommendation=boundary_advice(host, failing, signature),
        sources=(source(host, "cuda_graph"),),
    )


def boundary_advice(host: HostResult, failing: list[dict[str, Any]], signature: dict[str, Any]) -> str:
    """Concrete flag values from the measured cells, in the installed release's spelling, that never contradict
    the measured boundary: the smallest failing batch size and draft-token count, the largest passing ones,
    and whether each live server sits inside the failing range."""
    paths = {str(c.get("path")) for c in failing}
    sized = [c for c in failing if isinstance(c.get("batch_size"), int) and isinstance(c.get("draft_tokens"), int)]
    reference = f" (known report: {signature['reference']})" if signature.get("reference") else ""
    if not sized:
        return (
            f"Keep CUDA graphs below the measured boundary ({max_bs_flag(host)}) or disable them for "
            f"{', '.join(sorted(paths))}, and report the repro cell upstream{reference}."
        )
    fail_bs = min(c["batch_size"] for c in sized)
    fail_tokens = min(c["draft_tokens"] for c in sized)
    passing = [
        c
        for c in cells(host)
        if str(c.get("path")) in paths
        and c.get("status") == "ok"
        and isinstance(c.get("batch_size"), int)
        and isinstance(c.get("draft_tokens"), int)
    ]
    safe_bs = max((c["batch_size"] for c in passing if c["batch_size"] < fail_bs), default=None)
    safe_tokens = max(
        (c["draft_tokens"] for c in passing if c["batch_size"] >= fail_bs and c["draft_tokens"] < fail_tokens),
        default=None,
    )
    flag = max_bs_flag(host)
    options = []
    if safe_tokens is not None:
        options.append(
            f"keep --speculative-num-draft-tokens at {safe_tokens} or less (passed at every batch size measured)"
        )
    if safe_bs is not None:
        options.append(
            f"{'with more draft tokens, ' if options else ''}set {flag} {safe_bs} (the largest batch size that passed)"
        )
    measured = f"Measured: {', '.join(sorted(paths))} fails from batch size {fail_bs} with {fail_tokens} draft tokens"
    advice = "; ".join(options) if options else f"disable graphs for {', '.join(sorted(paths))}"
    live = [e.text.split(": ", 1)[-1] for e in _live_servers_against(host, failing)]
    serving = ""
    if live and all("outside" in text for text in live):
        serving = " The live server is outside that range: no change is needed while its flags stay."
    elif live:
        serving = " The live server is inside that range: change it now."
    return f"{measured}. To stay clear: {advice}.{serving}{reference}"


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


def log_crash_finding(crash: dict[str, Any], block: dict[str, Any], source: str, hosts: tuple[str, ...]) -> Finding:
    """One crash of a classified log (a file given to `repro --log`, or a live server's log read in a scan)."""
    signature = as_dict(crash.get("signature"))
    family, detail = str(crash.get("family") or "unclassified"), str(crash.get("detail") or "")
    quoted = [q for q in as_list(crash.get("quoted")) if isinstance(q, dict)]
    frames = [f for f in as_list(crash.get("last_frames")) if isinstance(f, dict)]
    release = as_dict(block.get("release"))
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
        evidence.append(
            Evidence(
                kind="text",
                text="last frames: "
                + " <- ".join(f"{f.get('file')}:{f.get('line')} in {f.get('function')}" for f in reversed(frames)),
            )
        )
    evidence.append(
        Evidence(
            kind="text",
            text=f"advice assumes {block.get('advice_assumes')}: {release.get('basis') or 'no basis recorded'}",
        )
    )
    if signature:
        severity = str(signature.get("severity") or "error")
        title = f"{_name(source)}: {signature.get('name')} ({family})"
        advice = f"{signature.get('meaning')} {signature.get('recommendation')} ({signature.get('reference')})"
    elif family == "not_a_graph_problem":
        severity, title = "error", f"{_name(source)}: crash that is not a CUDA-graph problem ({detail})"
        advice = "Fix this first: CUDA graphs are not involved in this crash."
    else:
        severity, title = "error", f"{_name(source)}: unclassified crash at line {crash.get('line')} ({family})"
        advice = (
            "No known signature matches; the family says where it broke. Report the quoted lines upstream, "
            "and check whether it recurs with the graph flags of the release the advice assumes."
        )
    return Finding(
        id="cuda_graph.log_crash",
        severity=severity if severity in SEVERITY_RANK else "error",
        title=title,
        hosts=hosts,
        evidence=tuple(evidence),
        recommendation=advice,
        sources=("run.json/log",) if not hosts else (source,),
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
            source = (
                f"server pid {pid} log ({where.get('where') or where.get('kind')}"
                + (f" → {where['path']}" if where.get("path") and where.get("path") != where.get("where") else "")
                + ")"
            )
            for crash in (c for c in as_list(block.get("crashes")) if isinstance(c, dict)):
                finding = log_crash_finding(crash, block, source, (host.name,))
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
