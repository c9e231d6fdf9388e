"""The run's host journal, `reports/runs/<run-id>/hosts.journal`: one JSON line per host as it is stored
(name, status, reason, file or write_error), appended and fsynced, so recording a host costs the same at the
10,000th as at the first. `run.json` is written at the start (the planned hosts) and compacted from the
journal at the end; a run killed before that reads its hosts from the journal, complete as far as it went.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

JOURNAL = "hosts.journal"
MAX_LINE = 64 * 1024  # an entry holds a name and a one-line reason: a longer line is not one


class HostJournal:
    """Appends entries; the caller serialises calls (RunWriter holds its lock)."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / JOURNAL
        self._file: Any = None

    def append(self, entry: dict[str, Any]) -> None:
        """Raises OSError when the line cannot be written and synced."""
        if self._file is None:
            self._file = open(self.path, "a", encoding="utf-8")
        try:
            self._file.write(json.dumps(entry, separators=(",", ":"), sort_keys=True, default=str) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError:
            self.close()  # a full disk: drop the unwritten line (run.json lists the host at the end)
            raise

    def close_and_remove(self) -> None:
        """After run.json holds every entry: the journal is redundant."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            try:
                handle.close()
            except OSError:
                pass  # what it still held could not be written: the entries are in run.json or lost with the disk


def read_journal(run_dir: Path) -> list[dict[str, Any]]:
    """Entries in the order written, the last one per host winning; a torn last line (a killed writer) or a
    line that is not an entry is skipped."""
    try:
        handle = open(run_dir / JOURNAL, encoding="utf-8", errors="replace")
    except OSError:
        return []
    entries: dict[str, dict[str, Any]] = {}
    with handle:
        for line in handle:
            if len(line) > MAX_LINE:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                entries.pop(entry["name"], None)
                entries[entry["name"]] = entry
    return list(entries.values())


def merged_hosts(recorded: tuple[dict[str, Any], ...], journal: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """run.json's host entries with the journal's over them (the journal is newer when both exist)."""
    by_name = {str(e.get("name")): e for e in recorded}
    for entry in journal:
        by_name.pop(entry["name"], None)
        by_name[entry["name"]] = entry
    return tuple(by_name.values())
