"""The investigation's questions, answered per host with evidence, or `not checked — <reason>`, and what the
answers share: `Answer`, the probe gaps that make a question `not checked`, the server-log lines Q4 and Q6 quote.

Each answer is one line built only from what the host measured or read, so identical hosts give identical lines
(the report groups them). Where an answer was checked it carries a structured `value` and its line is rendered
from that value by the question's `qN_text`, so the two never disagree. A reason for `not checked` is always
specific: which probe, which interpreter, which flag would run it. The questions are declared in questions.py
(id, wording, answering function, renderer); their answers live in answers_torch (Q1), answers_source (Q2, Q3,
Q7), answers_dflash (Q4), answers_measured (Q5, Q6), answers_live (Q8, Q9), answers_serving (Q10) and
answers_decode (Q11-Q14).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.probe_view import as_dict, as_list, dig, probe
from gpudiag.models import OK, PROBE_ERROR, HostResult
from probes.crashlog.families import GRAPH_FAMILIES  # the classifier's own list: one place

ANSWERED, PARTIAL, NOT_CHECKED = "answered", "partial", "not checked"
FILL_FAST_PATH_ENV = "SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH"


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


def _sglang_gap(host: HostResult) -> str | None:
    gap = probe_gap(host, "sglang_source", "--probes sglang_source")
    if gap:
        return gap
    sglang = probe(host, "sglang_source") or {}
    if sglang.get("found") is False:
        chosen = as_dict(sglang.get("interpreter")).get("path") or "the probing Python"
        return f"sglang not found in {chosen} (point --python at the serving venv)"
    return None


def with_scope(text: str, value: dict[str, Any]) -> str:
    """A sentence closed by its value's `scope`: which live servers the facts describe, where not all of them."""
    return f"{text}; {value['scope']}" if value.get("scope") else text


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
