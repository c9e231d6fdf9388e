"""Answers about the live servers: whether each runs what is on disk (Q8) and what is serving now (Q9), each with
one record per server in its value and its sentence rendered from it (q8_text, q9_text); and the sglang answers'
closing scope clause."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Callable

from gpudiag.findings.answers import (
    ANSWERED,
    NOT_CHECKED,
    PARTIAL,
    Answer,
    _not_checked,
    _sglang_gap,
    probe_gap,
)
from gpudiag.probe_view import as_dict, as_list, dig, probe
from gpudiag.findings.facts import sglang_interpreter
from gpudiag.findings.server_flags import algorithm_of, decode_graph_switch, graph_max_bs, server_args, servers_of
from gpudiag.findings.server_scope import (
    explicit_python,
    explicit_text,
    identity,
    release_in,
    release_of,
    scope,
    server_label,
    several_servers,
    unread_servers,
)
from gpudiag.models import HostResult

# The flags the source probe records (graphs and speculative decoding): only these can be checked against the
# release; the same pattern as probes/sglang_facts/flags.py.
RECORDED_FLAGS = re.compile(
    r"cuda[-_]?graph|cudagraph|graph|speculative|spec[-_]|draft|eagle|dflash|breakable|"
    r"piecewise",
    re.I,
)


def with_sglang_scope(host: HostResult, answer: Answer) -> Answer:
    """The answer, ending with which servers the sglang facts describe when a host runs several releases or
    interpreters (`not read for server pid N (…)` for the others); its value says the same as `scope`, so the
    sentence still renders from it."""
    read = sglang_interpreter(host)
    said = scope(host, read[0] if read else None, "sglang facts")
    if not said:
        return answer
    value = dict(answer.value, scope=said) if isinstance(answer.value, dict) else answer.value
    return replace(answer, text=f"{answer.text}; {said}", value=value)


def live_mismatches(host: HostResult) -> list[tuple[dict[str, Any], list[str], tuple[int, int]]]:
    """Per live server whose code was read (or that runs an interpreter no read fact describes): (server, what
    differs from the code on disk, (flags checked, flags on its command line)). A flag counts as unknown only among those the source probe
    records (graphs, speculative decoding); [] when sglang was not read."""
    known = {
        str(f.get("name")) for f in as_list(dig(probe(host, "sglang_source"), "server_flags")) if isinstance(f, dict)
    }
    read = sglang_interpreter(host)
    unread = unread_servers(host)
    out = []
    for server in servers_of(host):
        if server in unread:
            continue
        words = [str(w) for w in as_list(server.get("cmdline"))]
        flags = sorted({w.split("=", 1)[0] for w in words if w.startswith("--")})
        compared = [f for f in flags if known and RECORDED_FLAGS.search(f)]  # the flags the source records
        unknown = [f for f in compared if f not in known]
        python = str(server.get("python") or "?")
        notes = []
        if unknown:
            notes.append(f"flags not in the installed release: {', '.join(unknown)}")
        if read and server.get("python") and python != read[0]:
            notes.append(f"runs {python}, sglang was read from {read[0]}")
        out.append((server, notes, (len(compared), len(flags))))
    return out


def _flags_checked(compared: int, total: int) -> str:
    """'the 3 graph and speculative flags of its 9 exist in the release': what was checked, out of how many."""
    if compared == total:
        return f"all {total} flags exist in the release"
    return f"the {compared} graph and speculative flags of its {total} exist in the release (the others not checked)"


def _sglang_record(server: dict[str, Any]) -> dict[str, Any]:
    """The server's own sglang as deployment recorded it: {found, version, reason}."""
    return {k: as_dict(server.get("sglang")).get(k) for k in ("found", "version", "reason")}


def q8_value(host: HostResult) -> dict[str, Any]:
    """Per live server whose code was read: the flags compared and what differs; the servers not read."""
    named = several_servers(host) or bool(explicit_python(host))
    compared = [
        {
            "server": server_label(server) if named else f"pid {server.get('pid')}",
            "pid": server.get("pid"),
            "python": server.get("python"),
            "flags_checked": checked[0],
            "flags_total": checked[1],
            "differs": notes,
        }
        for server, notes, checked in live_mismatches(host)
    ]
    unread = unread_servers(host)
    return {
        "servers": compared,
        "not_read": [s.get("pid") for s in unread],
        "unread": [{"server": server_label(s), "python": s.get("python"), "sglang": _sglang_record(s)} for s in unread],
        "release_flags_read": bool(as_list(dig(probe(host, "sglang_source"), "server_flags"))),
        "python_given": explicit_python(host),
    }


def q8_text(value: dict[str, Any]) -> str:
    """Q8's sentence, from its value: one clause per live server, read or not."""
    if not value.get("servers") and not value.get("unread"):
        return "no live sglang server to compare"
    parts = [
        f"{s['server']}: "
        + (
            "; ".join(s["differs"])
            if s["differs"]
            # the path itself is Q1's and Q9's to state: said once per host is enough
            else f"{_flags_checked(s['flags_checked'], s['flags_total'])}, its interpreter is the one whose sglang was read"
        )
        for s in value["servers"]
    ]
    parts += [
        f"{u['server']}: not checked — sglang not read for it (it runs "
        f"{release_in(release_of(u), u['python'])}; rescan with --python {u['python']})"
        for u in value["unread"]
    ]
    if value.get("python_given"):
        parts.append(explicit_text(value["python_given"]) + ": the facts describe --python")
    if not value["release_flags_read"]:
        return "; ".join(parts) + "; server flags of the release not read"
    differs = any(s["differs"] for s in value["servers"])
    return "; ".join(parts) + ("" if differs else "; file changes since start not recorded")


def q8_live_matches_disk(host: HostResult) -> Answer:
    gap = probe_gap(host, "deployment", "--probes deployment")
    if gap:
        return _not_checked("Q8", gap)
    if not servers_of(host):
        value: dict[str, Any] = {"servers": [], "not_read": [], "unread": []}
        return Answer("Q8", ANSWERED, q8_text(value), "gpudiag scan HOST", value)
    gap = _sglang_gap(host)
    if gap:
        return _not_checked("Q8", gap)
    value = q8_value(host)
    status = PARTIAL if value["unread"] or not value["release_flags_read"] else ANSWERED
    return Answer("Q8", status, q8_text(value), "gpudiag scan HOST", value)


def _server_value(server: dict[str, Any], several: bool) -> dict[str, Any]:
    """One live server as its command line and deployment record say: speculation, graphs, TP, GPUs, release."""
    args = server_args(server)
    disabled, switch = decode_graph_switch(args)
    max_bs = graph_max_bs(args)
    return {
        "server": server_label(server) if several else f"pid {server.get('pid')}",
        "pid": server.get("pid"),
        "port": identity(server)["port"],
        "algorithm": algorithm_of(server) or None,
        "draft_tokens": args.get("speculative_num_draft_tokens") or None,
        "cuda_graphs": "off" if disabled else "on",
        "graphs_off_by": switch if disabled else None,
        "graph_max_bs": max_bs[0] if max_bs and not disabled else None,
        "max_bs_from": max_bs[1] if max_bs and not disabled else None,
        "tp_size": args.get("tp_size") or 1,
        "gpus": server.get("cuda_visible_devices") or None,
        "python": server.get("python") or None,
        "sglang": _sglang_record(server),
    }


def q9_text(value: dict[str, Any]) -> str:
    """Q9's sentence, from its value: one clause per live server."""
    if not value.get("servers"):
        return "no sglang server running"
    parts = []
    for s in value["servers"]:
        graphs = (
            "off"
            if s["cuda_graphs"] == "off"
            else (f"max bs {s['graph_max_bs']}" if s["graph_max_bs"] else "default sizes")
        )
        runs = release_in(release_of(s), s["python"]) if value.get("several") else (s["python"] or "?")
        parts.append(
            f"{s['server']}: {s['algorithm'] or 'no speculative decoding'}, draft tokens "
            f"{s['draft_tokens'] or '-'}, CUDA graphs {graphs}, TP {s['tp_size']}, GPUs {s['gpus'] or 'all'}, {runs}"
        )
    if value.get("python_given"):
        parts.append(
            explicit_text(value["python_given"])
            + ": torch and sglang facts describe --python, each server's own is named here"
        )
    return "; ".join(parts)


def q9_serving(host: HostResult) -> Answer:
    gap = probe_gap(host, "deployment", "--probes deployment")
    if gap:
        return _not_checked("Q9", gap)
    servers = servers_of(host)
    several = len(servers) > 1
    value = {
        "servers": [_server_value(s, several) for s in servers],
        "several": several,
        "python_given": explicit_python(host) if servers else None,
    }
    return Answer("Q9", ANSWERED, q9_text(value), "gpudiag scan HOST", value)


def sglang_scoped(answerer: Callable[[HostResult], Answer]) -> Callable[[HostResult], Answer]:
    """An answer from the sglang source facts, saying which servers it describes when that is not all of them."""

    def answer(host: HostResult) -> Answer:
        found = answerer(host)
        return found if found.status == NOT_CHECKED else with_sglang_scope(host, found)

    return answer
