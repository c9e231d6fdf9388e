"""CUDA-graph findings: speculative decoding served without graphs and the failures of a repro matrix
(the DFlash draft-graph guards are in dflash.py, the crashes of classified logs in server_logs.py)."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.common import source
from gpudiag.probe_view import as_dict, as_list, cells, dig, number, probe
from gpudiag.findings.server_flags import (
    EAGLE_FAMILY,
    algorithm_of,
    graph_max_bs,
    graphs_disabled,
    max_bs_flag,
    server_args,
    servers_of,
)
from gpudiag.findings.server_scope import server_name
from gpudiag.models import SEVERITY_RANK, Evidence, Finding, HostResult

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
        action=boundary_action(host, failing),
        sources=(source(host, "cuda_graph"),),
    )


def _clear_options(host: HostResult, failing: list[dict[str, Any]]) -> tuple[str, list[str]] | None:
    """(what was measured, the flag values that keep clear of it) from the cells, in the installed release's
    spelling: the smallest failing batch size and draft-token count, the largest passing ones. None when the
    failing cells carry no sizes."""
    paths = {str(c.get("path")) for c in failing}
    sized = [c for c in failing if isinstance(c.get("batch_size"), int) and isinstance(c.get("draft_tokens"), int)]
    if not sized:
        return None
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
    options = []
    if safe_tokens is not None:
        options.append(
            f"keep --speculative-num-draft-tokens at {safe_tokens} or less (passed at every batch size measured)"
        )
    if safe_bs is not None:
        options.append(
            f"{'with more draft tokens, ' if options else ''}set {max_bs_flag(host)} {safe_bs} "
            "(the largest batch size that passed)"
        )
    measured = f"Measured: {', '.join(sorted(paths))} fails from batch size {fail_bs} with {fail_tokens} draft tokens"
    return measured, options


def boundary_advice(host: HostResult, failing: list[dict[str, Any]], signature: dict[str, Any]) -> str:
    """Concrete flag values from the measured cells that never contradict the measured boundary, and whether
    each live server sits inside the failing range."""
    paths = ", ".join(sorted({str(c.get("path")) for c in failing}))
    reference = f" (known report: {signature['reference']})" if signature.get("reference") else ""
    found = _clear_options(host, failing)
    if found is None:
        return (
            f"Keep CUDA graphs below the measured boundary ({max_bs_flag(host)}) or disable them for "
            f"{paths}, and report the repro cell upstream{reference}."
        )
    measured, options = found
    advice = "; ".join(options) if options else f"disable graphs for {paths}"
    live = [e.text.split(": ", 1)[-1] for e in _live_servers_against(host, failing)]
    serving = ""
    if live and all("outside" in text for text in live):
        serving = " The live server is outside that range: no change is needed while its flags stay."
    elif live:
        serving = " The live server is inside that range: change it now."
    return f"{measured}. To stay clear: {advice}.{serving}{reference}"


def boundary_action(host: HostResult, failing: list[dict[str, Any]]) -> str:
    """Next steps' line for a repro failure: the flag values that keep clear of it."""
    paths = ", ".join(sorted({str(c.get("path")) for c in failing}))
    found = _clear_options(host, failing)
    if found is None or not found[1]:
        return f"Keep CUDA graphs off for {paths} until the failing cell is fixed upstream"
    # Not named by path: failures that call for the same flag values share one step.
    return f"Keep CUDA graphs clear of the repro's failing range: {'; '.join(found[1])}"
