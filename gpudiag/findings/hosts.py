"""Hosts that could not be scanned (or only in part), with their status and reason."""

from __future__ import annotations

from gpudiag.probe_view import as_dict
from gpudiag.models import INTERRUPTED, OK, PROBE_ERROR, Evidence, Finding, HostResult

SEVERITY = {PROBE_ERROR: "warning", INTERRUPTED: "warning"}  # everything else: the host gave nothing


def unscanned_hosts(hosts: list[HostResult]) -> list[Finding]:
    """Rule 9: one finding per host whose status is not ok."""
    findings = []
    for host in hosts:
        if host.status == OK:
            continue
        evidence = [
            Evidence(kind="status", host=host.name, text=f"status {host.status}: {host.reason or 'no reason recorded'}")
        ]
        failed = [(name, p) for name, p in sorted(host.probes.items()) if p.status != "ok"]
        if failed:
            rows = (("probe", "status", "why"),) + tuple(
                (name, p.status, p.reason or _error_line(p.error)) for name, p in failed
            )
            evidence.append(
                Evidence(
                    kind="status",
                    host=host.name,
                    table=rows,
                    text=f"{len(failed)} of {len(host.probes)} probes did not return data",
                )
            )
        partial = host.status in SEVERITY
        findings.append(
            Finding(
                id="hosts.unscanned" if not partial else "hosts.partial",
                severity=SEVERITY.get(host.status, "error"),
                title=f"{'scanned in part' if partial else 'could not be scanned'} ({host.status})",
                hosts=(host.name,),
                evidence=tuple(evidence),
                recommendation=_advice_for(host),
                sources=(f"{host.name}",),
                action=_advice_for(host),
            )
        )
    return findings


def _error_line(error: object) -> str:
    error = as_dict(error)
    return f"{error.get('type', 'error')}: {error.get('message', '')}".strip()


# A killed host whose kernel log was read: the advice follows what it said, never "look at the log" again.
_OOM_ADVICE = {
    "confirmed": "The kernel's OOM killer ended the probes (the reason names the process and its memory): rescan "
    "with fewer probes, or when the host's memory is not taken by its server.",
    "not_found": "The kernel log records no OOM kill of the probes: something else sent SIGKILL (a scheduler's "
    "memory or time limit, a watchdog, a person); look there, then rescan the host.",
}


def _advice_for(host: HostResult) -> str:
    verdict = (host.oom or {}).get("verdict")
    if isinstance(verdict, str) and verdict in _OOM_ADVICE:
        return _OOM_ADVICE[verdict]
    return _advice(host.status)


def _advice(status: str) -> str:
    return {
        "unreachable": "Check the address, port and network path (ProxyJump) with `ssh -v`, then rescan the host.",
        "timeout": "The host did not answer within the deadline: raise --timeout, or look for a hung nvidia-smi.",
        "auth_failed": "Check the user and key (`ansible_user`, `ansible_ssh_private_key_file`) for this host.",
        "host_key_unknown": "Verify the host key, then rescan with --accept-new to record it.",
        "host_key_changed": "The host key changed: verify the host before trusting it, then update known_hosts.",
        "python_missing": "Point gpudiag at the host's interpreter with --python (the venv that serves sglang).",
        "frame_error": "The probe output could not be read: see the output tails in the host result.",
        # A rescan repeats a kill that has a cause on the host: the reason names the signal to look into.
        "probe_killed": "The probes were killed on the host (the reason names the signal): for SIGKILL check the "
        "kernel log for the OOM killer (`dmesg`, `journalctl -k`), then rescan with fewer probes or --forks.",
        PROBE_ERROR: "Some probes failed; the table names each with its error. The other probes' findings stand.",
        INTERRUPTED: "The run was stopped before this host finished: rescan it.",
        # A bug in gpudiag repeats on a rescan: the traceback is what helps.
        "internal_error": "A gpudiag bug: rerun with GPUDIAG_DEBUG=1 for the traceback and report it with the "
        "host's result file; a plain rescan repeats it.",
    }.get(status, "Rescan the host; the stored reason says what went wrong.")
