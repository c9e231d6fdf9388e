"""A stored run read back (`load_run`): run.json with its journal's host entries over its own, and every host
file, judged against its probes' declarations as it is read. Only an unreadable run.json is an error
(`StoreError`); a corrupt or stray host file is carried as unreadable. The writing side is gpudiag/store.py.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpudiag.jsonfile import cycle_collector_paused, object_with_spans, read_json
from gpudiag.models import NEVER_FINISHED, OK, RESULT_MISSING, UNREADABLE, HostResult, ProbeResult
from gpudiag.probe_data import judged
from gpudiag.run_journal import merged_hosts, read_journal
from gpudiag.run_records import LoadedRun, RunManifest, UnreadableFile
from gpudiag.schema import SchemaError
from gpudiag.store import StoreError


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
    is carried as unreadable, and a host with no file reads as never finished or result missing. Hosts whose
    probe data is the same text share one copy of it. (`gpudiag report` reads a chunk of host files at a time
    instead, with host_files and read_hosts: gpudiag/cli/report_stream.py.)"""
    manifest, by_file, files = host_files(run_dir)
    with cycle_collector_paused():
        hosts, unreadable, _ = read_hosts(files, by_file)
    return assembled_run(run_dir, manifest, hosts, unreadable)


def host_files(run_dir: Path) -> tuple[RunManifest, dict[str, str], list[Path]]:
    """(the manifest, host name by file stem as run.json gives them, the files under hosts/ in name order)."""
    manifest = read_manifest(run_dir)
    by_file = {str(e.get("file")): str(e.get("name")) for e in manifest.hosts if e.get("file")}
    try:
        files = sorted(p for p in (run_dir / "hosts").iterdir() if not p.name.startswith("."))
    except OSError:
        files = []
    return manifest, by_file, files


def read_hosts(
    files: list[Path], by_file: dict[str, str]
) -> tuple[list[HostResult], list[UnreadableFile], list[bytes | None]]:
    """The hosts read of `files` (hosts whose probe data is the same text share one checked copy of it), the
    files that could not be read, and each host's digest of its probe data (None: none taken)."""
    hosts: list[HostResult] = []
    unreadable: list[UnreadableFile] = []
    shared: dict[bytes, dict[str, ProbeResult]] = {}
    digests: list[bytes | None] = []
    for path in files:
        _load_host(path, by_file, hosts, unreadable, shared, digests)
    return hosts, unreadable, digests


def assembled_run(
    run_dir: Path, manifest: RunManifest, hosts: list[HostResult], unreadable: list[UnreadableFile]
) -> LoadedRun:
    """The run from its manifest and the hosts read of its files: a host run.json lists without a readable
    file, or plans without an entry, is carried with the status that says why."""
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


def written_host(
    path: Path,
    text: str,
    owner: str,
    unreadable: list[UnreadableFile],
    shared: dict[bytes, dict[str, ProbeResult]],
) -> tuple[HostResult | None, bytes | None]:
    """The host file just written as `text`, judged as load_run reads it from disk, and its digest; probe data
    whose digest is in `shared` is not read again: the host gets that dict (nothing is added to it)."""
    hosts: list[HostResult] = []
    digests: list[bytes | None] = []
    _load_host(path, {path.stem: owner}, hosts, unreadable, shared, digests, text, remember=False)
    return (hosts[0], digests[0]) if hosts else (None, None)


def _load_host(
    path: Path,
    by_file: dict[str, str],
    hosts: list[HostResult],
    unreadable: list[UnreadableFile],
    shared: dict[bytes, dict[str, ProbeResult]],
    digests: list[bytes | None],
    text: str | None = None,
    remember: bool = True,
) -> None:
    """One host file read into `hosts`, or carried as unreadable (and its owner so marked). Hosts whose probe
    data is the same text share one checked copy of it (`shared`, by a digest of that text): the copies of
    the others are dropped as they are read, so a fleet that agrees costs what one host does.
    `remember` False: a new digest is not added to `shared` (a scan keeps no host's data once it is stored)."""
    relative = f"hosts/{path.name}"
    owner = by_file.get(path.stem) if path.suffix == ".json" else None
    try:
        if text is None and (path.suffix != ".json" or not path.is_file()):
            raise StoreError("not a host result (only <host>.json files belong in hosts/)")
        doc, digest = _read_host_doc(path, text)
        known = shared.get(digest) if digest else None
        if known is not None:
            doc["probes"] = {}  # checked once already, as the same text
        result = HostResult.from_dict(doc, str(path))
        if owner is not None and result.name != owner:
            raise StoreError(f"names host {result.name!r}, but run.json gives this file to {owner!r}")
        if known is None:
            # Data that does not fit its probe's declaration is that probe's error, never the host's.
            known = judged(result.probes)
            if digest and remember:
                shared[digest] = known
        hosts.append(replace(result, probes=known))
        digests.append(digest)
    except (StoreError, SchemaError) as exc:
        reason = str(exc).replace(str(path) + ": ", "").replace(str(path), relative)
        unreadable.append(UnreadableFile(relative, reason[:300], owner))
        if owner is not None:
            hosts.append(HostResult(name=owner, status=UNREADABLE, reason=f"{relative}: {reason[:300]}"))
            digests.append(None)


def _read_host_doc(path: Path, text: str | None = None) -> tuple[dict[str, Any], bytes | None]:
    """The host document (read from `path`, or given as the `text` written there), and a digest of its
    probes' text (None when it has none)."""
    given = text is not None
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return _read_json(path), None  # names the error as every read does
    found = object_with_spans(text)
    if found is None:
        if given:  # gpudiag writes one JSON object: anything else was not its text
            raise StoreError(f"{path}: not one JSON object as written")
        return _read_json(path), None  # not one JSON object: json.loads says where
    doc, spans = found
    if "probes" not in spans:
        return doc, None
    start, end = spans["probes"]
    return doc, hashlib.blake2b(text[start:end].encode("utf-8", "surrogatepass"), digest_size=20).digest()
