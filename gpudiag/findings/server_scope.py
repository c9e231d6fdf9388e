"""Which live server a fact describes, on hosts that run several (or whose `--python` is not the server's).

The sglang source facts and the torch facts are read in one interpreter per host; deployment's per-server
records carry each server's own interpreter and sglang release. These helpers name servers (pid, port, GPUs) and
say, for a fact read in one interpreter, which servers it describes and which it was not read for.
"""

from __future__ import annotations

from typing import Any

from gpudiag.probe_view import as_dict, as_list, dig, probe
from gpudiag.findings.facts import sglang_interpreter
from gpudiag.findings.server_flags import servers_of
from gpudiag.models import HostResult


def identity(server: dict[str, Any]) -> dict[str, Any]:
    """{pid, port, gpus}: the probe's `identity` record, else the same read from the server's flags."""
    found = as_dict(server.get("identity"))
    args = as_dict(server.get("args"))
    return {
        "pid": found.get("pid", server.get("pid")),
        "port": found.get("port", args.get("port")),
        "gpus": found.get("gpus", server.get("cuda_visible_devices")),
    }


def server_label(server: dict[str, Any]) -> str:
    """'server pid 12 (port 30000, GPUs 0,1)'; GPUs 'all' when CUDA_VISIBLE_DEVICES was not set."""
    ident = identity(server)
    parts = [f"port {ident['port']}"] if ident.get("port") not in (None, "") else []
    parts.append(f"GPUs {ident['gpus']}" if ident.get("gpus") not in (None, "") else "GPUs all")
    return f"server pid {ident.get('pid', '?')} ({', '.join(parts)})"


def release_of(server: dict[str, Any]) -> str:
    """'sglang 0.5.11' from the server's own record, or why its sglang is unknown."""
    sglang = as_dict(server.get("sglang"))
    if sglang.get("found"):
        return f"sglang {sglang.get('version') or '(version unknown)'}"
    if sglang.get("found") is False:
        return "no sglang found"
    return f"sglang not located ({sglang.get('reason') or 'not recorded'})"


def server_release(server: dict[str, Any]) -> str:
    """'sglang 0.5.11 in /venv/bin/python': the server's own release and interpreter."""
    return release_in(release_of(server), server.get("python"))


def release_in(release: str, python: Any) -> str:
    return f"{release} in {python or 'an unknown interpreter'}"


def several_servers(host: HostResult) -> bool:
    return len(servers_of(host)) > 1


def server_name(host: HostResult, server: dict[str, Any]) -> str:
    """How a finding names a server: pid, port and GPUs on a host with several, else just its pid."""
    return server_label(server) if several_servers(host) else f"server pid {server.get('pid', '?')}"


def unread_servers(host: HostResult) -> list[dict[str, Any]]:
    """Live servers whose interpreter is not the one sglang was read in, while that one is another live server's:
    their code was not read (deployment's per-server record still names their release)."""
    read = sglang_interpreter(host)
    if not read or not read_for_live_server(host, read[0]):
        return []
    return [s for s in servers_of(host) if s.get("python") and s.get("python") != read[0]]


def servers_read(host: HostResult) -> list[dict[str, Any]]:
    """The live servers the sglang source facts describe: rules built on those facts judge only these."""
    unread = unread_servers(host)
    return [s for s in servers_of(host) if s not in unread]


def split_by_interpreter(host: HostResult, python: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(servers running `python`, the others)."""
    servers = servers_of(host)
    return [s for s in servers if s.get("python") == python], [s for s in servers if s.get("python") != python]


def read_for_live_server(host: HostResult, python: str | None) -> bool:
    """Whether `python` (where facts were read) is a live server's interpreter on this host."""
    return bool(python) and any(s.get("python") == python for s in servers_of(host))


def explicit_python(host: HostResult) -> dict[str, Any] | None:
    """{path, differs_from_live: [interpreters]} when the scan's --python is not a live server's interpreter."""
    chosen = as_dict(dig(probe(host, "deployment"), "interpreter"))
    others = [str(o) for o in as_list(chosen.get("differs_from_live"))]
    if chosen.get("why") != "explicit" or not others:
        return None
    return {"path": chosen.get("path"), "differs_from_live": others}


def explicit_text(given: dict[str, Any]) -> str:
    return (
        f"--python {given['path']} differs from a live server's interpreter ({', '.join(given['differs_from_live'])})"
    )


def explicit_note(host: HostResult) -> str:
    """'--python P differs from a live server's interpreter (Q)' when the scan's --python is not a server's."""
    given = explicit_python(host)
    return explicit_text(given) if given else ""


def scope(host: HostResult, python: str | None, what: str) -> str:
    """For facts (`what`: 'sglang facts', 'torch facts') read in `python`: '' when every live server runs it (or
    none runs), else which servers they describe and, for each other one, 'not read for server pid N (…)' with
    that server's own interpreter and release."""
    servers = servers_of(host)
    if not python or not servers:
        return ""
    mine, others = split_by_interpreter(host, python)
    if not others:
        return f"{what} describe {', '.join(server_label(s) for s in mine)}" if len(mine) > 1 else ""
    described = f"{what} describe {python}" + (
        f", run by {', '.join(server_label(s) for s in mine)}"
        if mine
        else (" (given with --python; no live server runs it)" if explicit_note(host) else " (no live server runs it)")
    )
    missing = "; ".join(f"not read for {server_label(s)}, which runs {server_release(s)}" for s in others)
    return f"{described}; {missing}"
