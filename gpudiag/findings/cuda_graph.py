"""CUDA-graph findings: the DFlash draft graph switched off by a guard, speculative decoding served without
graphs, and the failures of a repro matrix."""
from __future__ import annotations

import re
from typing import Any

from gpudiag.findings.common import SEVERITY_RANK, as_dict, as_list, dig, number, probe, source, source_evidence, truthy_flag
from gpudiag.findings.facts import command_line, graphs_disabled, server_args, servers_of
from gpudiag.models import Evidence, Finding, HostResult

NOT_FAILURES = ("ok", "skipped")
WRONG_RESULTS = ("mismatch", "silent_failure")      # runs but gives wrong answers: worse than a crash
HARNESS_ERROR = "error"                              # the cell could not be run: not a graph failure
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN")


def failed(cell: dict[str, Any]) -> bool:
    return cell.get("status") not in NOT_FAILURES


def _algorithm(server: dict[str, Any]) -> str:
    return str(server_args(server).get("speculative_algorithm") or "").upper()


def _guard_holds(guard: dict[str, Any], args: dict[str, Any], env: dict[str, Any]) -> tuple[str, str] | None:
    """(why the guard holds on this host, what lifts it), or None when it does not hold or cannot be told."""
    # The probe gives the condition of the branch that logs, the enclosing conditions, and the message.
    condition = " and ".join([str(guard.get("condition") or "")] + [str(c) for c in as_list(guard.get("conditions"))])
    message = str(guard.get("message") or "")
    words = f"{condition} {message}".lower().replace(" ", "_")
    if ("dp_attention" in words or "target_dp_enabled" in words) and truthy_flag(args.get("enable_dp_attention")
                                                                                  or False):
        return ("the server runs with --enable-dp-attention",
                "serve DFlash without --enable-dp-attention to keep its draft graph")
    if re.search(r"is_out_of_tree|is_hip|is_npu|is_xpu", condition) and not re.search(r"not\s+\w*\.?is_", condition):
        torch = as_dict(env.get("torch"))
        if torch.get("available") and torch.get("version") and not torch.get("cuda"):
            return (f"torch {torch['version']} on this host is not a CUDA build",
                    "run DFlash on a CUDA build of torch to get its draft graph")
        return None
    threshold = _memory_threshold_mib(condition, message)
    if threshold is not None:
        free = _min_free_mib(env)
        if free is not None and free < threshold:
            return (f"the least free GPU memory now is {free:.0f} MiB, under the guard's {threshold:.0f} MiB",
                    "leave more memory free after the target model loads (lower --mem-fraction-static)")
        return None
    for name in sorted(set(re.findall(r"server_args\.(\w+)", condition))):
        negated = re.search(rf"not\s+[\w.]*server_args\.{name}\b", condition) is not None
        if name in args and truthy_flag(args[name] or False) != negated:
            flag = f"--{name.replace('_', '-')}"
            return f"the server runs with {flag}={args[name]}", f"change {flag} for this deployment"
    return None


def _memory_threshold_mib(condition: str, message: str) -> float | None:
    """The free-memory threshold of a guard like `available_mem < 1.0` (unit from the code or its message)."""
    match = re.search(r"\w*mem\w*\s*<=?\s*(\d+(?:\.\d+)?)\s*(\*\s*1024)?\s*(gb|gib|mb|mib)?", condition, re.I)
    if not match:
        return None
    value = float(match.group(1))
    unit = (match.group(3) or "").lower() or ("gb" if re.search(r"\bGi?B\b", message) else
                                               "mb" if re.search(r"\bMi?B\b", message) else "")
    if match.group(2) or unit in ("gb", "gib"):
        return value * 1024
    return value if unit in ("mb", "mib") else None


def _min_free_mib(env: dict[str, Any]) -> float | None:
    free = []
    for device in as_list(dig(env, "gpus", "devices")):
        total, used = number(dig(device, "memory_total_mib")), number(dig(device, "memory_used_mib"))
        if total is not None and used is not None:
            free.append(total - used)
    return min(free) if free else None


def dflash_draft_graph_disabled(hosts: list[HostResult]) -> list[Finding]:
    """Rule 4: a DFlash deployment whose draft CUDA graph a source guard switches off on this host."""
    findings = []
    for host in hosts:
        guards = [g for g in as_list(dig(probe(host, "sglang_source"), "dflash", "draft_graph_guards"))
                  if isinstance(g, dict)]
        servers = [s for s in servers_of(host) if _algorithm(s) == "DFLASH"]
        if not guards or not servers:
            continue
        evidence, advice, env = [], [], probe(host, "env") or {}
        for guard in guards:
            for server in servers:
                holds = _guard_holds(guard, server_args(server), env)
                if holds:
                    message = str(guard.get("message") or "Disable DFLASH draft cuda graph").rstrip(". ")
                    evidence.append(source_evidence(host, guard, f"'{message}' — holds because {holds[0]} "
                                                                 f"(server pid {server.get('pid', '?')})"))
                    advice.append(holds[1])
                    break
        if evidence:
            findings.append(Finding(
                id="cuda_graph.dflash_draft_graph_disabled", severity="warning",
                title="the DFlash draft CUDA graph is switched off by a guard that holds on this host",
                hosts=(host.name,), evidence=tuple(evidence),
                recommendation=f"The draft then runs eagerly on every step. To lift it: "
                               f"{'; '.join(dict.fromkeys(advice))}; then check that the server log no longer "
                               "says 'Disable DFLASH draft cuda graph'.",
                sources=(source(host, "sglang_source"), source(host, "deployment"))))
    return findings


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
    clean = [c["batch_size"] for c in relevant
             if c.get("status") == "ok" and (limit is None or c["batch_size"] < limit)]
    if not clean:
        return None
    paths = "/".join(sorted({str(c.get("path")) for c in relevant}))
    return paths, max(clean)


def spec_without_graphs(hosts: list[HostResult]) -> list[Finding]:
    """Rule 5: a deployment serving speculative decoding with CUDA graphs disabled."""
    findings = []
    for host in hosts:
        for server in servers_of(host):
            args, algorithm = server_args(server), _algorithm(server)
            if not algorithm or algorithm == "NONE" or not graphs_disabled(args):
                continue
            steps = args.get("speculative_num_steps")
            evidence = [Evidence(kind="flag", host=host.name,
                                 text=f"server pid {server.get('pid', '?')}: --speculative-algorithm {algorithm} "
                                      f"with --disable-cuda-graph", snippet=command_line(server) or None)]
            boundary = ok_boundary(host, algorithm)
            if boundary:
                advice = (f"Re-enable graphs within the range the repro proved safe on this host: drop "
                          f"--disable-cuda-graph and set --cuda-graph-max-bs {boundary[1]} ({boundary[0]} captured "
                          f"and replayed cleanly up to batch size {boundary[1]}).")
                evidence.append(Evidence(kind="measurement", host=host.name,
                                         text=f"repro: {boundary[0]} ok up to batch size {boundary[1]}"))
            else:
                advice = (f"Run `gpudiag repro cuda-graph-crash {host.name}` to find the batch sizes that capture "
                          "and replay cleanly, then drop --disable-cuda-graph with --cuda-graph-max-bs at that "
                          "boundary.")
            passes = (f"each of the {int(steps) + 1} forward passes of a decode step" if isinstance(steps, int)
                      else "every draft and verify forward pass")
            findings.append(Finding(
                id="cuda_graph.spec_without_graphs", severity="warning",
                title=f"{algorithm} speculative decoding is served with CUDA graphs disabled",
                hosts=(host.name,), evidence=tuple(evidence),
                recommendation=f"Without graphs, {passes} launches its kernels one by one from the CPU "
                               f"(microseconds per launch) instead of replaying one graph. {advice}",
                sources=(source(host, "deployment"),) + ((source(host, "cuda_graph"),) if boundary else ())))
    return findings


def cells(host: HostResult) -> list[dict[str, Any]]:
    found = [c for c in as_list(dig(probe(host, "cuda_graph"), "cells")) if isinstance(c, dict)]
    return sorted(found, key=lambda c: (str(c.get("path")), number(c.get("batch_size")) or 0,
                                        number(c.get("draft_tokens")) or 0))


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
        max_bs, tokens = args.get("cuda_graph_max_bs"), args.get("speculative_num_draft_tokens")
        relevant = [c for c in failing if _serves(c, algorithm)]
        if not relevant or graphs_disabled(args) or not isinstance(max_bs, int) or not isinstance(tokens, int):
            continue
        inside = [c for c in relevant if isinstance(c.get("batch_size"), int) and c["batch_size"] <= max_bs
                  and isinstance(c.get("draft_tokens"), int) and c["draft_tokens"] <= tokens]
        verdict = "inside the failing range: it can hit this failure" if inside else \
            "outside the failing range measured here"
        out.append(Evidence(kind="flag", host=host.name,
                            text=f"live server pid {server.get('pid', '?')} ({algorithm}) captures graphs up to "
                                 f"--cuda-graph-max-bs {max_bs} with {tokens} draft tokens: {verdict}"))
    return out


def _boundary_texts(data: dict[str, Any], paths: list[str]) -> list[str]:
    entries = [b for b in as_list(data.get("boundaries")) if isinstance(b, dict) and b.get("text")]
    texts = [str(b["text"]) for b in entries if str(b.get("label")) in paths]
    if not texts and dig(data, "boundary", "text"):
        texts = [str(dig(data, "boundary", "text"))]
    return texts


def _severity(statuses: list[str], signature: dict[str, Any]) -> str:
    """From the cells' statuses, raised to the matched signature's own severity when that is worse."""
    severity = "critical" if any(s in WRONG_RESULTS for s in statuses) else \
        "warning" if statuses == [HARNESS_ERROR] else "error"
    named = str(signature.get("severity") or "")
    return min((severity, named), key=lambda s: SEVERITY_RANK.get(s, 9))


def _repro_finding(host: HostResult, key: str, failing: list[dict[str, Any]]) -> Finding:
    data = probe(host, "cuda_graph") or {}
    gpu = as_dict(data.get("gpu"))
    signature = as_dict(failing[0].get("signature"))
    rows = (("path", "batch size", "draft tokens", "status", "detail"),) + tuple(
        (str(c.get("path")), str(c.get("batch_size", "-")), str(c.get("draft_tokens", "-")), str(c.get("status")),
         " ".join(str(c.get("detail") or "").split())[:160]) for c in failing)
    evidence = [Evidence(kind="measurement", host=host.name, table=rows,
                         text=f"{len(failing)} failing cell(s) on GPU {gpu.get('index', '?')} {gpu.get('name', '?')} "
                              f"({gpu.get('compute_capability', '?')}), {data.get('mode', '?')} mode, each cell in "
                              "its own child process")]
    paths = sorted({str(c.get("path")) for c in failing})
    for text in _boundary_texts(data, paths):
        evidence.append(Evidence(kind="measurement", host=host.name, text=f"boundary: {text}"))
    if signature:
        quoted = "\n".join(str(dig(line, "text") or line) for line in as_list(signature.get("lines"))[:5])
        evidence.append(Evidence(kind="text", host=host.name, snippet=quoted or None,
                                 text=f"matches {signature.get('name')}: {signature.get('meaning') or ''} "
                                      f"({signature.get('reference') or 'no reference'})"))
    evidence += _live_servers_against(host, failing)
    statuses = sorted({str(c.get("status")) for c in failing})
    return Finding(
        id="cuda_graph.repro_failure", severity=_severity(statuses, signature),
        title=f"CUDA-graph {'/'.join(statuses)} on {', '.join(paths)}"
              + (f" ({signature.get('name')})" if signature else ""),
        hosts=(host.name,), evidence=tuple(evidence),
        recommendation=str(signature.get("recommendation") or
                           "Keep CUDA graphs below the boundary (--cuda-graph-max-bs) or disable them for the "
                           "failing path, and report the repro cell with its detail upstream."),
        sources=(source(host, "cuda_graph"),))


def classified_log(manifest_extra: dict[str, Any]) -> list[Finding]:
    """Signatures matched in a log file by `gpudiag repro cuda-graph-crash --log FILE` (a run with no hosts)."""
    repro = as_dict(manifest_extra.get("repro"))
    if not repro.get("log"):
        return []
    findings = []
    for match in (m for m in as_list(repro.get("matches")) if isinstance(m, dict)):
        quoted = [q for q in as_list(match.get("lines")) if isinstance(q, dict)]
        first = quoted[0].get("line") if quoted else None
        severity = str(match.get("severity") or "error")
        findings.append(Finding(
            id="cuda_graph.log_signature", severity=severity if severity in SEVERITY_RANK else "error",
            title=f"log {str(repro['log']).rsplit('/', 1)[-1]} matches the CUDA-graph failure {match.get('name')}",
            hosts=(),
            evidence=(Evidence(kind="text", text=f"{match.get('meaning') or match.get('name')} — "
                                                 f"{len(quoted)} matching line(s) in {repro['log']} "
                                                 f"({match.get('reference') or 'no reference'})",
                               file=str(repro["log"]), line=first if isinstance(first, int) else None,
                               snippet="\n".join(str(q.get("text")) for q in quoted[:5]) or None),),
            recommendation=str(match.get("recommendation") or "Compare with the referenced report."),
            sources=(f"run.json/repro/{match.get('name')}",)))
    return findings
