"""A stored run read for `gpudiag report` a chunk of hosts at a time: each host is cleaned, everything the report
derives from its data (gpudiag/derived.py) is derived while the chunk is held, and the host then keeps only its
probes' statuses and those results. The report's memory follows the hosts' derived results, not their data.
Where `gpudiag scan` kept what it derived of every host of a chunk (gpudiag/derived_files.py), and no charts are
drawn, the chunk is those kept hosts: their files are not read again."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Collection

from gpudiag import derived_files
from gpudiag.derived import REMEMBERED, Raised, SlimProbes, key_of, slim_probes
from gpudiag.findings import HOST_DERIVED, STAND_IN, agreeing_groups
from gpudiag.models import HostResult
from gpudiag.render import bench_block  # noqa: F401 - its remembered functions are derived with the rest
from gpudiag.render import plots
from gpudiag.render.host_appendix import host_detail
from gpudiag.render.methodology import copy_timings_of
from gpudiag.render.safe_text import clean_host, clean_run
from gpudiag.cli.forked_map import forked_map
from gpudiag.jsonfile import cycle_collector_paused
from gpudiag.run_loader import assembled_run, host_files, read_hosts
from gpudiag.run_records import LoadedRun, UnreadableFile
from gpudiag.verdict import misfits, requested_checks, unmet_checks

# Host files read, derived and dropped together: the most any moment holds of the hosts' data.
CHUNK = 64
# What the findings and the verdict read of a host: all `gpudiag scan` derives of each host as it is stored.
# Keys taken from the functions themselves, so a renamed or moved function cannot silently go underived.
FINDINGS_AND_VERDICT = frozenset(key_of(function) for function in (*HOST_DERIVED, unmet_checks, misfits))
# Shown once for hosts that agree, as the first of them read it (the appendix's section, its charts by that name).
AS_FIRST_READ_IT = frozenset({key_of(host_detail)})
# Read only by the markdown report (its appendix and methodology): JSON and the console summary skip them.
MARKDOWN_ONLY = frozenset({key_of(host_detail), key_of(copy_timings_of)})


def for_output(markdown: bool) -> frozenset[str] | None:
    """What `report` derives of each host: everything for markdown (None), else all but MARKDOWN_ONLY."""
    return None if markdown else frozenset(REMEMBERED) - MARKDOWN_ONLY


def streamed_run(
    run_dir: Path, charts_dir: Path | None = None, derive: Collection[str] | None = None, workers: int = 1
) -> tuple[LoadedRun, dict[str, str]]:
    """The run with every host's data dropped once derived (every remembered function, or those in `derive`),
    and the charts drawn into `charts_dir` (none when None); hosts that agree within a chunk are derived once,
    for a stand-in, and share what is kept. Chunks are derived in up to `workers` forked processes."""
    manifest, by_file, files = host_files(run_dir)
    empty = clean_run(LoadedRun(path=run_dir, manifest=manifest, hosts=()))
    keys = [key for key in REMEMBERED if derive is None or key in derive]

    def chunk_pass(part: list[Path]) -> tuple[list[HostResult], list[UnreadableFile], dict[str, str]]:
        kept: list[HostResult | None] = [None] * len(part)
        if charts_dir is None:  # charts are drawn from the hosts' data: read from their files
            kept = derived_files.kept_hosts(part, by_file, keys, derivation_args(empty, {}))
        rest = [path for path, host in zip(part, kept) if host is None]
        if not rest:
            return kept, [], {}  # type: ignore[return-value]  # every host kept: no file read again
        hosts, unreadable, charts = read_pass(rest)
        return (in_file_order(part, kept, hosts, unreadable) if len(rest) < len(part) else hosts), unreadable, charts

    def read_pass(part: list[Path]) -> tuple[list[HostResult], list[UnreadableFile], dict[str, str]]:
        hosts, unreadable, digests = read_hosts(part, by_file)
        cleaning: dict[int, dict] = {}  # hosts that read one probe-data dict: cleaned once
        cleaned = [clean_host(h, cleaning) for h in hosts]
        charts = plots.write_charts(dataclasses.replace(empty, hosts=tuple(cleaned)), charts_dir) if charts_dir else {}
        extra = derivation_args(empty, charts)
        slimmed: dict[int, HostResult] = {}
        position = {id(h): i for i, h in enumerate(cleaned)}
        for members in agreeing_groups(cleaned):  # hosts that agree: derived once, one SlimProbes shared
            first, shared = members[0], len(members) > 1 and bool(members[0].name)
            slim = slim_host_probes(first, digests[position[id(first)]], keys, extra, shared)
            slimmed.update((id(host), dataclasses.replace(host, probes=slim)) for host in members)
        return [slimmed[id(h)] for h in cleaned], unreadable, charts

    hosts: list[HostResult] = []
    unreadable: list[UnreadableFile] = []
    charts: dict[str, str] = {}
    chunks = [files[start : start + CHUNK] for start in range(0, len(files), CHUNK)]
    with cycle_collector_paused():
        for kept, unread, drawn in forked_map(chunk_pass, chunks, workers):
            hosts += kept
            unreadable += unread
            charts.update(drawn)
    return assembled_run(run_dir, manifest, hosts, unreadable), charts


def in_file_order(
    files: list[Path], kept: list[HostResult | None], read: list[HostResult], unreadable: list[UnreadableFile]
) -> list[HostResult]:
    """The hosts of `files` in their order: the kept one where there is one, else the next of those `read` of the
    other files (in their order; a file that is not a host result and that run.json gives no host yields none)."""
    hostless = {u.file for u in unreadable if u.host is None}
    hosts = iter(read)
    return [
        host if host is not None else next(hosts)
        for path, host in zip(files, kept)
        if host is not None or f"hosts/{path.name}" not in hostless
    ]


def derivation_args(empty: LoadedRun, charts: dict[str, str]) -> dict[str, tuple[Any, ...]]:
    """What the remembered functions that read more than the host are given, by key: `empty` is the run's
    manifest alone (cleaned), `charts` the charts drawn by name."""
    return {key_of(unmet_checks): (requested_checks(empty),), key_of(host_detail): (charts,)}


def slim_host_probes(
    first: HostResult, digest: bytes | None, keys: Collection[str], extra: dict[str, tuple[Any, ...]], shared: bool
) -> SlimProbes:
    """What a cleaned host keeps once its data is dropped: the remembered functions under `keys` called on it
    (Raised for what raised). `shared`: hosts that agree with `first` share the result, so it is derived for a
    stand-in whose name each host reads as its own (the sections shown as the first read them aside)."""
    judged = dataclasses.replace(first, name=STAND_IN, reason=first.reason.replace(first.name, STAND_IN))
    derived = {
        key: _caught(REMEMBERED[key], extra.get(key, ()))(judged if shared and key not in AS_FIRST_READ_IT else first)
        for key in keys
    }
    renamed_keys = frozenset(keys) - AS_FIRST_READ_IT if shared else frozenset()
    return slim_probes(first, derived, digest, STAND_IN if shared else None, renamed_keys)


def _caught(function: Callable[..., Any], args: tuple[Any, ...]) -> Callable[[HostResult], Any]:
    """function(host, *args), or Raised with what it raised: a later call on the slim host raises it again."""

    def call(host: HostResult) -> Any:
        try:
            return function(host, *args)
        except Exception as exc:  # noqa: BLE001 - kept and raised again where the report asks for it
            return Raised(exc)

    return call
