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
MAX_HOSTS_IN_LABEL = 10


def merge_across_hosts(findings: Iterable[Finding]) -> list[Finding]:
    """Findings equal in rule, severity, title and recommendation (what they say, never whom) become one, with
    the union of their hosts; evidence that reads the same on several hosts is kept once, labelled with them
    (the label names ten, then how many more: the finding's `hosts` keeps every name). Linear in the findings,
    so 10,000 identical hosts merge as cheaply as ten."""
    groups: dict[tuple[str, str, str, str], _Merged] = {}
    for f in findings:
        key = (f.id, f.severity, f.title, f.recommendation)
        found = groups.get(key)
        if found is None:
            groups[key] = _Merged(f)
        else:
            found.add(f)
    return [g.finding() for g in groups.values()]


class _Merged:
    """One finding's merge state: its hosts, sources and evidence, each in first-seen order."""

    def __init__(self, first: Finding):
        self.first = first
        self.hosts: dict[str, None] = {}
        self.sources: dict[str, None] = {}
        self.evidence: dict[tuple, tuple[Evidence, dict[str, None]]] = {}
        self.add(first)

    def add(self, f: Finding) -> None:
        self.hosts.update(dict.fromkeys(f.hosts))
        self.sources.update(dict.fromkeys(f.sources))
        for e in f.evidence:
            kept = self.evidence.setdefault(_content(e), (e, {}))
            if e.host:
                kept[1].update(dict.fromkeys(e.host.split(", ")))

    def finding(self) -> Finding:
        evidence = tuple(
            dataclasses.replace(e, host=_host_label(list(hosts))) if e.host and len(hosts) > 1 else e
            for e, hosts in self.evidence.values()
        )
        return dataclasses.replace(
            self.first, hosts=tuple(self.hosts), evidence=evidence, sources=tuple(self.sources)
        )


def _host_label(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_HOSTS_IN_LABEL])
    return shown + (f" and {len(names) - MAX_HOSTS_IN_LABEL} more" if len(names) > MAX_HOSTS_IN_LABEL else "")


def _content(e: Evidence) -> tuple:
    return (e.kind, e.text, e.file, e.line, e.snippet, _hashable(e.table))


def _hashable(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    return value


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
