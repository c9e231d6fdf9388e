"""The data gpudiag passes around and stores, as frozen dataclasses with their dict form: hosts, what a command
gave back, probe and host results, findings.

The JSON shape of a host's result lives here; run.json's lives in run_records.py, and the typed reading of
both in schema.py. DESIGN.md keeps RunManifest here too ("JSON shape lives here only"): it moved to
run_records.py with LoadedRun so this module stays one job (the results) under 300 lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from gpudiag.schema import SCHEMA_VERSION, SchemaError, check_schema, number_field, shown, typed_field
from gpudiag.ssh_options import SshOptions

# Host statuses: every host of a run ends with exactly one of these.
OK = "ok"
UNREACHABLE = "unreachable"
TIMEOUT = "timeout"
AUTH_FAILED = "auth_failed"
HOST_KEY_UNKNOWN = "host_key_unknown"
HOST_KEY_CHANGED = "host_key_changed"
HOST_KEY_REVOKED = "host_key_revoked"  # the key is on a @revoked known_hosts line: never accepted
PYTHON_MISSING = "python_missing"
FRAME_ERROR = "frame_error"
PROBE_ERROR = "probe_error"
PROBE_KILLED = "probe_killed"  # the probe process died of a signal on the host (SIGKILL, SIGSEGV, the OOM killer)
INTERRUPTED = "interrupted"  # the run was stopped (Ctrl-C, SIGTERM, SIGHUP) before this host finished
INTERNAL_ERROR = "internal_error"  # a gpudiag bug while handling this host (exit 70)
# Statuses only a stored run read back can have: the host's result is not there to read.
NEVER_FINISHED = "never_finished"  # planned in run.json, no result: the run was killed (-9, OOM) or is running
RESULT_MISSING = "result_missing"  # run.json lists a result whose file is gone or could not be written
UNREADABLE = "unreadable"  # a file in hosts/ that is corrupt, of another shape, or not a host result

PROBE_STATUSES = ("ok", "error", "timeout", "skipped")

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._@+-]")


def safe_file_name(name: str) -> str:
    """A host name usable as a file name: no '/', no leading dot, nothing a shell would mind."""
    cleaned = _SAFE_NAME.sub("_", name).lstrip(".") or "host"
    return cleaned[:120]


@dataclass(frozen=True)
class Host:
    """One target, fully resolved: where it is and how to reach it."""

    name: str
    address: str = "localhost"
    transport: str = "local"  # local | ssh
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    python: str = "python3"
    python_explicit: bool = False  # given by --python or the inventory, not defaulted
    container: str | None = None  # e.g. "docker:sglang", "podman:sglang", "kubectl:pod-name"
    jump: str | None = None  # ProxyJump spec: [user@]host[:port]
    server_log: str | None = None  # the live server's log: a path, journal:UNIT or docker:NAME (inventory)
    groups: tuple[str, ...] = ()
    source: str = ""  # where this host was defined (file:line or "command line")
    vars: tuple[tuple[str, Any], ...] = ()
    skip_reason: str | None = None  # not scanned: it cannot be reached correctly (inventory setting)
    ssh: SshOptions | None = None  # what its ssh config decides beyond the address (ssh -G only)

    def with_(self, **changes: Any) -> "Host":
        return replace(self, **changes)

    def describe_route(self) -> str:
        """How this host is reached, in one line (for `gpudiag hosts`)."""
        if self.transport == "local":
            route = "local child process"
        else:
            who = f"{self.user}@" if self.user else ""
            port = f":{self.port}" if self.port else ""
            addr = f"[{self.address}]" if self.port and ":" in self.address else self.address
            route = f"ssh {who}{addr}{port}"
            if self.jump:
                route += f" via {self.jump}"
        if self.container:
            route += f" → {self.container.replace(':', ' exec ', 1)}"
        return route

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": self.address,
            "transport": self.transport,
            "user": self.user,
            "port": self.port,
            "identity_file": self.identity_file,
            "python": self.python,
            "python_explicit": self.python_explicit,
            "container": self.container,
            "jump": self.jump,
            "server_log": self.server_log,
            "groups": list(self.groups),
            "source": self.source,
        }


@dataclass(frozen=True)
class CommandResult:
    """What one command run through a transport gave back."""

    exit_code: int | None  # None when killed for the deadline
    stdout: bytes
    stderr: bytes
    duration_s: float
    timed_out: bool = False
    overflow: str | None = None  # "output exceeded N MiB": the command was closed at the cap
    signal: str | None = None  # the signal that killed the command on the host ("SIGKILL"); exit_code is None
    core_dumped: bool = False


@dataclass(frozen=True)
class ProbeResult:
    status: str  # ok | error | timeout | skipped
    duration_s: float = 0.0
    data: Any = None
    error: dict[str, Any] | None = None
    reason: str | None = None
    # The limit the host's runner gave the probe when it started and the one it declares (probes/timeshare.py).
    limit_s: float | None = None
    declared_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "duration_s": round(self.duration_s, 4)}
        for key, value in (("limit_s", self.limit_s), ("declared_s", self.declared_s)):
            if value is not None:
                out[key] = value
        if self.status == "ok":
            out["data"] = self.data
        elif self.status == "error":
            out["error"] = self.error or {}
        else:
            out["reason"] = self.reason or ""
            if self.data is not None:
                out["data"] = self.data
        return out

    @classmethod
    def from_dict(cls, doc: Any, what: str = "probe result") -> "ProbeResult":
        """Raises SchemaError when a field has the wrong type; an unknown status reads as an error."""
        if not isinstance(doc, dict):
            raise SchemaError(f"{what}: {shown(doc)} is not a JSON object")
        status = doc.get("status", "error")
        if status not in PROBE_STATUSES:
            status = "error"
        reason = typed_field(doc, "reason", str, what, "a string")
        return cls(
            status=status,
            duration_s=number_field(doc, "duration_s", what),
            data=doc.get("data"),
            error=typed_field(doc, "error", dict, what, "a JSON object"),
            reason=reason,
            limit_s=_seconds(doc.get("limit_s")),
            declared_s=_seconds(doc.get("declared_s")),
        )


def _seconds(value: Any) -> float | None:
    """A limit the runner reported, or None when absent or not a number (an older runner sends none)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def probes_from_dict(doc: dict[str, Any], what: str) -> dict[str, ProbeResult]:
    """The 'probes' object of a frame or stored host result; a wrong shape is a SchemaError."""
    probes = typed_field(doc, "probes", dict, what, "a JSON object") or {}
    return {str(name): ProbeResult.from_dict(p, f"{what}: probe {name}") for name, p in probes.items()}


@dataclass(frozen=True)
class HostResult:
    name: str
    status: str
    reason: str = ""
    address: str = ""
    transport: str = ""
    python: str = ""
    duration_s: float = 0.0
    probes: dict[str, ProbeResult] = field(default_factory=dict)
    output_tail: dict[str, str] | None = None  # kept when the output could not be read
    # After a SIGKILL: what the kernel's log says of it (gpudiag/oom_check.py), e.g. {"verdict": "confirmed", ...}
    oom: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK

    def probe_data(self, probe: str) -> Any:
        """The probe's data when it ran ok, else None: what findings read."""
        result = self.probes.get(probe)
        return result.data if result is not None and result.status == "ok" else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "name": self.name,
            "address": self.address,
            "transport": self.transport,
            "python": self.python,
            "status": self.status,
            "reason": self.reason,
            "duration_s": round(self.duration_s, 3),
            "probes": {k: v.to_dict() for k, v in self.probes.items()},
        }
        if self.output_tail:
            out["output_tail"] = self.output_tail
        if self.oom is not None:
            out["oom"] = self.oom
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any], what: str = "host result") -> "HostResult":
        check_schema(doc, what)
        probes = probes_from_dict(doc, what)
        tail = typed_field(doc, "output_tail", dict, what, "a JSON object")
        return cls(
            name=str(doc.get("name", "?")),
            status=str(doc.get("status", FRAME_ERROR)),
            reason=str(doc.get("reason", "")),
            address=str(doc.get("address", "")),
            transport=str(doc.get("transport", "")),
            python=str(doc.get("python", "")),
            duration_s=number_field(doc, "duration_s", what),
            probes=probes,
            output_tail={str(k): str(v) for k, v in tail.items()} if tail else None,
            oom=typed_field(doc, "oom", dict, what, "a JSON object"),
        )


SEVERITIES = ("critical", "error", "warning", "info")
SEVERITY_RANK = {severity: rank for rank, severity in enumerate(SEVERITIES)}  # 0 is the worst


@dataclass(frozen=True)
class Evidence:
    """One concrete fact behind a finding: a source line, a measurement, a flag."""

    kind: str  # source | measurement | flag | status | text
    text: str  # one line a human reads
    host: str | None = None
    file: str | None = None
    line: int | None = None
    snippet: str | None = None
    table: tuple[tuple[str, ...], ...] | None = None  # first row is the header

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "text": self.text}
        for key in ("host", "file", "line", "snippet"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.table is not None:
            out["table"] = [list(r) for r in self.table]
        return out


@dataclass(frozen=True)
class Finding:
    id: str  # stable rule id, e.g. "copies.no_foreach_copy"
    severity: str  # critical | error | warning | info
    title: str
    hosts: tuple[str, ...]
    evidence: tuple[Evidence, ...]
    recommendation: str
    sources: tuple[str, ...] = ()  # result paths it came from: "<host>/probes/<probe>"
    # The measured saving its recommendation claims, µs per decode step (gpudiag.findings.savings); None when
    # nothing was measured. Next steps rank by it; no renderer reads a number out of the text.
    saving_us_per_step: float | None = None
    # The one thing to do, in one line (a command, a flag, an upgrade): what Next steps lists. Empty for findings
    # that only inform.
    action: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "hosts": list(self.hosts),
            "evidence": [e.to_dict() for e in self.evidence],
            "recommendation": self.recommendation,
            "sources": list(self.sources),
            "saving_us_per_step": self.saving_us_per_step,
            "action": self.action,
        }
