"""Q10: is speculative decoding paying off on each server? From each live server's own decode lines:
algorithm, draft tokens, acceptance length over the log window, throughput per concurrency bucket and
graphs on/off as the lines say — or `not checked — <reason>`. The answer carries the same figures as a
structured `value` beside its sentence, so nothing downstream reads numbers back out of the text."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.answers import ANSWERED, NOT_CHECKED, PARTIAL, Answer, probe_gap
from gpudiag.findings.serving import (
    NO_ACCEPTANCE,
    ServerFigures,
    bucket_text,
    endpoint_accept,
    serving_figures,
    window_text,
)
from gpudiag.models import HostResult
from gpudiag.probe_view import as_dict

QID = "Q10"
COMMAND = "gpudiag scan HOST --probes deployment"


def _server_value(item: ServerFigures) -> dict[str, Any]:
    figures = item.figures or {}
    value: dict[str, Any] = {
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


def _endpoint_text(item: ServerFigures) -> str:
    accept, where = endpoint_accept(item)
    if not accept:
        return ""
    ranks = f" over {len(accept)} DP ranks" if len(accept) > 1 else ""
    return f"; lifetime average accept length {sum(accept) / len(accept):.2f}{ranks} ({where}, warm-up included)"


def _sentence(item: ServerFigures) -> str:
    figures = item.figures or {}
    head = f"{item.label}"
    if item.figures is None:
        if item.algorithm and _endpoint_text(item):
            return f"{head}: {item.algorithm}, decode lines not read — {item.why}{_endpoint_text(item)}"
        return f"{head}: not checked — {item.why}"
    buckets = bucket_text(figures) or "no steady decode line"
    graph = as_dict(figures.get("graph"))
    graphs = (
        (
            f"graphs on in {graph.get('true', 0)}, off in {graph.get('false', 0)} of {figures.get('decode_lines')} "
            "decode lines"
        )
        if graph.get("absent", 0) < (figures.get("decode_lines") or 0)
        else "graphs not logged"
    )
    if not item.algorithm:
        return f"{head}: not checked — speculation off (no --speculative-algorithm); tok/s by #running-req {buckets}"
    accept = figures.get("median_accept_len")
    said = (
        f"accept len {accept:.2f}" + (" — no draft token accepted" if accept <= NO_ACCEPTANCE else "")
        if isinstance(accept, (int, float))
        else "no accept len in the decode lines"
    )
    dp = as_dict(figures.get("dp_sum"))
    dp_text = (
        f"; DP ranks summed at the same second: {dp['median_gen_throughput']:g} tok/s"
        if isinstance(dp.get("median_gen_throughput"), (int, float))
        else ""
    )
    return (
        f"{head}: {item.algorithm}, {item.draft_tokens or 'default'} draft tokens, {said} over "
        f"{window_text(item)}; tok/s by #running-req {buckets}; {graphs}{dp_text}{_endpoint_text(item)}"
    )


def q10_speculation(host: HostResult) -> Answer:
    gap = probe_gap(host, "deployment", "--probes deployment")
    if gap:
        return Answer(QID, NOT_CHECKED, f"not checked — {gap}", COMMAND, {"servers": [], "reason": gap})
    items = serving_figures(host)
    if not items:
        return Answer(
            QID,
            NOT_CHECKED,
            "not checked — no live sglang server",
            "",
            {"servers": [], "reason": "no live sglang server"},
        )
    values = [_server_value(i) for i in items]
    text = "; ".join(_sentence(i) for i in items)
    checked = [v for v in values if v["checked"]]
    speculative = [i for i in items if i.algorithm]
    complete = [v for v in checked if v.get("decode_lines")]
    if not checked:
        reasons = [str(v["reason"]) for v in values]
        said = (
            reasons[0]
            if len(set(reasons)) == 1 and len(items) == 1
            else "; ".join(f"{i.label}: {r}" for i, r in zip(items, reasons))
        )
        # The reason says what to do (name the log, wait for load, …): rerunning the same scan would not help.
        return Answer(QID, NOT_CHECKED, f"not checked — {said}", "", {"servers": values})
    status = ANSWERED if len(complete) == len(speculative) else PARTIAL
    return Answer(QID, status, text, COMMAND, {"servers": values})
