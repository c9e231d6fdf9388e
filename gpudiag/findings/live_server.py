"""A live server that is not running the code on disk: flags the installed release does not have, or an
interpreter other than the one whose sglang was read. On a host with several servers under different
interpreters, the servers whose code was not read are named, with their own release."""

from __future__ import annotations

from gpudiag.findings.answers_live import live_mismatches
from gpudiag.findings.common import source
from gpudiag.findings.facts import command_line, sglang_interpreter
from gpudiag.findings.server_scope import server_label, server_release, unread_servers
from gpudiag.models import Evidence, Finding, HostResult


def server_not_on_disk(hosts: list[HostResult]) -> list[Finding]:
    """Rule 13: what the server runs and what gpudiag read differ, so the source facts may not describe it."""
    findings = []
    for host in hosts:
        read = sglang_interpreter(host)
        for server, notes, _ in live_mismatches(host):
            if not notes:
                continue
            label = server_label(server)
            findings.append(
                Finding(
                    id="sglang.server_not_on_disk",
                    severity="warning",
                    title="the running server is not running the code on disk",
                    hosts=(host.name,),
                    evidence=tuple(
                        Evidence(
                            kind="flag", host=host.name, text=f"{label}: {note}", snippet=command_line(server) or None
                        )
                        for note in notes[:1]
                    )
                    + tuple(Evidence(kind="flag", host=host.name, text=f"{label}: {note}") for note in notes[1:]),
                    recommendation="The source facts describe "
                    + (f"the sglang installed for {read[0]}" if read else "the installed sglang")
                    + ", not what this server loaded: restart the server from the installed release, or "
                    f"rescan these hosts with `gpudiag scan --python {server.get('python') or 'PYTHON'}` "
                    "so the facts describe the interpreter it runs.",
                    sources=(source(host, "deployment"), source(host, "sglang_source")),
                )
            )
        findings += _not_read(host, read[0] if read else "-")
    return findings


def _not_read(host: HostResult, read: str) -> list[Finding]:
    """One info finding per server whose sglang source facts were not read (another live server's were)."""
    findings = []
    for server in unread_servers(host):
        label = server_label(server)
        findings.append(
            Finding(
                id="sglang.server_not_read",
                severity="info",
                title="sglang source facts not read for one of several live servers",
                hosts=(host.name,),
                evidence=(
                    Evidence(
                        kind="flag",
                        host=host.name,
                        text=f"{label} runs {server_release(server)}; the source facts describe {read}",
                        snippet=command_line(server) or None,
                    ),
                ),
                recommendation=f"Rescan these hosts with `gpudiag scan --python {server.get('python') or 'PYTHON'}` to "
                "read the code that server runs (its copy paths, EAGLE and DFlash facts, integrity).",
                sources=(source(host, "deployment"), source(host, "sglang_source")),
            )
        )
    return findings
