"""Fleet drift: hosts that differ in sglang, torch, driver, CUDA, GPU model, deployment flags, or copy timings
beyond their noise."""

from __future__ import annotations

from gpudiag.probe_view import fmt_us, number
from gpudiag.findings.copies import ok_timing
from gpudiag.probe_view import copy_gpus, workloads
from gpudiag.findings.facts import UNKNOWN, host_facts
from gpudiag.derived import remembered
from gpudiag.models import Evidence, Finding, HostResult
from probes.copybench import strategies as strategy_facts

ASPECTS = (
    ("sglang", "sglang"),
    ("torch", "torch"),
    ("driver", "NVIDIA driver"),
    ("cuda", "CUDA"),
    ("gpu_model", "GPU model"),
    # Graph settings as the servers resolve them, whichever spelling of the flags each release takes.
    ("cuda_graphs", "CUDA graphs (decode)"),
    ("graph_max_bs", "decode graph max batch size"),
)


def fleet_drift(hosts: list[HostResult]) -> list[Finding]:
    """Rule 8: one finding with a row per aspect on which the scanned hosts disagree.

    A host that did not report an aspect (probe missing) shows '-' and does not count as a difference.
    """
    facts = [host_facts(h) for h in hosts if h.probes]
    if len(facts) < 2:
        return []
    names = tuple(f.name for f in facts)
    rows: list[tuple[str, ...]] = []
    for attr, label in ASPECTS:
        rows.append((label,) + tuple(str(getattr(f, attr)) for f in facts))
    flags = [dict(f.deployment_flags) for f in facts]
    for flag in sorted({k for per_host in flags for k in per_host}):
        rows.append((f"--{flag.replace('_', '-')}",) + tuple(per_host.get(flag, UNKNOWN) for per_host in flags))
    rows += _timing_rows([h for h in hosts if h.probes])
    drifting = [row for row in rows if len({v for v in row[1:] if v != UNKNOWN}) > 1]
    if not drifting:
        return []
    involved = tuple(name for i, name in enumerate(names) if any(row[i + 1] != UNKNOWN for row in drifting))
    labels = [row[0] for row in drifting]
    return [
        Finding(
            id="fleet.drift",
            severity="warning",
            title=f"fleet drift: hosts differ in {', '.join(labels[:4])}"
            + (f" and {len(labels) - 4} more" if len(labels) > 4 else ""),
            hosts=involved,
            evidence=(
                Evidence(
                    kind="measurement",
                    table=(("aspect",) + names,) + tuple(drifting),
                    text="per host, from env, torch_caps and sglang_source (versions, GPUs) and the "
                    "running servers' command lines (flags)",
                ),
            ),
            recommendation="Align these across the fleet, or keep a difference on purpose: a finding or timing from "
            "one host does not carry over to a host that differs.",
            action="Align sglang, torch, driver and flags across the hosts, or keep each difference on purpose",
            sources=tuple(f"{name}/probes" for name in involved),
        )
    ]


def _timing_rows(hosts: list[HostResult]) -> list[tuple[str, ...]]:
    """Copy timings that moved beyond noise between hosts: the installed strategy's median per workload on each
    host's first GPU, kept when two hosts' p10–p90 ranges do not overlap."""
    per_host = [installed_timings(host) for host in hosts]
    rows = []
    for name in sorted({n for found in per_host for n in found}):
        timings = [found.get(name) for found in per_host]
        present = [t for t in timings if t]
        if len(present) < 2:
            continue
        apart = max(number(t["p10_us"]) or 0.0 for t in present) > min(number(t["p90_us"]) or 0.0 for t in present)
        if apart:
            rows.append(
                (f"copy {name}, installed (median)",) + tuple(fmt_us(t["median_us"]) if t else UNKNOWN for t in timings)
            )
    return rows


@remembered
def installed_timings(host: HostResult) -> dict[str, dict]:
    """The installed strategy's timing per workload on the host's first CUDA GPU, where it has p10 and p90."""
    gpus = copy_gpus(host, cuda_only=True)
    found = {}
    for w in workloads(gpus[0]) if gpus else []:
        timing = ok_timing(w, strategy_facts.INSTALLED)
        if timing and number(timing.get("p10_us")) is not None and number(timing.get("p90_us")) is not None:
            found[str(w.get("name"))] = timing
    return found
