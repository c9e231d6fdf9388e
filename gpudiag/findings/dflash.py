"""DFlash draft-graph guards: sglang's worker switches its draft CUDA graph off at start-up under some
conditions; which of them holds for each live DFlash server (rule 4)."""

from __future__ import annotations

import re
from typing import Any

from gpudiag.findings.common import source, source_evidence, truthy_flag
from gpudiag.probe_view import as_dict, as_list, dig, number, probe
from gpudiag.findings.server_flags import algorithm_of, graphs_disabled, server_args
from gpudiag.findings.server_scope import server_name, servers_read
from gpudiag.models import Evidence, Finding, HostResult

HOLDS, CLEAR, UNKNOWN = "holds", "clear", "unknown"
LOG_LINE = "Disable DFLASH draft cuda graph"
# Platform predicates: which device platform sglang runs on (out-of-tree platform plugins, ROCm, NPU, XPU).
PLATFORM_GUARD = re.compile(r"\b(is_out_of_tree|is_hip|is_npu|is_xpu|is_hpu|is_cpu)\s*\(")


def _guard_text(guard: dict[str, Any]) -> str:
    """The guard's enclosing conditions and its own, outermost first, as one expression."""
    conditions = [str(c) for c in as_list(guard.get("conditions"))] or [str(guard.get("condition") or "")]
    return " and ".join(c for c in conditions if c)


def judge_guard(guard: dict[str, Any], host: HostResult, server: dict[str, Any]) -> tuple[str, str, str]:
    """(holds | clear | unknown, why, what lifts it) for one draft-graph guard and one live server.

    Each guard in sglang's init_cuda_graphs applies only while capture_decode_cuda_graph is still true, so the
    caller walks them in source order and stops at the first that holds."""
    condition, message = _guard_text(guard), str(guard.get("message") or "")
    args = server_args(server)
    words = f"{condition} {message}".lower().replace(" ", "_")
    if "dp_attention" in words or "dp_enabled" in words:
        flag = dp_attention(args)
        if flag:
            return (
                HOLDS,
                f"the server runs with data-parallel attention ({flag})",
                f"serve DFlash without {flag.split()[0]} to keep its draft graph",
            )
        return CLEAR, "the server runs without data-parallel attention", ""
    threshold = _memory_threshold_mib(condition, message)
    if threshold is not None:
        return _memory_guard(host, server, threshold)
    if PLATFORM_GUARD.search(condition):
        negated = re.search(r"not\s+[\w.]*" + PLATFORM_GUARD.pattern, condition)
        if _nvidia_gpus(host) and not negated:
            return CLEAR, "the host's GPUs are NVIDIA GPUs, served by sglang's built-in CUDA platform", ""
        return UNKNOWN, "the guard asks which device platform sglang runs on, which a scan does not read", ""
    for name in sorted(set(re.findall(r"server_args\.(\w+)", condition))):
        flag_negated = re.search(rf"not\s+[\w.]*server_args\.{name}\b", condition) is not None
        if name in args:
            flag = f"--{name.replace('_', '-')}"
            if truthy_flag(args[name] or False) != flag_negated:
                return HOLDS, f"the server runs with {flag}={args[name]}", f"change {flag} for this deployment"
            return CLEAR, f"the server runs with {flag}={args[name]}", ""
    return UNKNOWN, "the guard's condition is not one a scan can evaluate", ""


def dp_attention(args: dict[str, Any]) -> str | None:
    """The flag that turns data-parallel attention on: --enable-dp-attention, or from 0.5.23 --attn-dp-size N > 1."""
    if truthy_flag(args.get("enable_dp_attention") or False):
        return "--enable-dp-attention"
    size = number(args.get("attn_dp_size"))
    if size is None and str(args.get("attn_dp_size") or "").isdigit():
        size = float(args["attn_dp_size"])
    return f"--attn-dp-size {size:g}" if size is not None and size > 1 else None


def _memory_guard(host: HostResult, server: dict[str, Any], threshold: float) -> tuple[str, str, str]:
    """The start-up free-memory guard. A running server holds its memory now, so today's free memory says
    nothing; at start-up at most (1 - mem_fraction_static) of each of its GPUs was left outside sglang's pool."""
    fraction = number(server_args(server).get("mem_fraction_static"))
    if fraction is None:
        try:
            fraction = float(str(server_args(server).get("mem_fraction_static")))
        except ValueError:
            fraction = None
    totals = [t for t in (number(d.get("memory_total_mib")) for d in server_gpus(host, server)) if t]
    if fraction is not None and 0 < fraction < 1 and totals:
        left = min(totals) * (1 - fraction)
        if left < threshold:
            return (
                HOLDS,
                f"--mem-fraction-static {fraction:g} leaves at most {left:.0f} MiB of its smallest GPU "
                f"({min(totals):.0f} MiB) outside sglang's memory pool, under the guard's "
                f"{threshold:.0f} MiB",
                "lower --mem-fraction-static so the guard's memory stays free",
            )
    return (
        UNKNOWN,
        f"whether {threshold:.0f} MiB were free after the target model loaded cannot be read from a "
        f"running server: check its start-up log for '{LOG_LINE}'",
        "",
    )


def server_gpus(host: HostResult, server: dict[str, Any]) -> list[dict[str, Any]]:
    """The env probe's devices the server sees (its CUDA_VISIBLE_DEVICES, by index or UUID; all when unset)."""
    devices = [d for d in as_list(dig(probe(host, "env"), "gpus", "devices")) if isinstance(d, dict)]
    visible = server.get("cuda_visible_devices") or dig(server, "env", "CUDA_VISIBLE_DEVICES")
    if not isinstance(visible, str) or not visible.strip():
        return devices
    wanted = [v.strip() for v in visible.split(",") if v.strip()]
    chosen = [d for d in devices if str(d.get("index")) in wanted or str(d.get("uuid") or "") in wanted]
    return chosen or devices


def _nvidia_gpus(host: HostResult) -> bool:
    return any("nvidia" in str(d.get("name") or "").lower() for d in server_gpus(host, {}))


def _memory_threshold_mib(condition: str, message: str) -> float | None:
    """The free-memory threshold of a guard like `available_mem < 1.0` (unit from the code or its message)."""
    match = re.search(r"\w*mem\w*\s*<=?\s*(\d+(?:\.\d+)?)\s*(\*\s*1024)?\s*(gb|gib|mb|mib)?", condition, re.I)
    if not match:
        return None
    value = float(match.group(1))
    unit = (match.group(3) or "").lower() or (
        "gb" if re.search(r"\bGi?B\b", message) else "mb" if re.search(r"\bMi?B\b", message) else ""
    )
    if match.group(2) or unit in ("gb", "gib"):
        return value * 1024
    return value if unit in ("mb", "mib") else None


def dflash_guards(host: HostResult) -> list[dict[str, Any]]:
    """The draft-graph guards in source order (file, then line): the order init_cuda_graphs runs them."""
    guards = [
        g for g in as_list(dig(probe(host, "sglang_source"), "dflash", "draft_graph_guards")) if isinstance(g, dict)
    ]
    return sorted(guards, key=lambda g: (str(g.get("file")), number(g.get("line")) or 0))


def first_guard_holding(host: HostResult, server: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, str, str]] | None:
    """(guard, verdict) for the first guard in source order that holds for this server."""
    for guard in dflash_guards(host):
        verdict = judge_guard(guard, host, server)
        if verdict[0] == HOLDS:
            return guard, verdict
    return None


def dflash_draft_graph_disabled(hosts: list[HostResult]) -> list[Finding]:
    """Rule 4: a DFlash server with graphs on whose draft CUDA graph a source guard switches off.

    A server that disabled decode graphs is left to rule 5: the guards never run there."""
    findings = []
    for host in hosts:
        # The guards are the read release's: only servers running that release are judged by them.
        servers = [s for s in servers_read(host) if algorithm_of(s) == "DFLASH" and not graphs_disabled(server_args(s))]
        if not dflash_guards(host) or not servers:
            continue
        evidence, advice, unknown = [], [], []
        for server in servers:
            found = first_guard_holding(host, server)
            if found is None:
                unknown += [n for n in (judge_guard(g, host, server) for g in dflash_guards(host)) if n[0] == UNKNOWN]
                continue
            guard, (_, why, lift) = found
            message = str(guard.get("message") or LOG_LINE).rstrip(". ")
            evidence.append(
                source_evidence(
                    host,
                    guard,
                    f"'{message}' — the first guard in source order that holds: {why} ({server_name(host, server)})",
                )
            )
            advice.append(lift)
        if evidence:
            findings.append(_dflash_finding(host, evidence, advice))
        elif unknown:
            # A server whose log was read has its answer there (the server-log finding says when it is off).
            unread = [s for s in servers if server_log(host, s) is None]
            if unread:
                findings.append(_dflash_unknown(host, unread, unknown[0][1]))
    return findings


def server_log(host: HostResult, server: dict[str, Any]) -> dict[str, Any] | None:
    """The classification of this server's own log when the scan found and read it, else None."""
    logs = as_dict(dig(probe(host, "deployment"), "server_logs"))
    block = as_dict(logs.get(str(server.get("pid"))))
    return block if block.get("source") else None


def _dflash_finding(host: HostResult, evidence: list[Evidence], advice: list[str]) -> Finding:
    return Finding(
        id="cuda_graph.dflash_draft_graph_disabled",
        severity="warning",
        title="the DFlash draft CUDA graph is switched off by a guard that holds on this host",
        hosts=(host.name,),
        evidence=tuple(evidence),
        recommendation=f"The draft then runs eagerly on every step. To lift it: {'; '.join(dict.fromkeys(advice))}; "
        f"then check that the server's start-up log no longer says '{LOG_LINE}'.",
        sources=(source(host, "sglang_source"), source(host, "deployment")),
        action=f"To keep the DFlash draft graph: {'; '.join(dict.fromkeys(advice))}",
    )


def _dflash_unknown(host: HostResult, servers: list[dict[str, Any]], why: str) -> Finding:
    names = ", ".join(server_name(host, s) for s in servers)
    return Finding(
        id="cuda_graph.dflash_draft_graph_disabled",
        severity="info",
        title="the DFlash draft CUDA graph may be switched off at start-up: a scan cannot tell",
        hosts=(host.name,),
        evidence=(
            Evidence(kind="text", host=host.name, text=f"{names}: no guard holds on what the scan reads, but {why}"),
        ),
        recommendation=f"The scan found no log for {'these servers' if len(servers) > 1 else 'this server'}: search "
        f"its start-up output (journald, `docker logs`, the file its stdout goes to) for '{LOG_LINE}'; when it is "
        "there, the draft runs eagerly on every step for the reason it gives.",
        sources=(source(host, "sglang_source"), source(host, "deployment")),
    )
