"""The run `gpudiag scan` judges, folded host by host as each result is stored: the text just written is read
as the report reads that file (gpudiag/run_loader.py), cleaned, and only what the findings and the verdict
read of it is kept (cli/report_stream.py's derivation), so nothing is read back from disk once the last host
is stored. Hosts that agree share one slim copy across the whole run, not only within a chunk of files: the
first of them keeps what was derived by its own name until a second one agrees, then both share what is
derived once for a stand-in.

A host derived alone, by its own name, is derived whole (every remembered function, the appendix section too)
and kept beside its file (gpudiag/derived_files.py), so a later `gpudiag report` need not derive it again."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Collection

from gpudiag import derived_files
from gpudiag.cli.report_stream import derivation_args, slim_host_probes
from gpudiag.derived import REMEMBERED, narrowed
from gpudiag.findings import agreement_by_digest
from gpudiag.models import HostResult
from gpudiag.render.safe_text import clean_host, clean_run
from gpudiag.user_key import user_key
from gpudiag.run_loader import assembled_run, written_host
from gpudiag.run_records import LoadedRun, RunManifest, UnreadableFile


class RunFold:
    """Each stored host's slim form, kept as its result is stored (`add`), and the run they make (`run`)."""

    def __init__(self, run_dir: Path, manifest: RunManifest, derive: Collection[str]):
        self.run_dir = run_dir
        self.keys = [key for key in REMEMBERED if key in derive]
        # What a kept host holds: everything, where hosts can be kept (kept files on, this user's key to seal them)
        self.kept_keys = list(REMEMBERED) if derived_files.enabled() and user_key(create=True) else self.keys
        empty = clean_run(LoadedRun(path=run_dir, manifest=as_read(manifest), hosts=()))
        self.extra = derivation_args(empty, {})
        self.hosts: list[HostResult] = []
        self.unreadable: list[UnreadableFile] = []
        self.groups: dict[tuple, list[int]] = {}  # hosts that agree, by what they have alike: their indices
        # Digests of data two agreeing hosts already share: a host with that data is read without it.
        self.known: dict[bytes, dict] = {}

    def add(self, path: Path, text: str, owner: str) -> None:
        """The host whose result was just written to `path` as `text`, folded in; its data is then dropped."""
        unreadable = len(self.unreadable)
        read, digest = written_host(path, text, owner, self.unreadable, self.known)
        if read is None:
            return
        host = clean_host(read)
        members = self.groups.setdefault(agreement_by_digest(host, digest), []) if digest and host.name else []
        if read.probes is self.known.get(digest or b"") and len(members) < 2:  # its data is needed after all
            read, digest = written_host(path, text, owner, [], {})
            host = clean_host(read)  # type: ignore[arg-type]  # read once already, without its data
        if not members:  # alone so far: derived by its own name, as a host alone in its chunk is
            slim = slim_host_probes(host, digest, self.kept_keys, self.extra, False)
            if len(self.unreadable) == unreadable:  # an unreadable file is said so by reading it
                derived_files.keep(path, text, dataclasses.replace(host, probes=slim), self.kept_keys, self.extra)
            slim = narrowed(slim, self.keys)  # the run judged here reads no more than the findings and verdict
        elif len(members) == 1:  # a second agrees: derived once for a stand-in, as the first of them reads it
            first = self.hosts[members[0]]
            slim = slim_host_probes(dataclasses.replace(first, probes=host.probes), digest, self.keys, self.extra, True)
            self.hosts[members[0]] = dataclasses.replace(first, probes=slim)
            if digest:  # the next host with this data shares `slim`, unless it differs otherwise
                self.known[digest] = {}
        else:
            slim = self.hosts[members[0]].probes  # type: ignore[assignment]  # that group's SlimProbes
        if digest and host.name:
            members.append(len(self.hosts))
        self.hosts.append(dataclasses.replace(host, probes=slim))

    def run(self, manifest: RunManifest) -> LoadedRun:
        """The finished run as the report would read it back, from the hosts folded and `manifest` alone."""
        return clean_run(assembled_run(self.run_dir, as_read(manifest), list(self.hosts), list(self.unreadable)))


def as_read(manifest: RunManifest) -> RunManifest:
    """`manifest` as reading its run.json gives it back (the same JSON round trip, in memory)."""
    return RunManifest.from_dict(json.loads(json.dumps(manifest.to_dict(), default=str)), "run.json")
