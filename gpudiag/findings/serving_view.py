"""Each live server's own decode lines, read once (figures parsed on the host by probes/servingstats, stored per
server log): `ServerFigures` per live server, and the plain readings the serving findings, Q10 and the decode
analysis share — its window, buckets, graph state, eager lines and log cadence. No rule lives here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.findings.common import version_tuple
from gpudiag.findings.server_flags import (
    algorithm_of,
    decode_graph_switch,
    graph_max_bs,
    graphs_disabled,
    server_args,
    servers_of,
)
from gpudiag.findings.server_scope import server_label
from gpudiag.models import HostResult
from gpudiag.probe_view import as_dict, dig, probe
from probes.servingstats.buckets import BUCKET_NAMES


@dataclass(frozen=True)
class ServerFigures:
    """One live server and what its log window says (figures is None when no window was read: `why`)."""

    host: HostResult
    server: dict[str, Any]
    figures: dict[str, Any] | None
    why: str
    log_where: str
    endpoint: dict[str, Any]

    @property
    def algorithm(self) -> str:
        return algorithm_of(self.server)

    @property
    def draft_tokens(self) -> Any:
        return server_args(self.server).get("speculative_num_draft_tokens")

    @property
    def label(self) -> str:
        return server_label(self.server)

    @property
    def release(self) -> tuple[int, ...] | None:
        return version_tuple(dig(self.server, "sglang", "version")) or version_tuple(
            dig(probe(self.host, "sglang_source"), "version")
        )


def serving_figures(host: HostResult) -> list[ServerFigures]:
    """Every live server of the host with its log figures, or why there are none."""
    logs = as_dict(dig(probe(host, "deployment"), "server_logs"))
    endpoints = as_dict(dig(probe(host, "deployment"), "serving_endpoints"))
    out = []
    for server in servers_of(host):
        record = as_dict(logs.get(str(server.get("pid"))))
        where = str(as_dict(record.get("source")).get("where") or "")
        figures = as_dict(record.get("serving")) or None
        if not record:
            why = "its log was not looked for in this scan"
        elif record.get("source") is None:
            why = str(record.get("reason") or "log not found")
        elif figures is None:
            why = "the scan stored no serving figures for its log"
        elif not figures.get("decode_lines"):
            why, figures = f"no decode lines in the log window ({where})", None
        else:
            why = ""
        endpoint = as_dict(endpoints.get(str(server.get("pid"))))
        out.append(ServerFigures(host, server, figures, why, where, endpoint))
    return out


def endpoint_accept(item: ServerFigures) -> tuple[list[float], str]:
    """(per DP rank lifetime average accept length, where it came from) from the server's endpoints."""
    info = [v for v in item.endpoint.get("avg_spec_accept_length") or [] if isinstance(v, (int, float))]
    if info:
        return info, str(item.endpoint.get("info_route") or "/server_info")
    metric = as_dict(as_dict(item.endpoint.get("metrics")).get("spec_accept_length"))
    samples = [v for v in metric.get("samples") or [] if isinstance(v, (int, float))]
    return samples, "/metrics sglang:spec_accept_length" if samples else ""


def window_text(item: ServerFigures) -> str:
    figures = item.figures or {}
    span = f", {figures['first_ts']} to {figures['last_ts']}" if figures.get("first_ts") else ""
    return f"{figures.get('decode_lines', 0)} decode lines of {item.log_where or 'the log'}{span}"


def bucket_text(figures: dict[str, Any], limit: int = 9) -> str:
    """'1: 86.1 tok/s (accept 3.81); 128+: 1146 tok/s (accept 3.52)' from the steady medians; a bucket with lines
    but no figure says why, a figure resting on fewer than three lines says few-sample."""
    parts = []
    for name in BUCKET_NAMES:
        bucket = as_dict(as_dict(figures.get("buckets")).get(name))
        if not bucket:
            continue
        tput = bucket.get("median_gen_throughput")
        accept = bucket.get("median_accept_len")
        if isinstance(tput, (int, float)):
            text = f"{name}: {tput:g} tok/s" + (" few-sample" if bucket.get("few_sample") else "")
        else:
            text = f"{name}: no figure from {bucket.get('count', 0)} lines ({bucket.get('why') or 'no steady line'})"
        parts.append(text + (f" (accept {accept:.2f})" if isinstance(accept, (int, float)) else ""))
    return "; ".join(parts[:limit])


def _count(value: Any) -> int:
    """A count from host data: a non-negative int, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def graph_state(item: ServerFigures) -> tuple[str, str]:
    """('on' | 'off' | 'mixed' | 'unknown', what shows it): the flags first, then the server's own decode lines."""
    figures = item.figures or {}
    graph = as_dict(figures.get("graph"))
    on, off = _count(graph.get("true")), _count(graph.get("false"))
    lines = f"{off} of {on + off} decode lines say graph False" if on + off else "its lines do not say"
    disabled, flag = decode_graph_switch(server_args(item.server))
    if disabled:
        return "off", f"off ({flag}; {lines})"
    if on + off == 0:
        return ("on" if item.figures is not None else "unknown"), "on (the flags leave them on; " + lines + ")"
    if off and not on:
        return "off", f"off in the log ({lines}) though the flags leave them on"
    above = graph_max_bs(server_args(item.server))
    lowest_off = figures.get("graph_off_min_running")
    if off and not (above and isinstance(lowest_off, int) and lowest_off > above[0]):
        return "mixed", f"mixed ({lines})"
    return "on", f"on ({lines})"


def eager_lines(item: ServerFigures) -> tuple[int, str] | None:
    """(lines, a note) for decode lines above the largest captured batch size: sglang replays a graph only for a
    batch no larger than the largest size it captured, so these ran eagerly. The size is read from the log's own
    capture or server_args line when it has one, else from the flags; None when neither says or no line is above."""
    figures = item.figures or {}
    logged = as_dict(figures.get("eager_by_rule"))
    if logged:
        count, size, where = _count(logged.get("lines")), logged.get("max_bs"), str(logged.get("from"))
    else:
        flag = graph_max_bs(server_args(item.server))
        if flag is None:
            return None
        size, where = flag[0], flag[1]
        pairs = [p for p in figures.get("decode_running") or [] if isinstance(p, list) and len(p) == 2]
        count = sum(int(n) for r, n in pairs if isinstance(r, int) and isinstance(n, int) and r > size)
    if not count or graphs_disabled(server_args(item.server)):
        return None
    return count, (
        f"{count} of {figures.get('decode_lines')} decode lines ran above the largest captured batch size {size} "
        f"({where}): eager by sglang's rule (a graph replays only batches up to the largest size captured), so "
        "their throughput is eager decode's"
    )


def cadence_note(item: ServerFigures) -> str:
    """A note when the server's --decode-log-interval differs from the interval its idle lines were judged by
    (a log window without the launch line is judged at sglang's default); '' otherwise."""
    cadence = as_dict((item.figures or {}).get("cadence"))
    used, flag = cadence.get("decode_log_interval"), server_args(item.server).get("decode_log_interval")
    try:
        flag = int(flag) if flag not in (None, "", True, False) else None
    except (TypeError, ValueError):
        flag = None
    if not isinstance(used, int) or flag is None or flag == used:
        return ""
    return (
        f"{item.label}: its idle lines were judged at a line every {used} decode steps ({cadence.get('from')}) while "
        f"it runs with --decode-log-interval {flag}: the log window lacks its launch line"
    )


def disable_graph_flag(item: ServerFigures) -> str:
    """The release's switch for decode graphs: --disable-decode-cuda-graph from 0.5.14, --disable-cuda-graph before."""
    release = item.release
    return "--disable-decode-cuda-graph" if release is not None and release >= (0, 5, 14) else "--disable-cuda-graph"
