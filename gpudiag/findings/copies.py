"""Copy findings: torch's `_foreach_copy_`, hidden_states inside foreach groups, GPUs with odd copy figures; and
which copy torch ran for each kind of tensor list (torch_caps paths), in words."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.common import source, source_evidence
from gpudiag.findings.savings import Cost, installed_section, rank
from gpudiag.probe_view import as_dict, as_list, copy_gpus, dig, fmt_us, number, probe, workloads
from gpudiag.models import Evidence, Finding, HostResult
from probes.copybench import strategies as strategy_facts

OUTLIER_RATIO = 0.20  # copy_bench's outlier tolerance and noise cut, for the wording only
NOISY_CV = 0.05  # (probes/copybench/analysis.py and timing.py decide)


def ok_timing(workload: dict[str, Any], strategy: str) -> dict[str, Any] | None:
    timing = dig(workload, "strategies", strategy)
    if isinstance(timing, dict) and timing.get("status", "ok") == "ok" and number(timing.get("median_us")) is not None:
        return timing
    return None


def _cost_table(gpu: dict[str, Any], installed: dict[str, Any]) -> tuple[tuple[str, ...], ...] | None:
    """Per workload: the per-tensor loop, the installed function and the best sglang can run, each in both clocks
    (CPU issue / GPU stream), from the one ranking (gpudiag/findings/savings.py)."""
    rows = [("workload", "fields", "per-tensor loop", "installed", "best (CPU issue / GPU stream)", "best time")]
    for w in workloads(gpu):
        ranked = rank(w, installed)
        if not any(ranked.best):
            continue
        rows.append(
            (
                str(w.get("name")),
                str(len(as_list(w.get("fields")))),
                _cost_text(ranked.costs.get(strategy_facts.LOOP)),
                _cost_text(ranked.costs.get(strategy_facts.INSTALLED)),
                " / ".join(str(b or "-") for b in ranked.best),
                ranked.best_cost.text(),
            )
        )
    return tuple(rows) if len(rows) > 1 else None


def _cost_text(cost: Cost | None) -> str:
    return cost.text() if cost else "-"


def _pair_failures(caps: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(device, check, outcome) for every functional check that did not come out ok."""
    failures = []
    for device, check in sorted(as_dict(caps.get("checks")).items()):
        for pair, outcome in sorted(as_dict(as_dict(check).get("pairs")).items()):
            if outcome != "ok":
                failures.append((device, pair, str(outcome)))
        outcome = as_dict(check).get("non_contiguous")
        if outcome not in (None, "ok"):
            failures.append((device, "non-contiguous", str(outcome)))
    return failures


def torch_foreach_copy(hosts: list[HostResult]) -> list[Finding]:
    """Rule 1: torch without a working `_foreach_copy_` → sglang copies graph inputs one tensor at a time."""
    findings = []
    for host in hosts:
        caps = probe(host, "torch_caps")
        if caps is None:
            continue
        version = caps.get("torch_version") or "?"
        if caps.get("has_foreach_copy") is False:
            findings.append(_missing_foreach(host, version))
        failures = _pair_failures(caps)
        if failures and caps.get("has_foreach_copy") is not False:
            wrong = any(outcome.startswith("wrong") for _, _, outcome in failures)
            table = (("device", "check", "outcome"),) + tuple(failures)
            findings.append(
                Finding(
                    id="copies.foreach_copy_broken",
                    severity="critical" if wrong else "error",
                    title=f"torch {version}: torch._foreach_copy_ fails its functional check "
                    f"({'wrong results' if wrong else 'raises'})",
                    hosts=(host.name,),
                    evidence=(
                        Evidence(
                            kind="measurement",
                            host=host.name,
                            table=table,
                            text="each dtype pair copied with one _foreach_copy_ call and compared with "
                            "a per-tensor copy_",
                        ),
                    ),
                    recommendation="sglang calls torch._foreach_copy_ whenever torch has it, so CUDA-graph inputs on "
                    "this host are copied by the failing path; use a torch build whose check passes "
                    "and rerun `gpudiag scan --probes torch_caps`.",
                    sources=(source(host, "torch_caps"),),
                    action="Use a torch build whose torch._foreach_copy_ check passes",
                )
            )
    return findings


def _missing_foreach(host: HostResult, version: str) -> Finding:
    evidence = [
        Evidence(
            kind="measurement",
            host=host.name,
            text=f"torch {version} has no torch._foreach_copy_ (checked with hasattr on the host)",
        )
    ]
    sources = [source(host, "torch_caps")]
    for flag in as_list(dig(probe(host, "sglang_source"), "grouped_foreach_copy", "has_foreach_copy_flag")):
        evidence.append(source_evidence(host, flag, "sglang falls back to a per-tensor copy_ loop here"))
        sources.append(source(host, "sglang_source"))
    gpus = copy_gpus(host, cuda_only=True)
    table = _cost_table(gpus[0], installed_section(host)) if gpus else None
    if table:
        evidence.append(
            Evidence(
                kind="measurement",
                host=host.name,
                table=table,
                text=f"cost per replay on GPU {gpus[0].get('index')} "
                f"({dig(probe(host, 'copy_bench'), 'method') or 'copy_bench'})",
            )
        )
        sources.append(source(host, "copy_bench"))
    return Finding(
        id="copies.no_foreach_copy",
        severity="warning",
        title=f"torch {version} lacks torch._foreach_copy_: sglang copies CUDA-graph inputs one tensor at a time",
        hosts=(host.name,),
        evidence=tuple(evidence),
        recommendation="Install a torch release that has torch._foreach_copy_ (added by PyTorch PR #107226, "
        "Aug 2023) so sglang's _grouped_foreach_copy_ issues one kernel per dtype pair.",
        sources=tuple(dict.fromkeys(sources)),
        action="Install a torch that has torch._foreach_copy_ (PyTorch PR #107226)",
    )


def gpu_copy_outliers(hosts: list[HostResult]) -> list[Finding]:
    """Rule 7: the GPUs copy_bench itself named as outliers (probes/copybench/analysis.py decides: the median
    of a GPU's steady ratios to its siblings more than 20% off, three GPUs or more); this rule only words it."""
    findings = []
    for host in hosts:
        outliers = [o for o in as_list(dig(probe(host, "copy_bench"), "outliers")) if isinstance(o, dict)]
        rows = [("GPU", "metrics off", "median ratio", "worst metric", "this GPU", "siblings (median)", "ratio")]
        for o in outliers:
            compared = str(o.get("metrics_compared", "-"))
            off = f"{o['metrics_off'] if isinstance(o.get('metrics_off'), int) else 'unknown'} of {compared}"
            rows.append(
                (
                    str(o.get("index")),
                    off,
                    _ratio(o.get("median_ratio")),
                    str(o.get("metric") or "-"),
                    fmt_us(number(o.get("value"))),
                    fmt_us(number(o.get("siblings_median"))),
                    _ratio(o.get("ratio")),
                )
            )
        if len(rows) == 1:
            continue
        indexes = [r[0] for r in rows[1:]]
        findings.append(
            Finding(
                id="copies.gpu_outlier",
                severity="warning",
                title=f"GPU {', '.join(indexes)} copies more than {OUTLIER_RATIO:.0%} off its siblings",
                hosts=(host.name,),
                evidence=(
                    Evidence(
                        kind="measurement",
                        host=host.name,
                        table=tuple(rows),
                        text="copy_bench's verdict: each steady median (same workload and strategy, cv at "
                        f"most {NOISY_CV:.0%}) divided by the median of the other GPUs of the host; "
                        "the median of those ratios decides",
                    ),
                ),
                recommendation="Check that GPU's link: `nvidia-smi topo -m`, `nvidia-smi nvlink -s`, and "
                "`nvidia-smi -q -d PCIE` for a downgraded PCIe generation or width.",
                sources=(source(host, "copy_bench"),),
                action="Check the outlier GPU's link: `nvidia-smi topo -m`, `nvidia-smi nvlink -s`, "
                "`nvidia-smi -q -d PCIE`",
            )
        )
    return findings


def _ratio(value: Any) -> str:
    found = number(value)
    return f"{found:.2f}" if found is not None else "-"


# torch_caps `paths`: which copy ran for each kind of tensor list sglang's replays hand to _foreach_copy_.
COPY_LIST_KINDS = (
    ("contiguous_same_dtype", "same-dtype contiguous"),
    ("non_contiguous", "non-contiguous"),
    ("mixed_pairs_one_call", "mixed dtype pairs"),
)
COPY_PATH_NAMES = {"fast": "fast multi_tensor_apply", "per_tensor": "per-tensor"}


def copy_path_text(check: dict[str, Any]) -> str:
    """'fast multi_tensor_apply for same-dtype contiguous; per-tensor for non-contiguous, mixed dtype pairs', from
    one device's torch_caps `paths`; '' when the probe recorded none."""
    paths = as_dict(as_dict(check).get("paths"))
    by_path: dict[str, list[str]] = {}
    for key, label in COPY_LIST_KINDS:
        found = as_dict(paths.get(key))
        if not found:
            continue
        name = str(found.get("path") or "unknown")
        if name not in COPY_PATH_NAMES:
            why = found.get("reason")
            name = "path unknown" + (f" ({why})" if why else "")
        else:
            name = COPY_PATH_NAMES[name]
        by_path.setdefault(name, []).append(label)
    return "; ".join(f"{name} for {', '.join(labels)}" for name, labels in by_path.items())
