"""Results on disk: `reports/runs/<run-id>/run.json` and `hosts/<host>.json`, each written atomically.

A host's file is written the moment its result is known, and run.json is rewritten with it, so an
interrupted or crashed run keeps every finished host. `reports/latest` holds the newest run id.
"""
from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpudiag import __version__
from gpudiag.jsonfile import read_json
from gpudiag.models import HostResult, LoadedRun, RunManifest, SchemaError, safe_file_name
from gpudiag.probe_data import ProbeDataError, check_host_document


UNREADABLE = "unreadable"   # a stored host document whose probe data does not fit its declaration


class StoreError(Exception):
    """A run that cannot be found or read; the message names the path."""


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


def write_json_atomic(path: Path, doc: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")


class RunWriter:
    """Writes one run as it happens; thread-safe (hosts finish on pool threads)."""

    def __init__(self, root: Path, kind: str, argv: list[str], extra: dict[str, Any] | None = None,
                 run_id: str | None = None, mark_latest: bool = True):
        self.root = root
        self.run_id = run_id or new_run_id()
        self.dir = root / "runs" / self.run_id
        self.manifest = RunManifest(run_id=self.run_id, kind=kind, started_at=now_iso(), argv=tuple(argv),
                                    gpudiag_version=__version__, extra=dict(extra or {}))
        self._hosts: dict[str, dict[str, str]] = {}
        self._files: set[str] = set()     # casefolded: "GPU1" and "gpu1" are one file on macOS
        self._lock = threading.Lock()
        try:
            (self.dir / "hosts").mkdir(parents=True, exist_ok=True)
            self._write_manifest()
            if mark_latest:   # a run without hosts (a classified log) never becomes the default report
                write_text_atomic(root / "latest", self.run_id + "\n")
        except OSError as exc:
            raise StoreError(f"{_failed_path(exc, self.dir)}: cannot create the run: {_why(exc)}") from None

    def _file_for(self, name: str) -> str:
        base = safe_file_name(name)
        candidate, n = base, 2
        while candidate.casefold() in self._files:
            candidate, n = f"{base}-{n}", n + 1
        self._files.add(candidate.casefold())
        return candidate

    def write_host(self, result: HostResult) -> Path:
        """Raises StoreError when the file cannot be written; the host still counts in run.json."""
        with self._lock:
            file = self._hosts.get(result.name, {}).get("file") or self._file_for(result.name)
            path = self.dir / "hosts" / f"{file}.json"
            entry = {"name": result.name, "status": result.status, "reason": result.reason}
            try:
                write_json_atomic(path, result.to_dict())
            except OSError as exc:
                self._hosts[result.name] = entry
                self._try_manifest()
                raise StoreError(f"{path}: cannot write {result.name}'s result: {_why(exc)}") from None
            self._hosts[result.name] = dict(entry, file=file)
            self._write_manifest_or_raise()
        return path

    def note_host(self, name: str, status: str, reason: str) -> None:
        """A host with no result document (interrupted before it finished)."""
        with self._lock:
            if name not in self._hosts:
                self._hosts[name] = {"name": name, "status": status, "reason": reason}
                self._write_manifest_or_raise()

    def finish(self, interrupted: bool = False, extra: dict[str, Any] | None = None) -> RunManifest:
        """Raises StoreError when run.json cannot be written; `self.manifest` is complete either way."""
        with self._lock:
            merged = dict(self.manifest.extra)
            merged.update(extra or {})
            self.manifest = replace(self.manifest, finished_at=now_iso(), interrupted=interrupted, extra=merged)
            self._write_manifest_or_raise()
        return self.manifest

    def _write_manifest(self) -> None:
        self.manifest = replace(self.manifest, hosts=tuple(self._hosts.values()))
        write_json_atomic(self.dir / "run.json", self.manifest.to_dict())

    def _write_manifest_or_raise(self) -> None:
        try:
            self._write_manifest()
        except OSError as exc:
            raise StoreError(f"{self.dir / 'run.json'}: cannot write: {_why(exc)}") from None

    def _try_manifest(self) -> None:
        try:
            self._write_manifest()
        except OSError:
            pass  # the caller reports the first failure; run.json is retried on the next write


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _failed_path(exc: OSError, default: Path) -> Path | str:
    return exc.filename if exc.filename else default


def write_text_atomic(path: Path, text: str) -> None:
    """Write a temp file beside `path`, fsync it, rename it over: readers see the old or the new file,
    a crash leaves no half-written one and no temp file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def resolve_run_dir(spec: str | None, root: Path) -> Path:
    """A run directory from a path, a run id, or nothing (the latest run)."""
    if spec:
        candidate = Path(spec)
        if candidate.is_file() and candidate.name == "run.json":
            candidate = candidate.parent
        if (candidate / "run.json").is_file():
            return candidate
        by_id = root / "runs" / spec
        if (by_id / "run.json").is_file():
            return by_id
        raise StoreError(f"{spec}: no run there (expected a run directory with run.json, or a run id under "
                         f"{root / 'runs'})")
    latest = root / "latest"
    if not latest.is_file():
        raise StoreError(f"{latest}: no runs yet; run `gpudiag scan` first")
    run_id = latest.read_text(encoding="utf-8").strip()
    run_dir = root / "runs" / run_id
    if not (run_dir / "run.json").is_file():
        raise StoreError(f"{latest} names run {run_id!r}, but {run_dir / 'run.json'} does not exist")
    return run_dir


def _read_json(path: Path) -> dict[str, Any]:
    doc = read_json(path, StoreError)
    if not isinstance(doc, dict):
        raise StoreError(f"{path}: not a JSON object")
    return doc


def load_run(run_dir: Path) -> LoadedRun:
    try:
        manifest = RunManifest.from_dict(_read_json(run_dir / "run.json"), str(run_dir / "run.json"))
        hosts = []
        for path in sorted((run_dir / "hosts").glob("*.json")):
            doc = _read_json(path)
            host = HostResult.from_dict(doc, str(path))
            try:
                check_host_document(doc, str(path))
            except ProbeDataError as exc:   # data that does not fit its probe's declaration is not guessed at
                host = HostResult(name=host.name, status=UNREADABLE, reason=str(exc))
            hosts.append(host)
    except SchemaError as exc:
        raise StoreError(str(exc)) from None
    # Hosts named in run.json without a document (interrupted) still appear, as data.
    have = {h.name for h in hosts}
    for entry in manifest.hosts:
        if entry.get("name") not in have:
            hosts.append(HostResult(name=str(entry.get("name")), status=str(entry.get("status", "")),
                                    reason=str(entry.get("reason", ""))))
    hosts.sort(key=lambda h: h.name)
    return LoadedRun(path=run_dir, manifest=manifest, hosts=tuple(hosts))
