"""A run's own record: run.json's manifest, and a stored run read back with every host's result.

The JSON shape of run.json lives here (the host results' shape in models.py); store.py writes and reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudiag.models import NEVER_FINISHED, RESULT_MISSING, HostResult
from gpudiag.schema import SCHEMA_VERSION, SchemaError, check_schema, typed_field


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
        check_schema(doc, what)
        hosts = typed_field(doc, "hosts", list, what, "a list") or []
        if not all(isinstance(h, dict) for h in hosts):
            raise SchemaError(f"{what}: 'hosts' holds an entry that is not a JSON object")
        argv = typed_field(doc, "argv", list, what, "a list") or []
        planned = typed_field(doc, "planned", list, what, "a list")
        signal_name = typed_field(doc, "signal", str, what, "a string")
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
