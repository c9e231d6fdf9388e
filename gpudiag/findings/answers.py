"""The investigation's questions, answered per host with evidence, or `not checked — <reason>`.

Each answer is one line built only from what the host measured or read, so identical hosts give identical lines
(the report groups them). A reason for `not checked` is always specific: which probe, which interpreter, which
flag would run it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpudiag.probe_view import as_dict, as_list, dig, probe
from gpudiag.findings.facts import sglang_interpreter, torch_facts
from gpudiag.findings.copies import copy_path_text
from gpudiag.findings.gpu_room import force_helps
from gpudiag.findings.server_scope import scope
from gpudiag.models import OK, PROBE_ERROR, HostResult
from probes.crashlog.families import GRAPH_FAMILIES  # the classifier's own list: one place

ANSWERED, PARTIAL, NOT_CHECKED = "answered", "partial", "not checked"
QUESTIONS = (
    ("Q1", "Is torch._foreach_copy_ present and correct for the replay dtype pairs, on CPU and each GPU?"),
    ("Q2", "Which _grouped_foreach_copy_ definitions exist, with which fast paths, and which does each caller use?"),
    ("Q3", "Do the EAGLE draft and draft-extend replays batch their copies, hidden_states on its own copy_()?"),
    ("Q4", "Is DFlash present; is its draft CUDA graph on; if off, which guard and which flag?"),
    ("Q5", "What does the replay copy cost per decode step on each GPU, and what would switching save?"),
    ("Q6", "Where do CUDA graphs break (algorithm × batch size × draft tokens), with which signature?"),
    ("Q7", "Is the installed code the released code?"),
    ("Q8", "Does the live server run what is on disk (flags, interpreter)?"),
    ("Q9", "What is serving now?"),
    ("Q10", "Is speculative decoding paying off on each server?"),  # answers_serving.py
)
FILL_FAST_PATH_ENV = "SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH"
CALLERS = (
    ("target decode fill", ("cuda_graph_runner", "buffer_registry")),
    ("EAGLE draft", ("eagle_draft_cuda",)),
    ("EAGLE draft-extend", ("eagle_draft_extend",)),
    ("DFlash", ("dflash",)),
)


@dataclass(frozen=True)
class Answer:
    qid: str
    status: str  # answered | partial | not checked
    text: str
    command: str = ""  # the gpudiag command that reproduces the evidence
    value: Any = None  # the structured answer its text is rendered from (docs/report-json.md), where it has one

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.qid,
            "status": self.status,
            "answer": self.text,
            "command": self.command,
            "value": self.value,
        }


def _not_checked(qid: str, reason: str, command: str = "") -> Answer:
    return Answer(qid, NOT_CHECKED, f"not checked — {reason}", command)


def probe_gap(host: HostResult, name: str, flag: str = "") -> str | None:
    """Why probe `name` has no data on this host, specific enough to act on; None when it has data."""
    if host.status not in (OK, PROBE_ERROR) and not host.probes:
        return f"the host was not reached ({host.status}: {host.reason or 'no reason recorded'})"
    result = host.probes.get(name)
    if result is None:
        return f"probe {name} not selected" + (f" (run it with {flag})" if flag else "")
    if result.status == "timeout":
        return f"probe {name} timed out after {result.duration_s:.0f} s"
    if result.status == "skipped":
        return str(result.reason or f"probe {name} skipped")
    if result.status != "ok":
        error = as_dict(result.error)
        return f"probe {name} failed: {error.get('type', 'error')}: {error.get('message') or result.reason or '-'}"
    if not isinstance(result.data, dict):
        return f"probe {name} returned unreadable data"
    return None


def no_gpu_reason(host: HostResult) -> str | None:
    gpus = as_dict(dig(probe(host, "env"), "gpus"))
    if probe(host, "env") is not None and not as_list(gpus.get("devices")):
        return f"no GPU visible ({gpus.get('reason') or 'nvidia-smi lists none'})"
    return None


def _where(fact: Any) -> str:
    fact = as_dict(fact)
    return f"{fact.get('file')}:{fact.get('line')}" if fact.get("file") else "-"


def q1_foreach_copy(host: HostResult) -> Answer:
    gap = probe_gap(host, "torch_caps", "--probes torch_caps")
    if gap and "not importable" in gap and " in /" not in gap and "by /" not in gap:
        tried = (
            dig(probe(host, "env"), "torch", "interpreter", "path")
            or dig(probe(host, "env"), "python", "executable")
            or host.python
            or "the probing Python"
        )
        explicit = dig(probe(host, "env"), "torch", "interpreter", "why") == "explicit"
        hint = "" if explicit else "; point --python at the serving venv"
        gap = f"torch not importable in {tried} ({gap}){hint}"
    if gap:
        return _not_checked("Q1", gap, "gpudiag scan HOST --probes torch_caps")
    caps = probe(host, "torch_caps") or {}
    version, interpreter = torch_facts(host)
    where = f"torch {version or '?'} in {interpreter[0] if interpreter else '?'}"
    if caps.get("has_foreach_copy") is False:
        return Answer("Q1", ANSWERED, f"absent in {where}: sglang falls back to a per-tensor loop")
    parts: dict[str, list[str]] = {}
    unchecked: dict[str, list[str]] = {}
    for device, check in sorted(as_dict(caps.get("checks")).items()):
        check = as_dict(check)
        pairs = as_dict(check.get("pairs"))
        bad = sorted(k for k, v in pairs.items() if v != "ok")
        if check.get("status") == "ok":
            parts.setdefault(
                f"{len(pairs) - len(bad)} of {len(pairs)} dtype pairs correct"
                + (f" (wrong: {', '.join(bad)})" if bad else ""),
                [],
            ).append(device)
        else:
            why = re.sub(r",? e\.g\. pid \d+", "", str(check.get("reason") or check.get("status")))
            unchecked.setdefault(why, []).append(device)
    texts = [f"{', '.join(devices)}: {text}" for text, devices in parts.items()]
    texts += [f"{', '.join(devices)} not checked — {why}" for why, devices in unchecked.items()]
    texts += _copy_paths(as_dict(caps.get("checks")))
    gpu = no_gpu_reason(host)
    if gpu:
        texts.append(f"GPUs not checked — {gpu}")
    visible = [
        f"cuda:{d.get('index')}"
        for d in as_list(dig(probe(host, "env"), "gpus", "devices"))
        if isinstance(d, dict) and d.get("index") is not None
    ]
    missing = [name for name in visible if name not in as_dict(caps.get("checks"))]
    if missing:
        unchecked.setdefault("missing", missing)
        texts.append(f"{', '.join(missing)} not checked — torch_caps recorded no check for them")
    text = f"present in {where}; " + "; ".join(texts)
    said = scope(host, interpreter[0] if interpreter else None, "torch facts")
    text += f"; {said}" if said else ""
    serving = sglang_interpreter(host)
    if serving and interpreter and serving[0] != interpreter[0]:
        text += f"; read in {interpreter[0]}, not in the serving {serving[0]}: not judged against sglang"
        return Answer("Q1", PARTIAL, text, f"gpudiag scan HOST --python {serving[0]} --probes torch_caps")
    # --force is offered only where it would let a check run (a GPU busy with something else), never for serving GPUs.
    rerun = "gpudiag scan HOST --probes torch_caps" + (" --force" if force_helps(list(unchecked)) else "")
    return Answer("Q1", PARTIAL if unchecked or gpu else ANSWERED, text, rerun)


def _copy_paths(checks: dict[str, Any]) -> list[str]:
    """Which copy ran on each device that was checked (devices that read the same share one clause)."""
    by_text: dict[str, list[str]] = {}
    for device, check in sorted(checks.items()):
        text = copy_path_text(as_dict(check))
        if text and as_dict(check).get("status") == "ok":
            by_text.setdefault(text, []).append(device)
    return [f"copy path on {', '.join(devices)}: {text}" for text, devices in by_text.items()]


def _sglang_gap(host: HostResult) -> str | None:
    gap = probe_gap(host, "sglang_source", "--probes sglang_source")
    if gap:
        return gap
    sglang = probe(host, "sglang_source") or {}
    if sglang.get("found") is False:
        chosen = as_dict(sglang.get("interpreter")).get("path") or "the probing Python"
        return f"sglang not found in {chosen} (point --python at the serving venv)"
    return None


def q2_grouped_copy(host: HostResult) -> Answer:
    gap = _sglang_gap(host)
    if gap:
        return _not_checked("Q2", gap)
    sglang = probe(host, "sglang_source") or {}
    grouped = as_dict(sglang.get("grouped_foreach_copy"))
    definitions = [d for d in as_list(grouped.get("definitions")) if isinstance(d, dict)]
    if not definitions:
        return Answer(
            "Q2",
            ANSWERED,
            f"sglang {sglang.get('version') or '?'}: no _grouped_foreach_copy_ (per-tensor copy_() in every replay)",
            "gpudiag scan HOST",
        )
    where_def = {_where(d): d for d in definitions}
    defs = []
    for d in definitions:
        paths = [_fast_path(p) for p in as_list(d.get("fast_paths")) if isinstance(p, dict)]
        defs.append(f"{_where(d)} [{', '.join(paths) or 'no fast path'}]")
    sites = [s for s in as_list(grouped.get("call_sites")) if isinstance(s, dict)]
    callers = []
    for label, keys in CALLERS:
        found = [s for s in sites if any(k in str(s.get("file")) for k in keys)]
        if found:
            target = _where(found[0].get("resolves_to"))
            fast = [_fast_path(p) for p in as_list(dig(where_def.get(target), "fast_paths")) if isinstance(p, dict)]
            callers.append(f"{label} → {target}" + (f" ({', '.join(fast)})" if fast else ""))
    return Answer(
        "Q2",
        ANSWERED,
        f"{len(definitions)} definition(s): {'; '.join(defs)}. Callers: {'; '.join(callers) or 'none found'}",
        "gpudiag scan HOST",
    )


def _fast_path(path: dict[str, Any]) -> str:
    if path.get("kind") == "env_gated":
        return f"dense-int path gated by {path.get('env_var') or '?'}=1"
    if path.get("kind") == "small_copy_kernel":
        return "small-copy kernel"
    return str(path.get("kind") or "fast path")


def q3_eagle_batching(host: HostResult) -> Answer:
    gap = _sglang_gap(host)
    if gap:
        return _not_checked("Q3", gap)
    eagle = as_dict((probe(host, "sglang_source") or {}).get("eagle"))
    parts = []
    for key, label in (("draft", "draft"), ("draft_extend", "draft-extend")):
        fact = as_dict(eagle.get(key))
        if not fact.get("found"):
            parts.append(f"{label}: runner not found")
            continue
        batched = (
            f"batched ({fact.get('grouped_calls')} grouped call)"
            if fact.get("batched")
            else f"per tensor ({fact.get('per_tensor_copies')} copy_() calls)"
        )
        hidden = (
            "hidden_states on its own copy_()" if fact.get("hidden_states_separate") else "hidden_states not split off"
        )
        parts.append(f"{label} {batched}, {hidden} ({fact.get('file')}:{fact.get('replay_line') or fact.get('line')})")
    return Answer("Q3", ANSWERED, "; ".join(parts), "gpudiag scan HOST")


def _server_logs(host: HostResult) -> list[dict[str, Any]]:
    """The host's server-log classifications (deployment `server_logs`: one record per server pid, or
    `docker:NAME` for a container's engine log)."""
    logs = dig(probe(host, "deployment"), "server_logs")
    records = list(logs.values()) if isinstance(logs, dict) else as_list(logs)
    return [r for r in records if isinstance(r, dict)]


def _log_lines(host: HostResult, needle: str, breaks_only: bool = False) -> list[str]:
    """Quoted lines of the logged crashes that mention `needle`; with breaks_only, only crashes of a CUDA-graph
    family (a crash that is not a graph problem never answers where graphs break)."""
    found = []
    for log in _server_logs(host):
        for crash in (as_dict(c) for c in as_list(log.get("crashes"))):
            if breaks_only and str(crash.get("family")) not in GRAPH_FAMILIES:
                continue
            texts = [str(as_dict(q).get("text") or "") for q in as_list(crash.get("quoted"))]
            texts = [crash["summary"]] + texts if breaks_only and crash.get("summary") else texts
            found += [t for t in texts if t and needle.lower() in t.lower()]
    return found
