"""Answers from the installed sglang's own source: which _grouped_foreach_copy_ each caller uses (Q2), whether the
EAGLE draft replays batch their copies (Q3) and whether the installed files are the released ones (Q7). Each
answer's value holds the facts its sentence states (file:line strings, counts, the integrity method); the
sentence is rendered from it by q2_text, q3_text and q7_text."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.answers import ANSWERED, PARTIAL, Answer, _not_checked, _sglang_gap, _where, with_scope
from gpudiag.models import HostResult
from gpudiag.probe_view import as_dict, as_list, probe

COMMAND = "gpudiag scan HOST"
CALLERS = (
    ("target decode fill", ("cuda_graph_runner", "buffer_registry")),
    ("EAGLE draft", ("eagle_draft_cuda",)),
    ("EAGLE draft-extend", ("eagle_draft_extend",)),
    ("DFlash", ("dflash",)),
)
RUNNERS = (("draft", "draft"), ("draft_extend", "draft-extend"))
FIRST_FILES = 5  # how many differing files an answer names


def _fast_paths(definition: Any) -> list[dict[str, Any]]:
    return [
        {"kind": p.get("kind"), "env_var": p.get("env_var")}
        for p in as_list(as_dict(definition).get("fast_paths"))
        if isinstance(p, dict)
    ]


def _fast_path_text(path: dict[str, Any]) -> str:
    if path.get("kind") == "env_gated":
        return f"dense-int path gated by {path.get('env_var') or '?'}=1"
    if path.get("kind") == "small_copy_kernel":
        return "small-copy kernel"
    return str(path.get("kind") or "fast path")


def q2_value(host: HostResult) -> dict[str, Any]:
    """The definitions with their fast paths, and the definition each known caller's first call site resolves to."""
    sglang = probe(host, "sglang_source") or {}
    grouped = as_dict(sglang.get("grouped_foreach_copy"))
    definitions = [d for d in as_list(grouped.get("definitions")) if isinstance(d, dict)]
    by_where = {_where(d): d for d in definitions}
    sites = [s for s in as_list(grouped.get("call_sites")) if isinstance(s, dict)]
    callers = []
    for label, keys in CALLERS:
        found = [s for s in sites if any(k in str(s.get("file")) for k in keys)]
        if found:
            target = _where(found[0].get("resolves_to"))
            callers.append(
                {
                    "caller": label,
                    "call_site": _where(found[0]),
                    "uses": target,
                    "fast_paths": _fast_paths(by_where.get(target)),
                }
            )
    return {
        "release": sglang.get("version"),
        "definitions": [{"at": _where(d), "fast_paths": _fast_paths(d)} for d in definitions],
        "callers": callers,
    }


def q2_text(value: dict[str, Any]) -> str:
    """Q2's sentence, from its value."""
    definitions = value.get("definitions") or []
    if not definitions:
        return with_scope(
            f"sglang {value.get('release') or '?'}: no _grouped_foreach_copy_ (per-tensor copy_() in every replay)",
            value,
        )
    defs = [
        f"{d['at']} [{', '.join(_fast_path_text(p) for p in d['fast_paths']) or 'no fast path'}]" for d in definitions
    ]
    callers = [
        f"{c['caller']} → {c['uses']}"
        + (f" ({', '.join(_fast_path_text(p) for p in c['fast_paths'])})" if c["fast_paths"] else "")
        for c in value.get("callers") or []
    ]
    text = f"{len(definitions)} definition(s): {'; '.join(defs)}. Callers: {'; '.join(callers) or 'none found'}"
    return with_scope(text, value)


def q2_grouped_copy(host: HostResult) -> Answer:
    gap = _sglang_gap(host)
    if gap:
        return _not_checked("Q2", gap)
    value = q2_value(host)
    return Answer("Q2", ANSWERED, q2_text(value), COMMAND, value)


def _runner(key: str, fact: dict[str, Any]) -> dict[str, Any]:
    if not fact.get("found"):
        return {"runner": key, "found": False}
    return {
        "runner": key,
        "found": True,
        "batched": bool(fact.get("batched")),
        "grouped_calls": fact.get("grouped_calls"),
        "per_tensor_copies": fact.get("per_tensor_copies"),
        "per_tensor_fields": [str(f) for f in as_list(fact.get("per_tensor_fields"))],
        "hidden_states_separate": bool(fact.get("hidden_states_separate")),
        "at": f"{fact.get('file')}:{fact.get('replay_line') or fact.get('line')}",
    }


def q3_text(value: dict[str, Any]) -> str:
    """Q3's sentence, from its value: one clause per runner."""
    parts = []
    for runner in value.get("runners") or []:
        label = dict(RUNNERS).get(runner["runner"], runner["runner"])
        if not runner["found"]:
            parts.append(f"{label}: runner not found")
            continue
        batched = (
            f"batched ({runner['grouped_calls']} grouped call)"
            if runner["batched"]
            else f"per tensor ({runner['per_tensor_copies']} copy_() calls)"
        )
        hidden = (
            "hidden_states on its own copy_()" if runner["hidden_states_separate"] else "hidden_states not split off"
        )
        parts.append(f"{label} {batched}, {hidden} ({runner['at']})")
    return with_scope("; ".join(parts), value)


def q3_eagle_batching(host: HostResult) -> Answer:
    gap = _sglang_gap(host)
    if gap:
        return _not_checked("Q3", gap)
    eagle = as_dict((probe(host, "sglang_source") or {}).get("eagle"))
    value = {"runners": [_runner(key, as_dict(eagle.get(key))) for key, _label in RUNNERS]}
    return Answer("Q3", ANSWERED, q3_text(value), COMMAND, value)


def _integrity(integrity: dict[str, Any]) -> dict[str, Any]:
    """How the installed files were checked: against the wheel's RECORD, as a git checkout, or not at all."""
    method = integrity.get("method")
    if method == "record":
        modified, missing = as_list(integrity.get("modified")), as_list(integrity.get("missing"))
        return {
            "method": "record",
            "record": integrity.get("record"),
            "files_hashed": integrity.get("checked"),
            "cited_only": integrity.get("scope") == "cited",
            "modified": len(modified),
            "missing": len(missing),
            "first_files": [str(f) for f in (modified + missing)[:FIRST_FILES]],
        }
    if method == "editable":
        git = as_dict(integrity.get("editable"))
        changed = as_list(git.get("changed"))
        return {
            "method": "editable",
            "checkout": git.get("path"),
            "commit": git.get("commit"),
            "dirty": bool(git.get("dirty")),
            "changed": len(changed),
            "first_files": [str(f) for f in changed[:FIRST_FILES]],
        }
    why = integrity.get("reason") or "no RECORD matched the imported files and no git checkout was found"
    return {"method": "unknown", "reason": why}


def q7_text(value: dict[str, Any]) -> str:
    """Q7's sentence, from its value."""
    version = f"sglang {value.get('release') or '?'} (version_mismatch: {str(bool(value['version_mismatch'])).lower()})"
    first = ", ".join(value.get("first_files") or [])
    if value["method"] == "record":
        covered = "the files the facts cite; --verify-all hashes all" if value["cited_only"] else "every file"
        differ = value["modified"] + value["missing"]
        verdict = f"{differ} differ: {first}" if differ else "all match"
        text = f"{version}: {value['files_hashed']} files hashed against {value['record']} ({covered}); {verdict}"
    elif value["method"] == "editable":
        state = f"dirty, {value['changed']} changed: {first}" if value["dirty"] else "clean"
        text = f"{version}: git checkout {value['checkout']} at {value['commit']}, {state}"
    else:
        text = f"{version}: integrity unknown — {value['reason']}"
    return with_scope(text, value)


def q7_integrity(host: HostResult) -> Answer:
    gap = _sglang_gap(host)
    if gap:
        return _not_checked("Q7", gap)
    sglang = probe(host, "sglang_source") or {}
    value = dict(
        {"release": sglang.get("version"), "version_mismatch": bool(sglang.get("version_mismatch"))},
        **_integrity(as_dict(sglang.get("integrity"))),
    )
    if value["method"] == "unknown":
        return Answer("Q7", PARTIAL, q7_text(value), "gpudiag scan HOST --verify-all", value)
    command = "gpudiag scan HOST --verify-all" if value["method"] == "record" else COMMAND
    return Answer("Q7", ANSWERED, q7_text(value), command, value)
