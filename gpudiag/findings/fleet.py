"""Fleet drift: hosts that differ in sglang, torch, driver, CUDA, GPU model or deployment flags."""
from __future__ import annotations

from gpudiag.findings.facts import UNKNOWN, HostFacts, host_facts
from gpudiag.models import Evidence, Finding, HostResult

ASPECTS = (("sglang", "sglang version"), ("torch", "torch version"), ("driver", "NVIDIA driver"),
           ("cuda", "CUDA version"), ("gpu_model", "GPU model"))


def fleet_drift(hosts: list[HostResult]) -> list[Finding]:
    """Rule 8: one finding per aspect on which the scanned hosts disagree (unknown values are not drift)."""
    facts = [host_facts(h) for h in hosts if h.probes]
    if len(facts) < 2:
        return []
    findings = []
    for attr, label in ASPECTS:
        values = {f.name: getattr(f, attr) for f in facts}
        finding = _drift(f"fleet.drift.{attr}", label, values, "host environment (env, torch_caps, sglang_source)")
        if finding:
            findings.append(finding)
    flags = {f.name: dict(f.deployment_flags) for f in facts if f.deployment_flags}
    for flag in sorted({k for v in flags.values() for k in v}):
        finding = _drift("fleet.drift.flags", f"--{flag.replace('_', '-')}",
                         {name: v.get(flag, UNKNOWN) for name, v in flags.items()}, "sglang server command lines")
        if finding:
            findings.append(finding)
    return _merge_flags(findings)


def _drift(finding_id: str, label: str, values: dict[str, str], method: str) -> Finding | None:
    known = {name: value for name, value in values.items() if value != UNKNOWN}
    if len(set(known.values())) < 2:
        return None
    rows = (("host", label),) + tuple(sorted(known.items()))
    return Finding(
        id=finding_id, severity="warning", title=f"fleet drift: {label} differs between hosts "
                                                 f"({', '.join(sorted(set(known.values())))})",
        hosts=tuple(sorted(known)),
        evidence=(Evidence(kind="measurement", table=rows, text=f"{label} per host, from {method}"),),
        recommendation=f"Align {label} across the fleet, or keep the difference on purpose: findings and "
                       "timings from one host do not carry over to the others until it is.",
        sources=tuple(f"{name}/probes" for name in sorted(known)))


def _merge_flags(findings: list[Finding]) -> list[Finding]:
    """All drifting deployment flags in one finding: one table, one line in the summary."""
    flags = [f for f in findings if f.id == "fleet.drift.flags"]
    if len(flags) < 2:
        return findings
    hosts = tuple(sorted({h for f in flags for h in f.hosts}))
    rows = [("flag",) + hosts]
    for f in flags:
        per_host = dict(f.evidence[0].table[1:])  # type: ignore[index, arg-type]
        rows.append((f.evidence[0].table[0][1],) + tuple(per_host.get(h, UNKNOWN) for h in hosts))  # type: ignore[index]
    merged = Finding(
        id="fleet.drift.flags", severity="warning",
        title=f"fleet drift: {len(flags)} deployment flags differ between hosts",
        hosts=hosts, evidence=(Evidence(kind="flag", table=tuple(rows),
                                        text="sglang server flags per host, from the running servers' command lines"),),
        recommendation=flags[0].recommendation.replace(flags[0].evidence[0].table[0][1], "these flags"),  # type: ignore[index]
        sources=tuple(sorted({s for f in flags for s in f.sources})))
    return [f for f in findings if f.id != "fleet.drift.flags"] + [merged]
