"""Q10: is speculative decoding paying off on each server? From each live server's own decode lines:
algorithm, draft tokens, acceptance length over the log window, throughput per concurrency bucket and
graphs on/off as the lines say — or `not checked — <reason>`. The answer carries the same figures as a
structured `value` beside its sentence, so nothing downstream reads numbers back out of the text."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.answers import ANSWERED, NOT_CHECKED, PARTIAL, Answer, probe_gap
from gpudiag.findings.serving import NO_ACCEPTANCE
from gpudiag.findings.serving_view import ServerFigures, bucket_text, endpoint_accept, serving_figures
from gpudiag.models import HostResult
from gpudiag.probe_view import as_dict

QID = "Q10"
COMMAND = "gpudiag scan HOST --probes deployment"


def _server_value(item: ServerFigures) -> dict[str, Any]:
    figures = item.figures or {}
    value: dict[str, Any] = {
        "server": item.label,
        "pid": item.server.get("pid"),
        "port": as_dict(item.server.get("args")).get("port"),
        "algorithm": item.algorithm or None,
        "draft_tokens": item.draft_tokens,
        "log": item.log_where or None,
        "checked": item.figures is not None and bool(item.algorithm),
        "reason": None if item.figures is not None and item.algorithm else _reason(item),
    }
    accept, where = endpoint_accept(item)
    value["endpoint"] = {
        "accept_len": accept,
        "from": where or None,
        "reason": item.endpoint.get("reason") or item.endpoint.get("info_error"),
    }
    if accept and item.algorithm and item.figures is None:
        value["checked"] = True  # the log is missing, the server's own lifetime average still answers
        value["drafts_accepted"] = max(accept) > NO_ACCEPTANCE
    if item.figures is not None:
        value.update(
            {
                k: figures.get(k)
                for k in ("decode_lines", "first_ts", "last_ts", "median_accept_len", "buckets", "graph", "dp_sum")
            }
        )
        median = figures.get("median_accept_len")
        value["drafts_accepted"] = None if not isinstance(median, (int, float)) else median > NO_ACCEPTANCE
    return value


def _reason(item: ServerFigures) -> str:
    return item.why if item.figures is None else "speculation off (no --speculative-algorithm)"


def _endpoint_text(value: dict[str, Any]) -> str:
    endpoint = as_dict(value.get("endpoint"))
    accept = endpoint.get("accept_len") or []
    if not accept:
        return ""
    ranks = f" over {len(accept)} DP ranks" if len(accept) > 1 else ""
    return (
        f"; lifetime average accept length {sum(accept) / len(accept):.2f}{ranks} ({endpoint.get('from')}, "
        "warm-up included)"
    )


def _graphs_text(value: dict[str, Any]) -> str:
    graph = as_dict(value.get("graph"))
    if graph.get("absent", 0) >= (value.get("decode_lines") or 0):
        return "graphs not logged"
    return (
        f"graphs on in {graph.get('true', 0)}, off in {graph.get('false', 0)} of {value['decode_lines']} decode lines"
    )


def _sentence(value: dict[str, Any]) -> str:
    """One server's clause, from its value."""
    head = str(value.get("server"))
    if not value.get("decode_lines"):  # no log window was read: `reason` says why
        if value.get("algorithm") and _endpoint_text(value):
            return f"{head}: {value['algorithm']}, decode lines not read — {value['reason']}{_endpoint_text(value)}"
        return f"{head}: not checked — {value['reason']}"
    buckets = bucket_text(value) or "no steady decode line"
    if not value.get("algorithm"):
        # A baseline's own figures are said too: they are what a speculative twin is judged against.
        return (
            f"{head}: not checked — speculation off (no --speculative-algorithm); tok/s by #running-req {buckets}; "
            f"{_graphs_text(value)}"
        )
    accept = value.get("median_accept_len")
    said = (
        f"accept len {accept:.2f}" + (" — no draft token accepted" if accept <= NO_ACCEPTANCE else "")
        if isinstance(accept, (int, float))
        else "no accept len in the decode lines"
    )
    dp = as_dict(value.get("dp_sum"))
    dp_text = (
        f"; DP ranks summed at the same second: {dp['median_gen_throughput']:g} tok/s"
        if isinstance(dp.get("median_gen_throughput"), (int, float))
        else ""
    )
    span = f", {value['first_ts']} to {value['last_ts']}" if value.get("first_ts") else ""
    window = f"{value['decode_lines']} decode lines of {value.get('log') or 'the log'}{span}"
    return (
        f"{head}: {value['algorithm']}, {value.get('draft_tokens') or 'default'} draft tokens, {said} over "
        f"{window}; tok/s by #running-req {buckets}; {_graphs_text(value)}{dp_text}{_endpoint_text(value)}"
    )


def q10_text(value: dict[str, Any]) -> str:
    """Q10's sentence, from its value: a clause per server, or why none was checked."""
    servers = value.get("servers") or []
    if not servers:
        return f"not checked — {value.get('reason')}"
    if not any(s["checked"] for s in servers):
        reasons = [str(s["reason"]) for s in servers]
        if len(set(reasons)) == 1 and len(servers) == 1:
            return f"not checked — {reasons[0]}"
        return "not checked — " + "; ".join(f"{s['server']}: {r}" for s, r in zip(servers, reasons))
    return "; ".join(_sentence(s) for s in servers)


def q10_speculation(host: HostResult) -> Answer:
    gap = probe_gap(host, "deployment", "--probes deployment")
    if gap:
        said = {"servers": [], "reason": gap}
        return Answer(QID, NOT_CHECKED, q10_text(said), COMMAND, said)
    items = serving_figures(host)
    if not items:
        said = {"servers": [], "reason": "no live sglang server"}
        return Answer(QID, NOT_CHECKED, q10_text(said), "", said)
    value = {"servers": [_server_value(i) for i in items]}
    checked = [v for v in value["servers"] if v["checked"]]
    if not checked:
        # The reason says what to do (name the log, wait for load, …): rerunning the same scan would not help.
        return Answer(QID, NOT_CHECKED, q10_text(value), "", value)
    complete = [v for v in checked if v.get("decode_lines")]
    speculative = [i for i in items if i.algorithm]
    return Answer(QID, ANSWERED if len(complete) == len(speculative) else PARTIAL, q10_text(value), COMMAND, value)
