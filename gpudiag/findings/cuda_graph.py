"""CUDA-graph findings: the DFlash draft graph switched off by a guard, speculative decoding served without
graphs, and the failures of a repro matrix."""
from __future__ import annotations

import re
from typing import Any

from gpudiag.findings.common import as_dict, as_list, dig, number, probe, source, source_evidence, truthy_flag
from gpudiag.findings.facts import server_args, servers_of
from gpudiag.models import Evidence, Finding, HostResult

FAILED_STATUSES = ("capture_failed", "replay_failed", "mismatch", "device_fault", "timeout", "crashed_on_request",
                   "hang", "silent_failure")
WRONG_RESULTS = ("mismatch", "silent_failure")      # runs but gives wrong answers: worse than a crash


def _algorithm(server: dict[str, Any]) -> str:
    return str(server_args(server).get("speculative_algorithm") or "").upper()


def _guard_holds(guard: dict[str, Any], args: dict[str, Any], env: dict[str, Any]) -> str | None:
    """Why the guard holds on this host (one line), or None when it does not or cannot be told."""
    condition = str(guard.get("condition") or "")
    text = condition.lower()
    if "dp_attention" in text and truthy_flag(args.get("enable_dp_attention") or False):
        return "the server runs with --enable-dp-attention"
    vendor = str(dig(env, "gpus", "source") or "")
    if re.search(r"\bis_(hip|npu|xpu)\(\)", text) and not text.strip().startswith("not") and vendor == "nvidia-smi":
        return None
    if re.search(r"not\s+\w*is_cuda\w*\(\)", text) and vendor and vendor != "nvidia-smi":
        return f"the GPUs are not CUDA devices (listed by {vendor})"
    threshold = _memory_threshold_mib(condition)
    if threshold is not None:
        free = _min_free_mib(env)
        if free is not None and free < threshold:
            return f"the least free GPU memory is {free:.0f} MiB, under the guard's {threshold:.0f} MiB"
        return None
    for name in sorted(set(re.findall(r"server_args\.(\w+)", condition))):
        negated = re.search(rf"not\s+[\w.]*server_args\.{name}\b", condition) is not None
        if name in args and truthy_flag(args[name] or False) != negated:
            return f"the server runs with {name}={args[name]}"
    return None


def _memory_threshold_mib(condition: str) -> float | None:
    if not re.search(r"mem", condition, re.I):
        return None
    match = re.search(r"<=?\s*(\d+(?:\.\d+)?)\s*(?:\*\s*1024\s*)?(gb|gib|mb|mib)?", condition, re.I)
    if not match:
        return None
    value, unit = float(match.group(1)), (match.group(2) or "").lower()
    if "* 1024" in match.group(0) or unit in ("gb", "gib"):
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
        evidence, env = [], probe(host, "env") or {}
        for guard in guards:
            for server in servers:
                why = _guard_holds(guard, server_args(server), env)
                if why:
                    message = guard.get("message") or "Disable DFLASH draft cuda graph"
                    evidence.append(source_evidence(host, guard, f"{message!s}: holds because {why} "
                                                                 f"(server pid {server.get('pid', '?')})"))
                    break
        if evidence:
            findings.append(Finding(
                id="cuda_graph.dflash_draft_graph_disabled", severity="warning",
                title="the DFlash draft CUDA graph is switched off by a guard that holds on this host",
                hosts=(host.name,), evidence=tuple(evidence),
                recommendation="The draft then runs eagerly on every step. Remove the condition named above "
                               "(e.g. drop --enable-dp-attention or free GPU memory by lowering "
                               "--mem-fraction-static), then check the server log no longer says "
                               "'Disable DFLASH draft cuda graph'.",
                sources=(source(host, "sglang_source"), source(host, "deployment"))))
    return findings


def ok_boundary(host: HostResult, algorithm: str) -> tuple[str, int] | None:
    """(paths, largest batch size below every failure) among this algorithm's repro cells, or None."""
    prefix = "dflash" if algorithm == "DFLASH" else "eagle"
    relevant = [c for c in cells(host) if str(c.get("path")).startswith(prefix) and isinstance(c.get("batch_size"), int)]
    failing = [c["batch_size"] for c in relevant if c.get("status") in FAILED_STATUSES]
    limit = min(failing) if failing else None
    clean = [c["batch_size"] for c in relevant if c.get("status") == "ok" and (limit is None or c["batch_size"] < limit)]
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
            if not algorithm or algorithm == "NONE" or not truthy_flag(args.get("disable_cuda_graph") or False):
                continue
            steps = args.get("speculative_num_steps")
            evidence = [Evidence(kind="flag", host=host.name,
                                 text=f"server pid {server.get('pid', '?')}: --speculative-algorithm {algorithm} "
                                      f"with --disable-cuda-graph", snippet=str(server.get("cmdline") or "") or None)]
            boundary = ok_boundary(host, algorithm)
            if boundary:
                advice = (f"Re-enable graphs within the range the repro proved safe on this host: drop "
                          f"--disable-cuda-graph and set --cuda-graph-max-bs {boundary[1]} ({boundary[0]} captured "
                          f"and replayed cleanly up to batch size {boundary[1]}).")
                evidence.append(Evidence(kind="measurement", host=host.name,
                                         text=f"repro: {boundary[0]} ok up to batch size {boundary[1]}"))
            else:
                advice = ("Run `gpudiag repro` on this host to find the batch sizes that capture and replay "
                          "cleanly, then drop --disable-cuda-graph with --cuda-graph-max-bs at that boundary.")
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
            if cell.get("status") in FAILED_STATUSES:
                key = str(dig(cell, "signature", "name") or cell.get("status"))
                groups.setdefault(key, []).append(cell)
        for key, failed in sorted(groups.items()):
            findings.append(_repro_finding(host, key, failed))
    return findings


def _repro_finding(host: HostResult, key: str, failed: list[dict[str, Any]]) -> Finding:
    data = probe(host, "cuda_graph") or {}
    gpu = as_dict(data.get("gpu"))
    signature = as_dict(failed[0].get("signature"))
    rows = (("path", "batch size", "draft tokens", "status", "detail"),) + tuple(
        (str(c.get("path")), str(c.get("batch_size", "-")), str(c.get("draft_tokens", "-")), str(c.get("status")),
         str(c.get("detail") or "")[:120]) for c in failed)
    evidence = [Evidence(kind="measurement", host=host.name, table=rows,
                         text=f"{len(failed)} failing cell(s) on GPU {gpu.get('index', '?')} {gpu.get('name', '?')} "
                              f"({gpu.get('compute_capability', '?')}), {data.get('mode', '?')} mode, each in a "
                              "child process")]
    boundary = dig(data, "boundary", "text")
    if boundary:
        evidence.append(Evidence(kind="measurement", host=host.name, text=f"boundary: {boundary}"))
    if signature:
        evidence.append(Evidence(kind="text", host=host.name,
                                 text=f"matches {signature.get('name')}: {signature.get('meaning') or ''} "
                                      f"({signature.get('reference') or 'no reference'})".strip()))
    statuses = sorted({str(c.get("status")) for c in failed})
    wrong = any(s in WRONG_RESULTS for s in statuses)
    paths = sorted({str(c.get("path")) for c in failed})
    return Finding(
        id="cuda_graph.repro_failure", severity="critical" if wrong else "error",
        title=f"CUDA-graph {'/'.join(statuses)} on {', '.join(paths)}"
              + (f" ({signature.get('name')})" if signature else ""),
        hosts=(host.name,), evidence=tuple(evidence),
        recommendation=str(signature.get("recommendation") or
                           "Keep CUDA graphs below the boundary (--cuda-graph-max-bs) or disable them for the "
                           "failing path, and report the repro cell with its detail upstream."),
        sources=(source(host, "cuda_graph"),))
