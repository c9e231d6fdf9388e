"""Turns output collected by an engine into HostResults shaped exactly like a scan's.

A complete frame goes through the orchestrator's own classification; a truncated frame, a host the
engine could not reach, or a host that printed no frame becomes a HostResult with that status.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO

from gpudiag.engines import ansible_json, frames
from gpudiag.engines.clush import GatheredFormError
from gpudiag.engines.failures import one_line, status_from_message
from gpudiag.models import FRAME_ERROR, PYTHON_MISSING, UNREACHABLE, CommandResult, Host, HostResult
from gpudiag.host_status import classify
from gpudiag.jsonfile import DocumentError, check_budget

FORMATS = ("auto", "ansible-json", "frames")
# Bounds on what ingest reads, as a scan bounds one host's output (transports/capture.py): a source over
# MAX_SOURCE_BYTES (one file, or stdin) is refused after reading that much, and all sources together are
# bounded by MAX_TOTAL_BYTES; a JSON document (Ansible's) is held to a frame's value and depth limits.
MAX_SOURCE_BYTES = 64 * 2**20
MAX_TOTAL_BYTES = 512 * 2**20
TRANSPORT_BY_LABEL = {"host": "pdsh", "task": "srun", "": "file"}


class IngestError(ValueError):
    """Input that holds nothing gpudiag can read; the message names the source."""


@dataclass(frozen=True)
class Source:
    name: str  # the path as given, or "-" for stdin
    stem: str  # file name without suffix: a host name of last resort (one file per host)
    text: str


@dataclass
class IngestOutcome:
    results: list[HostResult] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)  # per source: ansible-json | frames
    engines: list[str] = field(default_factory=list)  # per source: ansible | pdsh | clush | srun | file


def read_bounded(stream: BinaryIO, name: str, budget: int) -> str:
    """At most `budget` bytes (and MAX_SOURCE_BYTES) of `stream` as text; a longer stream (`/dev/zero`, a
    file of GiBs) is refused with one line after reading just past the bound."""
    limit = min(budget, MAX_SOURCE_BYTES)
    data = stream.read(limit + 1)
    if len(data) > limit:
        what = "this source" if limit == MAX_SOURCE_BYTES else "the sources together"
        raise IngestError(
            f"{name}: over {limit / 2**20:.0f} MiB ({what}'s bound; ingest reads at most "
            f"{MAX_SOURCE_BYTES // 2**20} MiB a source, {MAX_TOTAL_BYTES // 2**20} MiB in all): split it, "
            f"one file per host in a directory"
        )
    return data.decode("utf-8", "replace")


def _check_json_budget(source: Source) -> None:
    if source.text.lstrip()[:1] in ("{", "["):
        try:
            check_budget(source.text)
        except DocumentError as exc:
            raise IngestError(f"{source.name}: {exc}") from None


def detect_format(source: Source, requested: str) -> str:
    if requested != "auto":
        return requested
    return "ansible-json" if ansible_json.looks_like_ansible(source.text) else "frames"


def ingest(sources: list[Source], requested: str = "auto") -> IngestOutcome:
    """Every host found in every source; host names made unique across the run."""
    outcome = IngestOutcome()
    found_frames = False
    for source in sources:
        _check_json_budget(source)
        fmt = detect_format(source, requested)
        if fmt == "ansible-json":
            try:
                hosts = ansible_json.parse_ansible(source.text, source.stem)
            except ansible_json.AnsibleFormatError as exc:
                raise IngestError(f"{source.name}: {exc}") from None
            results, engine = [from_ansible_host(h) for h in hosts], "ansible"
            found_frames = found_frames or bool(results)
        else:
            try:
                parsed = frames.parse_text(source.text)
            except GatheredFormError as exc:
                raise IngestError(f"{source.name}: {exc}") from None
            found_frames = found_frames or bool(parsed.frames) or bool(parsed.frameless)
            results, engine = from_parsed_text(parsed, source), transport_of(parsed)
        outcome.results.extend(results)
        outcome.formats.append(fmt)
        outcome.engines.append(engine)
    if not found_frames:
        names = ", ".join(s.name for s in sources)
        raise IngestError(f"{names}: no gpudiag frame (GPUDIAG-BEGIN … GPUDIAG-END) and no host found")
    outcome.results = unique_names(outcome.results)
    return outcome


def transport_of(parsed: frames.ParsedText) -> str:
    """clush where its lines show it; else host prefixes read as pdsh (the two print them alike)."""
    return parsed.engine or TRANSPORT_BY_LABEL[parsed.labelled]


def from_parsed_text(parsed: frames.ParsedText, source: Source) -> list[HostResult]:
    transport = transport_of(parsed)
    single = len(parsed.frames) == 1 and not parsed.frameless
    results = []
    for frame in parsed.frames:
        name = frame_name(frame, source.stem if single else None)
        address = (frame.label if frame.label_kind == "host" else None) or _doc_hostname(frame) or name
        results.append(from_frame(frame, name, address, transport))
    for label, lines in parsed.frameless.items():
        node = parsed.nodes.get(label)
        name = node or (f"task-{label}" if frames.label_kind(label) == "task" else label)
        result = frameless_result(name, node or label, transport, "\n".join(lines))
        step = parsed.last_steps.get(label)
        results.append(replace(result, reason=f"{result.reason} (last step: {step})") if step else result)
    if not parsed.frames and not parsed.frameless and source.text.strip():
        # One file per host, and this host's file holds no frame: the host failed, keep why.
        results.append(frameless_result(source.stem, source.stem, transport, source.text))
    return results


def frame_name(frame: frames.Frame, file_stem: str | None) -> str:
    """Engine host label first (it is what the user targeted), then the document's own host name,
    then the srun task number or the file the frame came from."""
    if frame.label_kind == "host" and frame.label:
        return frame.label
    hint = frame.host_hint()
    if hint:
        return hint
    if frame.label_kind == "task" and frame.label:
        return f"task-{frame.label}"
    return file_stem or "host"


def from_frame(frame: frames.Frame, name: str, address: str, transport: str) -> HostResult:
    host = Host(name=name, address=address, transport=transport)
    if frame.document is None:
        return HostResult(
            name=name,
            status=FRAME_ERROR,
            reason=frame.error or "unreadable frame",
            address=address,
            transport=transport,
            output_tail={"stdout": frame.text},
        )
    return classify_document(host, frame.document, frame.nonce)


def classify_document(host: Host, document: dict[str, Any], nonce: str) -> HostResult:
    """A scan's own classification, fed the frame as the host would have printed it."""
    text = f"GPUDIAG-BEGIN {nonce}\n{json.dumps(document)}\nGPUDIAG-END {nonce}\n"
    probes: dict[str, Any] = document["probes"] if isinstance(document.get("probes"), dict) else {}
    duration = sum(
        float(p["duration_s"])
        for p in probes.values()
        if isinstance(p, dict) and isinstance(p.get("duration_s"), (int, float))
    )
    command = CommandResult(exit_code=0, stdout=text.encode("utf-8"), stderr=b"", duration_s=duration)
    return classify(host, command, nonce, 0.0)


def frameless_result(name: str, address: str, transport: str, text: str, default: str = FRAME_ERROR) -> HostResult:
    status = status_from_message(text, default)
    reason = one_line(text)
    if status == FRAME_ERROR:
        reason = f"no gpudiag frame in the output: {reason}"
    return HostResult(
        name=name,
        status=status,
        reason=reason,
        address=address,
        transport=transport,
        output_tail={"stdout": text[-frames.TAIL_CHARS :]},
    )


def from_ansible_host(host: ansible_json.AnsibleHost) -> HostResult:
    """The frame from the first task that printed one; else what the first failed task said."""
    target = Host(name=host.name, address=host.name, transport="ansible")
    for result in host.results:
        parsed = frames.parse_text(str(result.get("stdout") or ""))
        complete = [f for f in parsed.frames if f.document is not None]
        if complete:
            return classify_document(target, complete[0].document, complete[0].nonce)  # type: ignore[arg-type]
        if parsed.frames:
            return from_frame(parsed.frames[0], host.name, host.name, "ansible")
    for result in host.results:
        if result.get("unreachable"):
            return frameless_result(
                host.name, host.name, "ansible", ansible_json.result_text(result), default=UNREACHABLE
            )
        if result.get("failed") or result.get("rc") not in (None, 0):
            return failed_ansible_result(target, result)
    if host.stats.get("unreachable"):
        return HostResult(
            name=host.name,
            status=UNREACHABLE,
            reason="Ansible counted the host unreachable",
            address=host.name,
            transport="ansible",
        )
    return HostResult(
        name=host.name,
        status=FRAME_ERROR,
        address=host.name,
        transport="ansible",
        reason="no task printed a gpudiag frame (did the play run the bundle?)",
    )


def failed_ansible_result(host: Host, result: dict[str, Any]) -> HostResult:
    """A task that ran and failed: the scan's classification of its exit code and output."""
    rc = result.get("rc")
    if not isinstance(rc, int):
        return frameless_result(host.name, host.address, "ansible", ansible_json.result_text(result))
    command = CommandResult(
        exit_code=rc,
        stdout=str(result.get("stdout") or "").encode("utf-8"),
        stderr=str(result.get("stderr") or "").encode("utf-8"),
        duration_s=0.0,
    )
    classified = classify(host, command, "-", 0.0)
    if classified.status == PYTHON_MISSING:  # say which interpreter, in the host's own words
        return replace(classified, reason=f"{one_line(ansible_json.result_text(result))} (exit {rc})")
    if classified.status == FRAME_ERROR:
        # Over ssh with a tty, stderr arrives inside stdout: look there for the cause too.
        status = status_from_message(ansible_json.result_text(result), FRAME_ERROR)
        if status != FRAME_ERROR:
            return frameless_result(host.name, host.address, "ansible", ansible_json.result_text(result))
    return classified


def _doc_hostname(frame: frames.Frame) -> str | None:
    if frame.document is None:
        return None
    value = frame.document.get("hostname")
    return str(value) if value else None


def unique_names(results: list[HostResult]) -> list[HostResult]:
    """Two frames naming the same host (srun tasks on one node) keep both, as name and name-2."""
    taken: set[str] = set()
    out = []
    for result in results:
        name, n = result.name, 2
        while name in taken:
            name, n = f"{result.name}-{n}", n + 1
        taken.add(name)
        out.append(result if name == result.name else replace(result, name=name))
    return out
