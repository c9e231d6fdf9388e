"""Results on disk: `reports/runs/<run-id>/run.json` and `hosts/<host>.json`, each written atomically, as
compact JSON.

run.json is written first, with every planned host; each host is then recorded by one line appended to the
run's journal (gpudiag/run_journal.py), and run.json is compacted from it when the run ends. So recording a
host costs O(1), and an interrupted, killed or crashed run keeps every finished host and reads as
incomplete. Temp files a killed run left are removed by the next run. `reports/latest` holds the newest run id.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import threading
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpudiag import __version__
from gpudiag.jsonfile import cycle_collector_paused, dumps_strict, object_with_spans, read_json
from gpudiag.models import NEVER_FINISHED, OK, RESULT_MISSING, UNREADABLE, HostResult, ProbeResult, safe_file_name
from gpudiag.schema import SchemaError
from gpudiag.run_records import LoadedRun, RunManifest, UnreadableFile
from gpudiag.probe_data import judged
from gpudiag.atomic_files import remove_stale_temp_files, write_text_atomic
from gpudiag.run_journal import HostJournal, merged_hosts, read_journal


class StoreError(Exception):
    """A run that cannot be found or read; the message names the path."""


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2)


def write_json_atomic(path: Path, doc: dict[str, Any]) -> None:
    """Compact JSON (no indent): a 10,000-host run writes and reads a third fewer bytes."""
    write_text_atomic(path, _compact(doc) + "\n")


def _compact(doc: dict[str, Any]) -> str:
    return dumps_strict(doc, separators=(",", ":"), sort_keys=True, default=str)


class RunWriter:
    """Writes one run as it happens; thread-safe (hosts finish on pool threads)."""

    def __init__(
        self,
        root: Path,
        kind: str,
        argv: list[str],
        extra: dict[str, Any] | None = None,
        run_id: str | None = None,
        mark_latest: bool = True,
        planned: list[str] | None = None,
    ):
        self.root = root
        self.run_id = run_id or new_run_id()
        self.dir = root / "runs" / self.run_id
        self.manifest = RunManifest(
            run_id=self.run_id,
            kind=kind,
            started_at=now_iso(),
            argv=tuple(argv),
            gpudiag_version=__version__,
            extra=dict(extra or {}),
            planned=tuple(planned) if planned is not None else None,
        )
        self.write_failures: list[str] = []  # hosts whose result could not be written
        remove_stale_temp_files(root)
        self._hosts: dict[str, dict[str, str]] = {}
        self._files: set[str] = set()  # casefolded: "GPU1" and "gpu1" are one file on macOS
        self._lock = threading.Lock()
        self._journal = HostJournal(self.dir)
        try:
            (self.dir / "hosts").mkdir(parents=True, exist_ok=True)
            self._write_manifest()
            if mark_latest:  # a run without hosts (a classified log) never becomes the default report
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
                self._hosts[result.name] = dict(entry, write_error=f"{path.name}: {_why(exc)}")
                self.write_failures.append(result.name)
                self._try_journal(self._hosts[result.name])
                raise StoreError(f"{path}: cannot write {result.name}'s result: {_why(exc)}") from None
            self._hosts[result.name] = dict(entry, file=file)
            self._journal_or_raise(self._hosts[result.name])
        return path

    def note_host(self, name: str, status: str, reason: str) -> None:
        """A host with no result document (interrupted before it finished)."""
        with self._lock:
            if name not in self._hosts:
                self._hosts[name] = {"name": name, "status": status, "reason": reason}
                self._journal_or_raise(self._hosts[name])

    def finish(
        self, interrupted: bool = False, extra: dict[str, Any] | None = None, signal: str | None = None
    ) -> RunManifest:
        """Raises StoreError when run.json cannot be written; `self.manifest` is complete either way."""
        with self._lock:
            merged = dict(self.manifest.extra)
            merged.update(extra or {})
            self.manifest = replace(
                self.manifest,
                finished_at=now_iso(),
                interrupted=interrupted,
                extra=merged,
                signal=signal if interrupted else None,
            )
            self._write_manifest_or_raise()
            self._journal.close_and_remove()  # run.json holds every entry now
        return self.manifest

    def _write_manifest(self) -> None:
        self.manifest = replace(self.manifest, hosts=tuple(self._hosts.values()))
        path = self.dir / "run.json"
        try:
            write_json_atomic(path, self.manifest.to_dict())
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            # A full disk has no room for the temp copy, but rewriting in place reuses run.json's own
            # blocks: the record of which hosts finished (and which could not be written) matters most now.
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(_compact(self.manifest.to_dict()) + "\n")
                fh.flush()
                os.fsync(fh.fileno())

    def _write_manifest_or_raise(self) -> None:
        try:
            self._write_manifest()
        except OSError as exc:
            raise StoreError(f"{self.dir / 'run.json'}: cannot write: {_why(exc)}") from None

    def _journal_or_raise(self, entry: dict[str, str]) -> None:
        try:
            self._journal.append(entry)
        except OSError as exc:
            raise StoreError(f"{self._journal.path}: cannot write: {_why(exc)}") from None

    def _try_journal(self, entry: dict[str, str]) -> None:
        try:
            self._journal.append(entry)
        except OSError:
            pass  # the caller reports the first failure; run.json lists the host when the run ends


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _failed_path(exc: OSError, default: Path) -> Path | str:
    return exc.filename if exc.filename else default


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
        raise StoreError(
            f"{spec}: no run there (expected a run directory with run.json, or a run id under {root / 'runs'})"
        )
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


def read_manifest(run_dir: Path) -> RunManifest:
    """run.json with the journal's host entries over its own: a run that never compacted it (killed, or
    still running) lists every host recorded so far."""
    try:
        manifest = RunManifest.from_dict(_read_json(run_dir / "run.json"), str(run_dir / "run.json"))
    except SchemaError as exc:
        raise StoreError(str(exc)) from None
    journal = read_journal(run_dir)
    return replace(manifest, hosts=merged_hosts(manifest.hosts, journal)) if journal else manifest


def load_run(run_dir: Path) -> LoadedRun:
    """The run as stored. Only an unreadable run.json is an error: a host file that is corrupt or stray
    is carried as unreadable, and a host with no file reads as never finished or result missing."""
    manifest = read_manifest(run_dir)
    by_file = {str(e.get("file")): str(e.get("name")) for e in manifest.hosts if e.get("file")}
    hosts: list[HostResult] = []
    unreadable: list[UnreadableFile] = []
    try:
        files = sorted(p for p in (run_dir / "hosts").iterdir() if not p.name.startswith("."))
    except OSError:
        files = []
    shared: dict[bytes, dict[str, ProbeResult]] = {}
    with cycle_collector_paused():
        for path in files:
            _load_host(path, by_file, hosts, unreadable, shared)
    have = {h.name for h in hosts}
    for entry in manifest.hosts:
        name = str(entry.get("name"))
        if name in have:
            continue
        have.add(name)
        status, reason = str(entry.get("status", "")), str(entry.get("reason", ""))
        if entry.get("write_error"):
            status, reason = RESULT_MISSING, f"the result could not be written: {entry['write_error']}"
        elif entry.get("file"):
            status, reason = RESULT_MISSING, f"hosts/{entry['file']}.json is missing (status was {status})"
        elif status == OK:  # an ok host always has a file: its absence is the fact to report
            status, reason = RESULT_MISSING, "run.json says ok, but no result file is stored"
        hosts.append(HostResult(name=name, status=status, reason=reason))
    for name in manifest.planned or ():
        if name not in have:
            have.add(name)
            hosts.append(
                HostResult(
                    name=name,
                    status=NEVER_FINISHED,
                    reason="planned, but run.json records no end for it: the run was "
                    "killed, could not write its records, or is still running"
                    if not manifest.finished_at
                    else "planned, but no result was recorded",
                )
            )
    hosts.sort(key=lambda h: h.name)
    return LoadedRun(path=run_dir, manifest=manifest, hosts=tuple(hosts), unreadable=tuple(unreadable))


def _load_host(
    path: Path,
    by_file: dict[str, str],
    hosts: list[HostResult],
    unreadable: list[UnreadableFile],
    shared: dict[bytes, dict[str, ProbeResult]],
) -> None:
    """One host file read into `hosts`, or carried as unreadable (and its owner so marked). Hosts whose probe
    data is the same text share one checked copy of it (`shared`, by a digest of that text): the copies of
    the others are dropped as they are read, so a fleet that agrees costs what one host does."""
    relative = f"hosts/{path.name}"
    owner = by_file.get(path.stem) if path.suffix == ".json" else None
    try:
        if path.suffix != ".json" or not path.is_file():
            raise StoreError("not a host result (only <host>.json files belong in hosts/)")
        doc, digest = _read_host_doc(path)
        known = shared.get(digest) if digest else None
        if known is not None:
            doc["probes"] = {}  # checked once already, as the same text
        result = HostResult.from_dict(doc, str(path))
        if owner is not None and result.name != owner:
            raise StoreError(f"names host {result.name!r}, but run.json gives this file to {owner!r}")
        if known is None:
            # Data that does not fit its probe's declaration is that probe's error, never the host's.
            known = judged(result.probes)
            if digest:
                shared[digest] = known
        hosts.append(replace(result, probes=known))
    except (StoreError, SchemaError) as exc:
        reason = str(exc).replace(str(path) + ": ", "").replace(str(path), relative)
        unreadable.append(UnreadableFile(relative, reason[:300], owner))
        if owner is not None:
            hosts.append(HostResult(name=owner, status=UNREADABLE, reason=f"{relative}: {reason[:300]}"))


def _read_host_doc(path: Path) -> tuple[dict[str, Any], bytes | None]:
    """The host document, and a digest of its probes' text (None when it has none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return _read_json(path), None  # names the error as every read does
    found = object_with_spans(text)
    if found is None:
        return _read_json(path), None  # not one JSON object: json.loads says where
    doc, spans = found
    if "probes" not in spans:
        return doc, None
    start, end = spans["probes"]
    return doc, hashlib.blake2b(text[start:end].encode("utf-8", "surrogatepass"), digest_size=20).digest()
