"""Is speculative decoding paying off? Findings from each live server's own decode lines (read once in
gpudiag/findings/serving_view.py): drafts all rejected (accept len ≈ 1.0 while
speculation is on), decode lines without CUDA graphs while the flags leave them on, and, across the fleet,
servers of one model with and without speculation compared per concurrency bucket."""

from __future__ import annotations

from gpudiag.findings.common import source
from gpudiag.findings.server_flags import command_line, graph_max_bs, graphs_disabled, server_args
from gpudiag.findings.serving_view import (
    ServerFigures,
    bucket_text,
    disable_graph_flag,
    eager_lines,
    endpoint_accept,
    serving_figures,
    window_text,
)
from gpudiag.models import Evidence, Finding, HostResult
from gpudiag.probe_view import as_dict

# accept len counts the bonus token: 1.00 is "no draft token accepted"; up to this much is noise around it.
NO_ACCEPTANCE = 1.05
MIN_LINES = 3  # decode lines with the figure before a verdict is drawn from a window


def _finding(
    fid: str, severity: str, title: str, item: ServerFigures, evidence: list[Evidence], advice: str
) -> Finding:
    return Finding(
        id=fid,
        severity=severity,
        title=title,
        hosts=(item.host.name,),
        evidence=tuple(evidence),
        recommendation=advice,
        sources=(source(item.host, "deployment"),),
    )


def _no_acceptance(item: ServerFigures) -> tuple[float, list[str]] | None:
    """(accept len, what shows it) when a speculative server accepts no draft: the log window's median over
    MIN_LINES lines or more, else (no decode lines read) the server's own lifetime average from its endpoint."""
    if not item.algorithm:
        return None
    figures = item.figures or {}
    who = f"{item.label} ({item.algorithm}, {item.draft_tokens or 'default'} draft tokens)"
    accept = figures.get("median_accept_len")
    if isinstance(accept, (int, float)) and int(figures.get("accept_len_lines") or 0) >= MIN_LINES:
        if accept > NO_ACCEPTANCE:
            return None
        return accept, [
            f"{who}: median accept len {accept:.2f} over {window_text(item)}; 1.00 means no draft token accepted",
            "gen throughput by #running-req: " + (bucket_text(figures) or "-"),
        ]
    lifetime, where = endpoint_accept(item)
    if item.figures is None and lifetime and max(lifetime) <= NO_ACCEPTANCE:
        return max(lifetime), [
            f"{who}: lifetime average accept length {max(lifetime):.2f} from {where} (every DP rank at or below "
            f"{NO_ACCEPTANCE}); its decode lines were not read ({item.why})"
        ]
    return None


def accept_len_one(hosts: list[HostResult]) -> list[Finding]:
    """Speculation on, yet accept len is ≈ 1.0: every draft token rejected."""
    findings = []
    for host in hosts:
        for item in serving_figures(host):
            found = _no_acceptance(item)
            if found is None:
                continue
            accept, texts = found
            evidence = [
                Evidence(kind="measurement", host=host.name, text=text, snippet=command_line(item.server) or None)
                for text in texts[:1]
            ] + [Evidence(kind="measurement", host=host.name, text=text) for text in texts[1:]]
            graphs_on = as_dict((item.figures or {}).get("graph")).get("true", 0)
            graph_note = (
                f"; its decode lines ran with CUDA graphs ({graphs_on}): compare a run with "
                f"{disable_graph_flag(item)} — a graph replaying stale draft inputs accepts nothing and raises nothing"
                if graphs_on
                else ""
            )
            findings.append(
                _finding(
                    "serving.no_draft_accepted",
                    "error",
                    f"speculative decoding accepts no draft tokens (accept len {accept:.2f}): it costs a draft "
                    "pass per step and gives nothing",
                    item,
                    evidence,
                    "Check that --speculative-draft-model-path is the draft trained for this target model"
                    + graph_note
                    + "; until acceptance is above 1, serving without --speculative-algorithm is faster.",
                )
            )
    return findings


def graphs_off_in_log(hosts: list[HostResult]) -> list[Finding]:
    """Decode lines say `cuda graph: False` at batch sizes the flags leave captured."""
    findings = []
    for host in hosts:
        for item in serving_figures(host):
            findings += [f for f in (_eager_above_max_bs(item), _graphs_off(item)) if f]
    return findings


def _eager_above_max_bs(item: ServerFigures) -> Finding | None:
    """A note for decode lines above the largest captured batch size: eager by sglang's rule, as configured."""
    eager = eager_lines(item)
    if not eager:
        return None
    return _finding(
        "serving.eager_above_max_bs",
        "info",
        f"{eager[0]} decode lines ran above the largest captured batch size: eager decode",
        item,
        [
            Evidence(
                kind="measurement",
                host=item.host.name,
                text=f"{item.label}: {eager[1]} — {window_text(item)}",
                snippet=command_line(item.server) or None,
            )
        ],
        "As configured: raise the largest captured size (--cuda-graph-max-bs) if this load is the "
        "one to serve fast, at the cost of capture memory; read their figures as eager ones.",
    )


def _graphs_off(item: ServerFigures) -> Finding | None:
    """Decode lines without graphs at batch sizes the flags leave captured."""
    figures = item.figures or {}
    off = int(as_dict(figures.get("graph")).get("false") or 0)
    lowest_off = figures.get("graph_off_min_running")
    if not off or graphs_disabled(server_args(item.server)) or not isinstance(lowest_off, int):
        return None
    highest_on = figures.get("graph_on_max_running")
    max_bs = graph_max_bs(server_args(item.server))
    if max_bs is not None and lowest_off > max_bs[0]:
        return None  # only batches above the captured sizes ran eagerly: as configured
    if max_bs is None and isinstance(highest_on, int) and lowest_off > highest_on:
        return None  # graphs on up to some batch size, off above it: the default capture limit
    backend = ", ".join(figures.get("graph_backends") or ["cuda"])
    evidence = [
        Evidence(
            kind="measurement",
            host=item.host.name,
            text=f"{item.label}: {off} of {figures.get('decode_lines')} decode lines say `{backend} graph: False`, "
            f"from #running-req {lowest_off}"
            + (f" (graphs on up to {highest_on})" if isinstance(highest_on, int) else " (never on)")
            + (f"; {max_bs[1]} {max_bs[0]}" if max_bs else "; the flags do not disable graphs")
            + f" — {window_text(item)}",
            snippet=command_line(item.server) or None,
        )
    ]
    return _finding(
        "serving.graphs_off_in_log",
        "warning",
        "decode runs without CUDA graphs although the flags do not disable them",
        item,
        evidence,
        "The decode lines of this window ran eagerly at batch sizes that should replay a graph: look in the "
        "start-up log for a capture that failed or was skipped (gpudiag repro cuda-graph-crash --log FILE "
        "classifies it); eager decode also leaves speculation's draft and verify steps without graphs.",
    )
