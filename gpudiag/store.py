"""Results on disk: `reports/runs/<run-id>/run.json` and `hosts/<host>.json`, each written atomically, as
compact JSON.

run.json is written first, with every planned host; each host is then recorded by one line appended to the
run's journal (gpudiag/run_journal.py), and run.json is compacted from it when the run ends. So recording a
host costs O(1), and an interrupted, killed or crashed run keeps every finished host and reads as
incomplete. Temp files a killed run left are removed by the next run. `reports/latest` holds the newest run id.
A stored run is read back by gpudiag/run_loader.py.
"""

from __future__ import annotations

import errno
import os
import secrets
import threading
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpudiag import __version__
from gpudiag.jsonfile import dumps_strict
from gpudiag.models import HostResult, safe_file_name
from gpudiag.run_records import RunManifest
from gpudiag.atomic_files import remove_stale_temp_files, write_text_atomic
from gpudiag.run_journal import HostJournal


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
        return self.write_host_text(result)[0]

    def write_host_text(self, result: HostResult) -> tuple[Path, str]:
        """write_host, also giving the text written: what a later read of the file would read."""
        text = _compact(result.to_dict()) + "\n"
        with self._lock:
            file = self._hosts.get(result.name, {}).get("file") or self._file_for(result.name)
            path = self.dir / "hosts" / f"{file}.json"
            entry = {"name": result.name, "status": result.status, "reason": result.reason}
            try:
                write_text_atomic(path, text)
            except OSError as exc:
                self._hosts[result.name] = dict(entry, write_error=f"{path.name}: {_why(exc)}")
                self.write_failures.append(result.name)
                self._try_journal(self._hosts[result.name])
                raise StoreError(f"{path}: cannot write {result.name}'s result: {_why(exc)}") from None
            self._hosts[result.name] = dict(entry, file=file)
            self._journal_or_raise(self._hosts[result.name])
        return path, text

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
