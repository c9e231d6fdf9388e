"""Q4: is DFlash present, is its draft CUDA graph on, and if off, which guard and which flag. The answer's value
holds the guards and, per DFlash server, the draft graph's state and what decides it; its sentence is rendered
from that value."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.answers import ANSWERED, Answer, _not_checked, _server_logs, _sglang_gap, with_scope
from gpudiag.findings.dflash import LOG_LINE, UNKNOWN, dflash_guards, first_guard_holding, judge_guard, server_log
from gpudiag.findings.server_flags import algorithm_of, decode_graph_switch, server_args, servers_of
from gpudiag.findings.server_scope import server_label, servers_read
from gpudiag.models import HostResult
from gpudiag.probe_view import as_dict, probe

COMMAND = "gpudiag scan HOST"


def _where(fact: dict[str, Any]) -> str:
    return f"{fact.get('file')}:{fact.get('line')}" if fact.get("file") else "-"


def _logged(host: HostResult) -> dict[str, Any] | None:
    """What a live server's log says about DFlash's draft graph at start-up (disabled, or its capture failed)."""
    for log in _server_logs(host):
        decision = as_dict(log.get("dflash_draft_graph"))
        if decision.get("state") in ("disabled", "capture_failed"):
            return {"state": decision["state"], "text": decision.get("text") or decision.get("reason")}
    return None


def _server_state(host: HostResult, server: dict[str, Any], name: str) -> dict[str, Any]:
    """One DFlash server's draft graph: on, off (by a flag or a guard that holds) or unknown, with its evidence."""
    disabled, switch = decode_graph_switch(server_args(server))
    holding = first_guard_holding(host, server)
    state: dict[str, Any] = {
        "server": name,
        "pid": server.get("pid"),
        "draft_graph": "on",
        "flag": None,
        "guard": None,
        "why": None,
        "log_read": server_log(host, server) is not None,
    }
    if disabled:
        state.update(draft_graph="off", flag=switch)
        if holding:  # with graphs back on, this guard would still keep the draft eager
            state.update(guard=_where(holding[0]), why=holding[1][1])
        return state
    if holding:
        return dict(state, draft_graph="off", guard=_where(holding[0]), why=holding[1][1])
    unknown = [v for g in dflash_guards(host) if (v := judge_guard(g, host, server))[0] == UNKNOWN]
    if unknown and not state["log_read"]:
        return dict(state, draft_graph="unknown", why=unknown[0][1])
    return state


def q4_text(value: dict[str, Any]) -> str:
    """Q4's sentence, from its value, closed by which servers the sglang facts describe where not all."""
    return with_scope(_sentence(value), value)


def _sentence(value: dict[str, Any]) -> str:
    logged = value.get("log")
    if value.get("source_gap") and logged:  # the server's own log answers where the source was not read
        verb = "disabled" if logged["state"] == "disabled" else "capture failed"
        said = f"{logged['text']} (server log; source not read: {value['source_gap']})"
        return f"DFlash draft graph {verb} at startup: {said}"
    if not value.get("present"):
        return f"DFlash absent in sglang {value.get('release')}"
    guards = value.get("guards") or []
    guard_text = f"{len(guards)} draft-graph guard(s) at " + ", ".join(guards) if guards else "no draft-graph guard"
    head = f"present ({value.get('worker_file')}; {guard_text}); "
    if logged:
        verb = "disabled" if logged["state"] == "disabled" else "capture failed"
        return head + f"DFlash draft graph {verb} at startup: {logged['text']}"
    if not value.get("servers"):
        return head + "no DFlash server running"
    parts = []
    for s in value["servers"]:
        if s["draft_graph"] == "off" and s["flag"]:
            also = f"; with graphs on, guard {s['guard']} would still hold ({s['why']})" if s["guard"] else ""
            parts.append(f"{s['server']}: draft graph off by {s['flag']}{also}")
        elif s["draft_graph"] == "off":
            parts.append(f"{s['server']}: draft graph off by guard {s['guard']} ({s['why']})")
        elif s["draft_graph"] == "unknown":
            parts.append(
                f"{s['server']}: draft graph on unless a guard the scan cannot judge holds ({s['why']}); "
                "no log was found to tell"
            )
        elif s["log_read"]:
            parts.append(f"{s['server']}: draft graph on (no guard holds; its log has no '{LOG_LINE}' line)")
        else:
            parts.append(f"{s['server']}: draft graph on (no guard holds)")
    return head + "; ".join(parts)


def q4_dflash(host: HostResult) -> Answer:
    logged = _logged(host)
    gap = _sglang_gap(host)
    if gap:  # the server's own log still answers whether its draft graph is on
        if not logged:
            return _not_checked("Q4", gap)
        said: dict[str, Any] = {"present": None, "log": logged, "servers": [], "source_gap": gap}
        return Answer("Q4", ANSWERED, q4_text(said), COMMAND, said)
    sglang = probe(host, "sglang_source") or {}
    dflash = as_dict(sglang.get("dflash"))
    several = len(servers_of(host)) > 1
    servers = [s for s in servers_read(host) if algorithm_of(s) == "DFLASH"]  # the read release's guards
    value = {
        "present": bool(dflash.get("present")),
        "release": sglang.get("version"),
        "worker_file": dflash.get("worker_file"),
        "guards": [_where(g) for g in dflash_guards(host)],
        "log": logged,
        "servers": []
        if logged or not dflash.get("present")
        else [_server_state(host, s, server_label(s) if several else f"pid {s.get('pid')}") for s in servers],
    }
    return Answer("Q4", ANSWERED, q4_text(value), COMMAND if value["present"] else "", value)
