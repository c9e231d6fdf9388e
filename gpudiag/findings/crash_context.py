"""A live server's replay crash joined with the host's source facts: which replay path the traceback is on (DFlash
verify, EAGLE draft, EAGLE draft-extend, target decode), the fields that path copies in the installed release (the
replay-field table read from the real wheels, probes/replay_fields.py), which of them are copied only under a
condition (the usual None), and the flag, in the release's spelling, that keeps the replay out of the way.

The crash-log table's generic advice cites the grouped-copy PRs; a crash on the DFlash path must not be sent to the
EAGLE-draft change (PR #28465), so the advice is built here from the path the frames show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.findings.server_flags import release_flag
from gpudiag.models import Evidence, HostResult
from gpudiag.probe_view import as_dict, as_list, dig, probe
from probes import replay_fields  # the one table of replay fields, per release read: pure data

# (marker in a frame's file or function, replay-field path, what to call it, the release change that batched it)
PATHS = (
    ("dflash", "dflash_verify", "DFlash verify replay (TARGET_VERIFY through the generic graph runner)", None),
    ("eagle_draft_extend", "eagle_draft_extend", "EAGLE draft-extend replay", "0.5.14 (sglang PR #28465)"),
    ("eagle_draft", "eagle_draft", "EAGLE draft replay", "0.5.14 (sglang PR #28465)"),
)
REPLAY_KINDS = ("replay",)


@dataclass(frozen=True)
class CrashPath:
    path: str
    label: str
    batched_in: str | None
    fields: tuple[str, ...]
    optional: tuple[tuple[str, str], ...]  # (field, when the release copies it)
    release: str


def _frames_text(crash: dict[str, Any]) -> list[str]:
    """Frame files and functions, newest first, then the quoted lines: where the replay broke."""
    frames = [as_dict(f) for f in as_list(crash.get("last_frames"))]
    texts = [f"{f.get('file')} {f.get('function')}".lower() for f in reversed(frames)]
    return texts + [str(as_dict(q).get("text") or "").lower() for q in as_list(crash.get("quoted"))]


def crash_path(host: HostResult, crash: dict[str, Any]) -> CrashPath | None:
    """The speculative replay path a crash's frames are on, with that path's fields in the installed release."""
    texts = _frames_text(crash)
    for marker, path, label, batched_in in PATHS:
        if any(marker in t for t in texts):
            version = str(dig(probe(host, "sglang_source"), "version") or "")
            rows = replay_fields.rows(path, version or None)
            release = ".".join(map(str, replay_fields.table_release(version or None)))
            return CrashPath(
                path=path,
                label=label,
                batched_in=batched_in,
                fields=tuple(r["name"] for r in rows if r["when"] is None),
                optional=tuple((r["name"], str(r["when"])) for r in rows if r["when"] is not None),
                release=release,
            )
    return None


def replay_crash(crash: dict[str, Any]) -> bool:
    signature = as_dict(crash.get("signature"))
    return str(signature.get("kind") or "") in REPLAY_KINDS or str(crash.get("family")) == "replay_failure"


def joined(host: HostResult, crash: dict[str, Any]) -> tuple[Evidence, str, str] | None:
    """(evidence, recommendation, action) for a replay crash whose path the frames show; None otherwise."""
    if not replay_crash(crash):
        return None
    found = crash_path(host, crash)
    if found is None:
        return None
    graphs_off = release_flag(host, "--disable-decode-cuda-graph", "--disable-cuda-graph")
    optional = ", ".join(f"{name} ({when})" for name, when in found.optional) or "none"
    evidence = Evidence(
        kind="source",
        host=host.name,
        text=f"the frames are on the {found.label}; in sglang {found.release} it copies "
        f"{', '.join(found.fields)} on every replay, and only under a condition: {optional}",
    )
    changed = (
        f"sglang {found.batched_in} changed this path's copies."
        if found.batched_in
        else "The EAGLE-draft change (sglang PR #28465) does not touch this path."
    )
    advice = (
        f"{as_dict(crash.get('signature')).get('meaning') or 'The replay input copy failed.'} On this host the "
        f"crash is on the {found.label}: check which of its conditional fields ({optional}) is None for the "
        f"batch that crashed. {changed} Until a release fixes it, {graphs_off} keeps the replay out of the way."
    )
    short = found.label.split(" (", 1)[0]
    action = f"Find the None field on the {short} (its conditional fields are in the evidence); {graphs_off} avoids it"
    return evidence, advice, action
