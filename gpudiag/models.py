"""The data gpudiag passes around and stores, as frozen dataclasses with their dict form.

The JSON shape of every stored document lives here and nowhere else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

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


class SchemaError(ValueError):
    """A stored document this version cannot read."""


def check_schema(doc: dict[str, Any], what: str) -> None:
    """Refuse documents written by a newer major schema, with a message naming the document."""
    version = doc.get("schema")
    if not isinstance(version, int):
        raise SchemaError(f"{what}: no integer 'schema' field; not a gpudiag document")
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{what}: schema {version} is newer than this gpudiag reads ({SCHEMA_VERSION}); upgrade gpudiag"
        )


def _number(doc: dict[str, Any], key: str, what: str) -> float:
    """A numeric field (absent or null reads as 0); anything else is a SchemaError naming it."""
    value = doc.get(key)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(f"{what}: {key!r} is {_shown(value)}, not a number")
    return float(value)


def _typed(doc: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str, noun: str) -> Any:
    """A field that is absent, null, or of `kind`; anything else is a SchemaError naming it."""
    value = doc.get(key)
    if value is not None and not isinstance(value, kind):
        raise SchemaError(f"{what}: {key!r} is {_shown(value)}, not {noun}")
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


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

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "duration_s": round(self.duration_s, 4)}
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
            raise SchemaError(f"{what}: {_shown(doc)} is not a JSON object")
        status = doc.get("status", "error")
        if status not in PROBE_STATUSES:
            status = "error"
        reason = _typed(doc, "reason", str, what, "a string")
        return cls(
            status=status,
            duration_s=_number(doc, "duration_s", what),
            data=doc.get("data"),
            error=_typed(doc, "error", dict, what, "a JSON object"),
            reason=reason,
        )


def probes_from_dict(doc: dict[str, Any], what: str) -> dict[str, ProbeResult]:
    """The 'probes' object of a frame or stored host result; a wrong shape is a SchemaError."""
    probes = _typed(doc, "probes", dict, what, "a JSON object") or {}
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
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any], what: str = "host result") -> "HostResult":
        if not isinstance(doc, dict):
            raise SchemaError(f"{what}: not a JSON object")
        check_schema(doc, what)
        probes = probes_from_dict(doc, what)
        tail = _typed(doc, "output_tail", dict, what, "a JSON object")
        return cls(
            name=str(doc.get("name", "?")),
            status=str(doc.get("status", FRAME_ERROR)),
            reason=str(doc.get("reason", "")),
            address=str(doc.get("address", "")),
            transport=str(doc.get("transport", "")),
            python=str(doc.get("python", "")),
            duration_s=_number(doc, "duration_s", what),
            probes=probes,
            output_tail={str(k): str(v) for k, v in tail.items()} if tail else None,
        )


@dataclass(frozen=True)
class RunManifest:
    run_id: str
    kind: str  # scan | repro | ingest
    started_at: str
    finished_at: str | None = None
    interrupted: bool = False
    argv: tuple[str, ...] = ()
    gpudiag_version: str = ""
    hosts: tuple[dict[str, str], ...] = ()  # [{"name", "status", "reason"}]
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. ingest source, repro options
    planned: tuple[str, ...] | None = None  # every host the run set out to scan (None: an older run)
    signal: str | None = None  # the signal that ended the run: SIGINT, SIGTERM, SIGHUP

    def to_dict(self) -> dict[str, Any]:
        out = {
            "schema": SCHEMA_VERSION,
            "run_id": self.run_id,
            "kind": self.kind,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "interrupted": self.interrupted,
            "argv": list(self.argv),
            "gpudiag_version": self.gpudiag_version,
            "hosts": [dict(h) for h in self.hosts],
        }
        if self.planned is not None:
            out["planned"] = list(self.planned)
        if self.signal:
            out["signal"] = self.signal
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any], what: str = "run.json") -> "RunManifest":
        if not isinstance(doc, dict):
            raise SchemaError(f"{what}: not a JSON object")
        check_schema(doc, what)
        hosts = _typed(doc, "hosts", list, what, "a list") or []
        if not all(isinstance(h, dict) for h in hosts):
            raise SchemaError(f"{what}: 'hosts' holds an entry that is not a JSON object")
        argv = _typed(doc, "argv", list, what, "a list") or []
        planned = _typed(doc, "planned", list, what, "a list")
        signal_name = _typed(doc, "signal", str, what, "a string")
        known = {
            "schema",
            "run_id",
            "kind",
            "started_at",
            "finished_at",
            "interrupted",
            "argv",
            "gpudiag_version",
            "hosts",
            "planned",
            "signal",
        }
        return cls(
            run_id=str(doc.get("run_id", "")),
            kind=str(doc.get("kind", "scan")),
            started_at=str(doc.get("started_at", "")),
            finished_at=doc.get("finished_at"),
            interrupted=bool(doc.get("interrupted", False)),
            argv=tuple(str(a) for a in argv),
            gpudiag_version=str(doc.get("gpudiag_version", "")),
            hosts=tuple(dict(h) for h in hosts),
            extra={k: v for k, v in doc.items() if k not in known},
            planned=tuple(str(n) for n in planned) if planned is not None else None,
            signal=signal_name,
        )


SEVERITIES = ("critical", "error", "warning", "info")


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


@dataclass(frozen=True)
class UnreadableFile:
    """A file under hosts/ that could not be read as a host result, and why."""

    file: str  # relative to the run directory: "hosts/h0.json"
    reason: str
    host: str | None = None  # the host run.json names for it, when it names one

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "reason": self.reason, "host": self.host}


@dataclass(frozen=True)
class LoadedRun:
    """A stored run read back: its manifest and every host's result.

    Hosts whose result could not be read are still in `hosts`, with a status saying why (never_finished,
    result_missing, unreadable), so every renderer lists them; `unreadable` keeps the files' own reasons."""

    path: Path
    manifest: RunManifest
    hosts: tuple[HostResult, ...]
    unreadable: tuple[UnreadableFile, ...] = ()

    @property
    def never_finished(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hosts if h.status == NEVER_FINISHED)

    def problems(self) -> list[str]:
        """One line per way this run is not a whole, trustworthy record (empty when it is)."""
        lines = []
        planned = self.manifest.planned
        unfinished = self.never_finished
        if unfinished:
            total = len(planned) if planned is not None else len(self.hosts)
            lines.append(
                f"incomplete: {len(unfinished)} of {total} hosts never finished "
                f"({', '.join(unfinished[:10])}{' …' if len(unfinished) > 10 else ''}); the run was "
                f"killed, could not write its records, or is still running"
            )
        elif planned is not None and not self.manifest.finished_at:
            lines.append(
                "incomplete: run.json records no end for this run (killed, could not write its "
                "records, or still running)"
            )
        if self.manifest.interrupted:
            by = f" by {self.manifest.signal}" if self.manifest.signal else ""
            lines.append(f"interrupted{by}: hosts that had not finished are marked interrupted")
        for h in self.hosts:
            if h.status == RESULT_MISSING:
                lines.append(f"{h.name}: result missing ({h.reason})")
        for u in self.unreadable:
            lines.append(f"{u.file}: unreadable ({u.reason})")
        return lines
