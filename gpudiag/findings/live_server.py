"""A live server that is not running the code on disk: flags the installed release does not have, or an
interpreter other than the one whose sglang was read. On a host with several servers under different
interpreters, the servers whose code was not read are named, with their own release."""

from __future__ import annotations

from gpudiag.findings.answers_live import live_mismatches
from gpudiag.findings.common import source
from gpudiag.findings.facts import sglang_interpreter
from gpudiag.findings.server_flags import command_line
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
                    recommendation=_not_on_disk_advice(host, server, read),
                    sources=(source(host, "deployment"), source(host, "sglang_source")),
                    action=_not_on_disk_action(host, server, read),
                )
            )
        findings += _not_read(host, read[0] if read else "-")
    return findings


def _other_interpreter(server: dict, read: tuple[str, str] | None) -> bool:
    return bool(read and server.get("python") and server.get("python") != read[0])


def _not_on_disk_advice(host: HostResult, server: dict, read: tuple[str, str] | None) -> str:
    """Rescanning with --python helps only when the server runs another interpreter than the one read; a server
    whose flags the read release lacks runs other code than the install, and a rescan would read the same."""
    if _other_interpreter(server, read):
        return (
            "The source facts describe the sglang of another interpreter than the one this server runs: rescan "
            "with `--python` set to the server's interpreter (in the evidence) so the facts describe its code."
        )
    return (
        "The server was started from other code than the installed release (a rescan reads the same files): "
        "restart it from the installed release, or install the release it was started from."
    )


def _not_on_disk_action(host: HostResult, server: dict, read: tuple[str, str] | None) -> str:
    if _other_interpreter(server, read):
        return f"Rescan with `--python {server.get('python')}`, the server's interpreter"
    return "Restart the server from the installed sglang release"


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
                recommendation="Rescan with `--python` set to that server's interpreter (in the evidence) to read the "
                "code it runs (its copy paths, EAGLE and DFlash facts, integrity).",
                action=f"Rescan with `--python {server.get('python') or 'PYTHON'}` to read that server's code",
                sources=(source(host, "deployment"), source(host, "sglang_source")),
            )
        )
    return findings
