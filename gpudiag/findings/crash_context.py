"""A live server's crash joined with what the scan knows of the host and of that server: which replay path the
traceback is on (DFlash verify, EAGLE draft, EAGLE draft-extend), the `_grouped_foreach_copy_` call site it passed
through as the installed source's AST reads it (sglang_facts/grouped_copy.py: the fields that call copies), which
of those the installed release copies only under a condition (the usual None, from the replay-field table read from
the real wheels, probes/replay_fields.py), and the flag, in the release's spelling, that keeps the replay out of
the way. Advice never proposes a flag the server already runs with (`fitted`).

The crash-log table's generic advice cites the grouped-copy PRs; a crash on the DFlash path must not be sent to the
EAGLE-draft change (PR #28465), so the advice is built here from the path the frames show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.findings.server_flags import decode_graph_switch, release_flag, server_args
from gpudiag.models import Evidence, HostResult
from gpudiag.probe_view import as_dict, as_list, dig, probe
from probes import replay_fields  # the one table of replay fields, per release read: pure data
from probes.crashlog import fit  # advice less the flags in use: the same text surgery on host and control side

# (marker in a frame's file or function, replay-field path, what to call it, the release change that batched it)
PATHS = (
    ("dflash", "dflash_verify", "DFlash verify replay (TARGET_VERIFY through the generic graph runner)", None),
    ("eagle_draft_extend", "eagle_draft_extend", "EAGLE draft-extend replay", "0.5.14 (sglang PR #28465)"),
    ("eagle_draft", "eagle_draft", "EAGLE draft replay", "0.5.14 (sglang PR #28465)"),
)
REPLAY_KINDS = ("replay",)
GROUPED_COPY = "_grouped_foreach_copy_"
# Flags that all switch decode CUDA graphs off: one in use makes every other one no news to the server.
GRAPHS_OFF = ("--disable-cuda-graph", "--disable-decode-cuda-graph")


@dataclass(frozen=True)
class CrashPath:
    path: str
    label: str
    batched_in: str | None
    fields: tuple[str, ...]
    optional: tuple[tuple[str, str], ...]  # (field, when the release copies it)
    release: str
    site: str | None = None  # "file:line (qualname)" of the call site the frames pass through, from the AST


def _frames(crash: dict[str, Any]) -> list[dict[str, Any]]:
    return [as_dict(f) for f in as_list(crash.get("last_frames"))]


def _frames_text(crash: dict[str, Any]) -> list[str]:
    """Frame files and functions, newest first, then the quoted lines: where the replay broke."""
    texts = [f"{f.get('file')} {f.get('function')}".lower() for f in reversed(_frames(crash))]
    return texts + [str(as_dict(q).get("text") or "").lower() for q in as_list(crash.get("quoted"))]


def call_site(host: HostResult, crash: dict[str, Any]) -> dict[str, Any] | None:
    """The installed source's `_grouped_foreach_copy_` call site in the frame that called it (the frame before the
    copy's own), matched by file and, among several in that file, by method; None when the installed release has
    no such call there (another build wrote the log) or the call copies tensors chosen at run time only."""
    frames = _frames(crash)
    callers = [frames[i - 1] for i in range(1, len(frames)) if frames[i].get("function") == GROUPED_COPY]
    sites = [as_dict(s) for s in as_list(dig(probe(host, "sglang_source"), "grouped_foreach_copy", "call_sites"))]
    for caller in reversed(callers):
        in_file = [s for s in sites if s.get("fields") and str(s.get("file")) == str(caller.get("file"))]
        same = [s for s in in_file if str(s.get("qualname") or "").rsplit(".", 1)[-1] == caller.get("function")]
        if same or in_file:
            return (same or in_file)[0]
    return None


def crash_path(host: HostResult, crash: dict[str, Any]) -> CrashPath | None:
    """The speculative replay path a crash's frames are on, with the fields its copy takes in the installed release:
    the call site's own list (AST) when the frames reach one the installed source has, else the path's table."""
    texts = _frames_text(crash)
    for marker, path, label, batched_in in PATHS:
        if any(marker in t for t in texts):
            version = str(dig(probe(host, "sglang_source"), "version") or "")
            rows = replay_fields.rows(path, version or None)
            conditions = {r["name"]: str(r["when"]) for r in rows if r["when"] is not None}
            site = call_site(host, crash)
            fields = tuple(str(f) for f in as_list((site or {}).get("fields"))) or tuple(r["name"] for r in rows)
            return CrashPath(
                path=path,
                label=label,
                batched_in=batched_in,
                fields=fields,
                optional=tuple((name, conditions[name]) for name in fields if name in conditions),
                release=".".join(map(str, replay_fields.table_release(version or None))),
                site=f"{site.get('file')}:{site.get('line')} ({site.get('qualname')})" if site else None,
            )
    return None


def replay_crash(crash: dict[str, Any]) -> bool:
    signature = as_dict(crash.get("signature"))
    return str(signature.get("kind") or "") in REPLAY_KINDS or str(crash.get("family")) == "replay_failure"


def flags_in_use(server: dict[str, Any] | None) -> set[str]:
    """The flags the live server runs with: those on its command line and the true booleans of its arguments, with
    every decode-graph switch standing for all of them once decode graphs are off."""
    if not server:
        return set()
    argv = server.get("cmdline")
    words: list[Any] = argv if isinstance(argv, list) else str(argv or "").split()
    used = {str(w).split("=", 1)[0] for w in words if str(w).startswith("--")}
    args = server_args(server)
    used |= {"--" + k.replace("_", "-") for k, v in args.items() if v is True or (isinstance(v, str) and v == "True")}
    if decode_graph_switch(args)[0]:
        used |= set(GRAPHS_OFF)
    return used


def fitted(text: str, server: dict[str, Any] | None, who: str = "the server already runs with") -> str:
    """`text` without the clauses that propose a flag the server already runs with, saying so instead (`who`
    words the note), with the switch the server itself turned decode graphs off with."""
    switch = decode_graph_switch(server_args(server or {}))[1]
    rename = {flag: switch for flag in GRAPHS_OFF} if switch else None
    return str(fit.without_flags(text, flags_in_use(server), who, rename))


def joined(
    host: HostResult, crash: dict[str, Any], server: dict[str, Any] | None = None
) -> tuple[Evidence, str, str] | None:
    """(evidence, recommendation, action) for a replay crash whose path the frames show; None otherwise."""
    if not replay_crash(crash):
        return None
    found = crash_path(host, crash)
    if found is None:
        return None
    optional = ", ".join(f"{name} ({when})" for name, when in found.optional)
    short = found.label.split(" (", 1)[0]
    where = (
        f"the copy at {found.site}"
        if found.site
        else f"the {short}'s copy (no call in the installed source matches the log's frames: the release's table)"
    )
    evidence = Evidence(
        kind="source",
        host=host.name,
        text=f"the frames are on the {found.label}; in sglang {found.release} {where} copies "
        f"{', '.join(found.fields)} on every replay, and only under a condition: {optional or 'none'}",
    )
    meaning = as_dict(crash.get("signature")).get("meaning") or "The replay input copy failed."
    changed = (
        f"sglang {found.batched_in} changed this path's copies."
        if found.batched_in
        else "The EAGLE-draft change (sglang PR #28465) does not touch this path."
    )
    none = (
        f"sglang {found.release} guards {optional}: a batch outside those conditions leaves them None, so check "
        "which one the crashing batch lacks (the traceback names the copy, not the field)."
        if optional
        else f"sglang {found.release} copies every one of them unconditionally, so a None here is a batch that "
        "lacks a field the path always takes (the traceback names the copy, not the field)."
    )
    disabled, switch = decode_graph_switch(server_args(server or {}))
    if disabled:
        keep = (
            f"The live server already runs with {switch}, so this crash comes from a run with graphs on: keep "
            "that until a release fixes the copy."
        )
        action = f"Find the None field on the {short} before serving it with graphs again (now {switch})"
    else:
        flag = release_flag(host, "--disable-decode-cuda-graph", "--disable-cuda-graph")
        keep = f"Until a release fixes it, {flag} keeps the replay out of the way."
        action = f"Find the None field on the {short} (its conditional fields are in the evidence); {flag} avoids it"
    advice = f"{meaning} On this host the crash is on the {found.label}: {none} {changed} {keep}"
    return evidence, advice, action


def server_of(host: HostResult, pid: str) -> dict[str, Any] | None:
    """The live server whose log this is (the logs are keyed by the server's pid)."""
    servers = [as_dict(s) for s in as_list(dig(probe(host, "deployment"), "servers"))]
    return next((s for s in servers if str(s.get("pid")) == str(pid)), None)
