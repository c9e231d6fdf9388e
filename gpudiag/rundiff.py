"""What changed between two stored runs, host by host: versions, sglang files, server flags, findings,
and copy timings that moved by more than their own spread. Pure: runs in, data out (gpudiag diff prints).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from gpudiag.findings import all_findings, host_facts, server_args, servers_of
from gpudiag.probe_view import as_dict, as_list, number, probe
from gpudiag.models import Finding, HostResult
from gpudiag.run_records import LoadedRun

# Facts compared one to one, by the label the diff shows.
FACTS = (
    ("status", "status"),
    ("sglang", "sglang"),
    ("torch", "torch"),
    ("driver", "driver"),
    ("cuda", "cuda"),
    ("gpus", "gpus"),
    ("python", "python"),
    ("sglang interpreter", "sglang_interpreter"),
    ("torch interpreter", "torch_interpreter"),
)
# A timing moved when the medians differ by more than this share AND by more than both runs' spread.
MIN_RELATIVE_CHANGE = 0.05


@dataclass
class HostDiff:
    name: str
    only_in: str | None = None  # "a" or "b" when the host is in one run
    facts: list[tuple[str, str, str]] = field(default_factory=list)  # (what, before, after)
    files: dict[str, list[str]] = field(default_factory=dict)  # "now modified" → paths, …
    flags: list[tuple[str, str, str]] = field(default_factory=list)  # (flag, before, after)
    new_findings: list[str] = field(default_factory=list)
    resolved_findings: list[str] = field(default_factory=list)
    timings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.only_in
            or self.facts
            or self.files
            or self.flags
            or self.new_findings
            or self.resolved_findings
            or self.timings
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.name,
            "only_in": self.only_in,
            "facts": [{"what": w, "before": a, "after": b} for w, a, b in self.facts],
            "sglang_files": self.files,
            "server_flags": [{"flag": f, "before": a, "after": b} for f, a, b in self.flags],
            "new_findings": self.new_findings,
            "resolved_findings": self.resolved_findings,
            "copy_timings": self.timings,
        }


def diff_runs(a: LoadedRun, b: LoadedRun) -> list[HostDiff]:
    hosts_a, hosts_b = {h.name: h for h in a.hosts}, {h.name: h for h in b.hosts}
    findings_a, findings_b = _by_host(all_findings(a)), _by_host(all_findings(b))
    out = []
    for name in sorted(set(hosts_a) | set(hosts_b)):
        if name not in hosts_b:
            out.append(HostDiff(name, only_in="a"))
        elif name not in hosts_a:
            out.append(HostDiff(name, only_in="b"))
        else:
            out.append(host_diff(hosts_a[name], hosts_b[name], findings_a.get(name, {}), findings_b.get(name, {})))
    return out


def host_diff(a: HostResult, b: HostResult, findings_a: dict[str, str], findings_b: dict[str, str]) -> HostDiff:
    facts_a, facts_b = host_facts(a), host_facts(b)
    diff = HostDiff(a.name)
    for label, attribute in FACTS:
        before, after = str(getattr(facts_a, attribute)), str(getattr(facts_b, attribute))
        if before != after:
            diff.facts.append((label, before, after))
    env_a, env_b = _env_facts(a), _env_facts(b)
    diff.facts += [(label, env_a[label], env_b[label]) for label in env_a if env_a[label] != env_b[label]]
    flags_a, flags_b = server_flags(a), server_flags(b)
    for flag in sorted(set(flags_a) | set(flags_b)):
        if flags_a.get(flag) != flags_b.get(flag):
            diff.flags.append((flag, flags_a.get(flag, "-"), flags_b.get(flag, "-")))
    diff.files = _file_changes(a, b)
    diff.new_findings = sorted(findings_b[k] for k in set(findings_b) - set(findings_a))
    diff.resolved_findings = sorted(findings_a[k] for k in set(findings_a) - set(findings_b))
    diff.timings = moved_timings(a, b)
    return diff


def _env_facts(host: HostResult) -> dict[str, str]:
    """The Python that ran the probes and the torch install it saw: a venv swapped under the same
    versions, or torch's CUDA build changed, is a change."""
    env = as_dict(probe(host, "env"))
    python, torch = as_dict(env.get("python")), as_dict(env.get("torch"))
    return {
        "interpreter": str(python.get("executable") or "-"),
        "torch build": _torch_build(torch),
        "torch location": str(torch.get("file") or "-"),
    }


def _torch_build(torch: dict[str, Any]) -> str:
    if torch.get("cuda"):
        return f"CUDA {torch['cuda']}"
    if torch.get("hip"):
        return f"ROCm {torch['hip']}"
    return "CPU" if torch.get("version") else "-"


def server_flags(host: HostResult) -> dict[str, str]:
    """Every flag of the live servers, values of several servers joined: a changed flag is a change."""
    values: dict[str, set[str]] = {}
    for server in servers_of(host):
        for flag, value in server_args(server).items():
            values.setdefault(str(flag), set()).add(str(value))
    return {flag: ", ".join(sorted(v)) for flag, v in values.items()}


def _by_host(findings: list[Finding]) -> dict[str, dict[str, str]]:
    """{host: {rule id: "[severity] title (id)"}}: a rule is the same finding whatever numbers its title holds."""
    out: dict[str, dict[str, str]] = {}
    for finding in findings:
        for host in finding.hosts:
            out.setdefault(host, {})[f"{finding.id}/{finding.severity}"] = (
                f"[{finding.severity}] {finding.title} ({finding.id})"
            )
    return out


def _integrity(host: HostResult) -> dict[str, set[str]]:
    integrity = as_dict(as_dict(probe(host, "sglang_source")).get("integrity"))
    return {kind: {str(p) for p in as_list(integrity.get(kind))} for kind in ("modified", "missing", "unrecorded")}


def _file_changes(a: HostResult, b: HostResult) -> dict[str, list[str]]:
    before, after = _integrity(a), _integrity(b)
    out = {}
    for kind in ("modified", "missing", "unrecorded"):
        if after[kind] - before[kind]:
            out[f"now {kind}"] = sorted(after[kind] - before[kind])
        if before[kind] - after[kind]:
            out[f"no longer {kind}"] = sorted(before[kind] - after[kind])
    return out


def _timings(host: HostResult) -> Iterator[tuple[tuple[str, str, str, str], dict[str, Any]]]:
    """((gpu, workload, strategy, eager|graph), timing) for every measured copy timing."""
    for gpu in as_list(as_dict(probe(host, "copy_bench")).get("gpus")):
        gpu = as_dict(gpu)
        label = str(gpu.get("index", gpu.get("device", "?")))
        for workload in as_list(gpu.get("workloads")):
            workload = as_dict(workload)
            for strategy, timing in as_dict(workload.get("strategies")).items():
                timing = as_dict(timing)
                yield (label, str(workload.get("name")), str(strategy), "eager"), timing
                if isinstance(timing.get("graph"), dict):
                    yield (label, str(workload.get("name")), str(strategy), "graph"), timing["graph"]


def moved_timings(a: HostResult, b: HostResult) -> list[dict[str, Any]]:
    """Timings whose medians differ by more than both runs' p10–p90 spread (and by 5 % at least)."""
    before = dict(_timings(a))
    out = []
    for key, timing in _timings(b):
        old = before.get(key)
        if old is None or timing.get("status") != "ok" or old.get("status") != "ok":
            continue
        m_a, m_b = number(old.get("median_us")), number(timing.get("median_us"))
        if m_a is None or m_b is None or m_a <= 0:
            continue
        noise = max(_spread(old), _spread(timing))
        if abs(m_b - m_a) > noise and abs(m_b - m_a) >= MIN_RELATIVE_CHANGE * m_a:
            gpu, workload, strategy, mode = key
            out.append(
                {
                    "gpu": gpu,
                    "workload": workload,
                    "strategy": strategy,
                    "mode": mode,
                    "before_us": m_a,
                    "after_us": m_b,
                    "noise_us": round(noise, 3),
                    "change": round(m_b / m_a - 1.0, 3),
                }
            )
    return out


def _spread(timing: dict[str, Any]) -> float:
    p10, p90 = number(timing.get("p10_us")), number(timing.get("p90_us"))
    return p90 - p10 if p10 is not None and p90 is not None else 0.0
