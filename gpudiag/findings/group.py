"""The fleet view of findings: a finding that holds on several hosts is one finding with its host list, and
every finding names the gpudiag command that reproduces its evidence."""

from __future__ import annotations

import dataclasses
from typing import Iterable

from gpudiag.models import Evidence, Finding

# Which command gathers each probe's evidence again (HOSTS is replaced by the finding's hosts).
PROBE_COMMANDS = {
    "torch_caps": "gpudiag scan HOSTS --probes torch_caps",
    "copy_bench": "gpudiag scan HOSTS --deep",
    "cuda_graph": "gpudiag repro cuda-graph-crash HOSTS",
}
DEFAULT_COMMAND = "gpudiag scan HOSTS"
MAX_HOSTS_IN_COMMAND = 10


def merge_across_hosts(findings: Iterable[Finding]) -> list[Finding]:
    """Findings equal in rule, severity, title and recommendation become one, with the union of their hosts;
    evidence that reads the same on several hosts is kept once, labelled with all of them."""
    merged: dict[tuple[str, str, str, str, str], Finding] = {}
    for f in findings:
        key = (f.id, f.severity, f.title, f.recommendation, f.action)
        if key not in merged:
            merged[key] = f
            continue
        seen = merged[key]
        merged[key] = dataclasses.replace(
            seen,
            hosts=tuple(dict.fromkeys(seen.hosts + f.hosts)),
            evidence=_merge_evidence(seen.evidence, f.evidence),
            sources=tuple(dict.fromkeys(seen.sources + f.sources)),
        )
    return list(merged.values())


def _merge_evidence(first: tuple[Evidence, ...], more: tuple[Evidence, ...]) -> tuple[Evidence, ...]:
    out = list(first)
    for e in more:
        same = next((i for i, kept in enumerate(out) if _content(kept) == _content(e)), None)
        if same is None:
            out.append(e)
        else:
            kept_host = out[same].host
            if e.host and kept_host and e.host not in kept_host.split(", "):
                out[same] = dataclasses.replace(out[same], host=f"{kept_host}, {e.host}")
    return tuple(out)


def _content(e: Evidence) -> tuple:
    return (e.kind, e.text, e.file, e.line, e.snippet, e.table)


def reproduce_command(finding: Finding) -> str:
    """The gpudiag command that gathers this finding's evidence again, on its hosts."""
    probes = [s.split("/probes/", 1)[1] for s in finding.sources if "/probes/" in s]
    command = next(
        (PROBE_COMMANDS[p] for p in ("cuda_graph", "copy_bench", "torch_caps") if p in probes), DEFAULT_COMMAND
    )
    if finding.id == "sglang.local_modifications":
        command = "gpudiag scan HOSTS --verify-all"
    elif finding.id == "cuda_graph.log_signature":
        return "gpudiag repro cuda-graph-crash --log " + (
            finding.evidence[0].file if finding.evidence and finding.evidence[0].file else "FILE"
        )
    hosts = list(finding.hosts[:MAX_HOSTS_IN_COMMAND]) or ["all -i INVENTORY"]
    return command.replace("HOSTS", " ".join(hosts))
