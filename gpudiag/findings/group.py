"""The fleet view of findings: a finding that holds on several hosts is one finding with its host list, and
every finding names the gpudiag command that reproduces its evidence."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Sequence, TypeVar

from gpudiag.derived import is_slim, name_template
from gpudiag.models import Evidence, Finding, HostResult

# Which command gathers each probe's evidence again (HOSTS is replaced by the finding's hosts).
PROBE_COMMANDS = {
    "torch_caps": "gpudiag scan HOSTS --probes torch_caps",
    "copy_bench": "gpudiag scan HOSTS --deep",
    "cuda_graph": "gpudiag repro cuda-graph-crash HOSTS",
}
DEFAULT_COMMAND = "gpudiag scan HOSTS"
MAX_HOSTS_IN_COMMAND = 10
MAX_HOSTS_IN_LABEL = 10
HOST = "HOST"  # stands for the host's own name in evidence merged across hosts


def merge_across_hosts(findings: Iterable[Finding]) -> list[Finding]:
    """Findings equal in rule, severity, title, recommendation and action (what they say, never whom) become one, with
    the union of their hosts; evidence that reads the same on several hosts is kept once, labelled with them
    (the label names ten, then how many more: the finding's `hosts` keeps every name). Linear in the findings,
    so 10,000 identical hosts merge as cheaply as ten."""
    groups: dict[tuple[str, str, str, str, str], _Merged] = {}
    for f in findings:
        key = (f.id, f.severity, f.title, f.recommendation, f.action)
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
            general = _without_own_host(e)
            kept = self.evidence.setdefault(_content(general), (general, {}))
            if e.host:
                kept[1].update(dict.fromkeys(e.host.split(", ")))

    def finding(self) -> Finding:
        evidence = tuple(
            dataclasses.replace(e, host=_host_label(list(hosts))) if e.host and len(hosts) > 1 else _named(e)
            for e, hosts in self.evidence.values()
        )
        evidence = tuple(_columns_merged(e, self.hosts) for e in evidence)
        return dataclasses.replace(self.first, hosts=tuple(self.hosts), evidence=evidence, sources=tuple(self.sources))


def _without_own_host(e: Evidence) -> Evidence:
    """The evidence with its own host's name in text or snippet replaced by HOST, so the same fact on two
    hosts reads the same ("HOST.lab.internal:22: connection timed out"); its host label says which."""
    if not e.host or ", " in e.host or not any(e.host in (v or "") for v in (e.text, e.snippet)):
        return e
    return dataclasses.replace(
        e,
        text=e.text.replace(e.host, HOST),
        snippet=e.snippet.replace(e.host, HOST) if e.snippet else e.snippet,
    )


def _named(e: Evidence) -> Evidence:
    """Evidence kept for one host only reads with its host's name again."""
    if not e.host or HOST not in (e.text or "") + (e.snippet or ""):
        return e
    return dataclasses.replace(
        e,
        text=e.text.replace(HOST, e.host),
        snippet=e.snippet.replace(HOST, e.host) if e.snippet else e.snippet,
    )


def _columns_merged(e: Evidence, hosts: dict[str, None]) -> Evidence:
    """A table with a column per host (the fleet's drift) keeps one column per distinct set of values,
    headed by the hosts that share it."""
    if not e.table or len(e.table[0]) < 3 or not all(name in hosts for name in e.table[0][1:]):
        return e
    header, body = e.table[0], e.table[1:]
    columns: dict[tuple[str, ...], list[str]] = {}
    for index, name in enumerate(header[1:], 1):
        columns.setdefault(tuple(row[index] if index < len(row) else "" for row in body), []).append(name)
    if len(columns) == len(header) - 1:
        return e
    merged = [(header[0],) + tuple(_host_label(names, count=True) for names in columns.values())]
    merged += [(row[0],) + tuple(values[i] for values in columns) for i, row in enumerate(body)]
    return dataclasses.replace(e, table=tuple(merged))


def _host_label(names: list[str], count: bool = False) -> str:
    shown = ", ".join(names[:MAX_HOSTS_IN_LABEL])
    if count and len(names) > 1:
        shown = f"{len(names)} hosts: {shown}"
    return shown + (f" and {len(names) - MAX_HOSTS_IN_LABEL} more" if len(names) > MAX_HOSTS_IN_LABEL else "")


def _content(e: Evidence) -> tuple:
    return (e.kind, e.text, e.file, e.line, e.snippet, _hashable(e.table))


def _hashable(value: object) -> object:
    if type(value) is tuple:  # a table of strings (the common case) is hashable as it is
        try:
            hash(value)
            return value
        except TypeError:
            pass
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


# A host rule reads one host at a time: hosts that agree in everything but their name (the same probe data,
# shared by run_loader.load_run, and the same status, reason, interpreter) are judged once, by a stand-in named
# STAND_IN, whose findings are then given to each of them by name.
STAND_IN = "gpudiag-stand-in-host-3f9c1e"
T = TypeVar("T")


def agreeing_groups(hosts: Sequence[HostResult]) -> list[list[HostResult]]:
    """The hosts in groups that agree in everything but their name, in first-seen order."""
    groups: dict[tuple, list[HostResult]] = {}
    for host in hosts:
        groups.setdefault(_agreement(host), []).append(host)
    return list(groups.values())


def for_each_host(judge: Callable[[HostResult], T], hosts: Sequence[HostResult]) -> list[T]:
    """[judge(host) for host in hosts], with `judge` (a function of one host alone) called once per group of
    agreeing hosts, on a stand-in, and its result given to each member by name."""
    groups: dict[tuple, list[int]] = {}
    for index, host in enumerate(hosts):
        groups.setdefault(_agreement(host), []).append(index)
    results: list[Any] = [None] * len(hosts)
    for members in groups.values():
        first = hosts[members[0]]
        # Slim hosts are judged as a group only when they share one SlimProbes (derived once for a stand-in).
        apart = is_slim(first) and any(hosts[index].probes is not first.probes for index in members)
        if len(members) == 1 or not first.name or apart:
            for index in members:
                results[index] = judge(hosts[index])
            continue
        stand_in = dataclasses.replace(first, name=STAND_IN, reason=first.reason.replace(first.name, STAND_IN))
        template = name_template(judge(stand_in), STAND_IN)
        for index in members:
            results[index] = template(hosts[index].name)
    return results


def agreement_by_digest(host: HostResult, digest: bytes) -> tuple:
    """What hosts that agree with `host` have alike, its probe data known by `digest` (run_loader's digest of
    its text) rather than by the dict it was read into."""
    return _agreement(host, digest)


def _agreement(host: HostResult, digest: bytes | None = None) -> tuple:
    """What a host rule may read of a host, its own name aside (a reason naming the host reads alike)."""
    reason = host.reason.replace(host.name, STAND_IN) if host.name else host.reason
    same = digest or (getattr(host.probes, "agreement", None) if is_slim(host) else None)
    return (
        (same or id(host.probes)) if host.name else id(host),
        host.status,
        reason,
        host.transport,
        host.python,
        _hashable(host.output_tail),
        _hashable(host.oom),
    )
