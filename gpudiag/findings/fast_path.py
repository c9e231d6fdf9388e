"""An EAGLE server that sets the fill fast-path variable expecting faster replays from a definition that never
reads it."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.answers import FILL_FAST_PATH_ENV
from gpudiag.findings.common import source, truthy_flag
from gpudiag.probe_view import as_dict, as_list, dig, probe
from gpudiag.findings.server_flags import algorithm_of, eagle_family
from gpudiag.findings.server_scope import server_name, servers_read
from gpudiag.models import Evidence, Finding, HostResult


def _reads_variable(definition: dict[str, Any]) -> bool:
    return any(as_dict(p).get("env_var") == FILL_FAST_PATH_ENV for p in as_list(definition.get("fast_paths")))


def eagle_fill_fast_path_unread(hosts: list[HostResult]) -> list[Finding]:
    """EAGLE draft replays resolve to a _grouped_foreach_copy_ that does not read the variable the server sets."""
    findings = []
    for host in hosts:
        sglang = probe(host, "sglang_source") or {}
        definitions = {
            f"{d.get('file')}:{d.get('line')}": d
            for d in as_list(dig(sglang, "grouped_foreach_copy", "definitions"))
            if isinstance(d, dict)
        }
        targets = [
            as_dict(t)
            for key in ("draft", "draft_extend")
            for t in as_list(dig(sglang, "eagle", key, "grouped_resolves_to"))
        ]
        unread = [
            t
            for t in targets
            if f"{t.get('file')}:{t.get('line')}" in definitions
            and not _reads_variable(definitions[f"{t.get('file')}:{t.get('line')}"])
        ]
        for server in servers_read(host):  # the read release's replays: only its servers
            value = as_dict(server.get("env")).get(FILL_FAST_PATH_ENV)
            if not eagle_family(algorithm_of(server)) or value is None or not truthy_flag(value) or not unread:
                continue
            where = f"{unread[0].get('file')}:{unread[0].get('line')}"
            findings.append(
                Finding(
                    id="sglang.fill_fast_path_unread",
                    severity="warning",
                    title=f"{FILL_FAST_PATH_ENV}=1 does not reach the EAGLE draft replays",
                    hosts=(host.name,),
                    evidence=(
                        Evidence(
                            kind="flag",
                            host=host.name,
                            text=f"{server_name(host, server)} ({algorithm_of(server)}) sets "
                            f"{FILL_FAST_PATH_ENV}={value}; its draft replays call the "
                            f"_grouped_foreach_copy_ at {where}, which does not read it",
                            file=str(unread[0].get("file") or "") or None,
                            line=unread[0].get("line") if isinstance(unread[0].get("line"), int) else None,
                        ),
                    ),
                    recommendation="The variable only gates the target decode fill; expect no change in the EAGLE "
                    "draft and draft-extend replays from it (they use runner_utils/buffers.py).",
                    sources=(source(host, "sglang_source"), source(host, "deployment")),
                    action=f"Drop {FILL_FAST_PATH_ENV} from the EAGLE servers' environment, or expect it to speed "
                    "up the target decode fill only",
                )
            )
    return findings
