"""Rule 3: large contiguous tensors (hidden_states) and the foreach group: one passed to a grouped foreach copy
where a plain copy_() would use the DMA engine, a measured size split off the group that is slower on this GPU, and
what this host's own timings say about hidden_states inside the foreach kernel against on its own copy_() (the
verdict itself is computed in gpudiag/findings/hidden_states_measured.py).

Measured costs come from the one ranking of gpudiag/findings/savings.py, as Q5 does."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.common import median, source, source_evidence
from gpudiag.findings.hidden_states_measured import (
    LARGE_FIELDS,
    SPLIT_MARGIN,
    hidden_states_verdict,
    measured_hidden_states,
)
from gpudiag.findings.savings import installed_section, rank
from gpudiag.models import Evidence, Finding, HostResult
from gpudiag.probe_view import as_dict, as_list, copy_gpus, dig, fmt_bytes, fmt_us, number, probe, workloads
from probes.copybench import strategies as strategy_facts


def hidden_states_split(hosts: list[HostResult]) -> list[Finding]:
    """Rule 3: a large contiguous tensor inside a foreach group, or a measured split that is wrong here."""
    findings = []
    for host in hosts:
        in_group = _large_field_in_group(host)
        findings += in_group
        # The measured verdict stands on its own only where no source finding already states it.
        for finding in (_measured_split(host), None if in_group else measured_hidden_states(host)):
            if finding:
                findings.append(finding)
    return findings


def _large_field_in_group(host: HostResult) -> list[Finding]:
    sglang = probe(host, "sglang_source")
    evidence = []
    for site in as_list(dig(sglang, "grouped_foreach_copy", "call_sites")):
        large = sorted(set(LARGE_FIELDS) & {str(f) for f in as_list(dig(site, "fields"))})
        if large:
            evidence.append(
                source_evidence(
                    host,
                    site,
                    f"{dig(site, 'qualname') or 'call site'} passes {', '.join(large)} to the grouped foreach copy",
                )
            )
    for path in ("draft", "draft_extend"):
        fact = as_dict(dig(sglang, "eagle", path))
        grouped = {str(f) for f in as_list(fact.get("grouped_fields"))}
        # grouped_fields is what really goes to the foreach call: a batched replay that copies no
        # hidden_states at all also reports hidden_states_separate false, and must not fire this rule.
        if set(LARGE_FIELDS) & grouped:
            first = (as_list(fact.get("evidence")) or [fact])[0]
            evidence.append(
                source_evidence(host, first, f"EAGLE {path} replay batches hidden_states with the small inputs")
            )
    if not evidence:
        return []
    split = _split_bytes(host)
    advice = f" (measured on this host: copy_() wins from {fmt_bytes(split)})" if split else ""
    verdict = hidden_states_verdict(host) or {}
    sources = [source(host, "sglang_source")]
    if verdict.get("keep") == "foreach":
        # This host's own GPU-stream figures say otherwise: the advice follows the data, not the PR.
        return [
            Finding(
                id="copies.hidden_states_in_foreach",
                severity="info",
                title="hidden_states is copied inside a foreach group, which this host measured as the faster way",
                hosts=(host.name,),
                evidence=tuple(evidence),
                recommendation=f"Keep it as it is here: {verdict['text']}.",
                sources=(*sources, source(host, "copy_bench")),
                action="Keep hidden_states inside the foreach group on this host (measured faster in GPU time)",
            )
        ]
    measured = f" Measured here: {verdict['text']}." if verdict.get("keep") == "copy_()" else ""
    if measured:
        sources.append(source(host, "copy_bench"))
    return [
        Finding(
            id="copies.hidden_states_in_foreach",
            severity="warning",
            title="hidden_states is copied inside a foreach group instead of by the DMA engine",
            hosts=(host.name,),
            evidence=tuple(evidence),
            recommendation="Keep large contiguous tensors such as hidden_states on a plain copy_() (a DMA copy) and "
            f"batch only the small inputs{advice}; sglang PR #28465 does this from 0.5.14.{measured}",
            sources=tuple(sources),
            action="Keep hidden_states on its own copy_() and batch only the small inputs (sglang 0.5.14+)",
        )
    ]


def _split_bytes(host: HostResult) -> float | None:
    values = [
        number(g.get("recommended_split_bytes") or g.get("crossover_bytes")) for g in copy_gpus(host, cuda_only=True)
    ]
    present = [v for v in values if v]
    return median(present)


def _split_off_bytes(workload: dict[str, Any]) -> float | None:
    """Bytes of the largest tensor the size split moved out of the group (the probe marks it size_split: dma)."""
    sizes = [
        number(f.get("bytes"))
        for f in as_list(workload.get("fields"))
        if isinstance(f, dict) and f.get("size_split") == "dma"
    ]
    present = [s for s in sizes if s]
    return max(present) if present else None


def _split_rows(host: HostResult) -> tuple[list[tuple[str, ...]], list[float], list[float]]:
    """(table rows of the workloads where the size split lost, sizes it lost at, sizes it won at), judged in GPU-stream
    time where both were replayed in a graph, else eagerly (the one ranking's costs)."""
    rows: list[tuple[str, ...]] = [
        ("GPU", "workload", "split off", "foreach, all fields", "foreach + copy_() split", "clock")
    ]
    losing, winning = [], []
    installed = installed_section(host)
    for gpu in copy_gpus(host, cuda_only=True):
        for w in workloads(gpu):
            costs = rank(w, installed).costs
            whole, split = costs.get(strategy_facts.GROUPED), costs.get(strategy_facts.SIZE_SPLIT)
            size = _split_off_bytes(w)
            if not whole or not split or size is None:
                continue  # nothing was split off: the two strategies are the same copies
            graph = whole.gpu_us is not None and split.gpu_us is not None
            a, b = (whole.gpu_us, split.gpu_us) if graph else (whole.cpu_us, split.cpu_us)
            if a is None or b is None:
                continue
            if b > a * (1 + SPLIT_MARGIN):
                losing.append(size)
                rows.append(
                    (str(gpu.get("index")), str(w.get("name")), fmt_bytes(size), fmt_us(a), fmt_us(b))
                    + ("GPU stream" if graph else "CPU issue",)
                )
            elif b < a * (1 - SPLIT_MARGIN):
                winning.append(size)
    return rows, losing, winning


def _measured_split(host: HostResult) -> Finding | None:
    """Workloads where moving a tensor out of the foreach group to copy_() by its size (the probe's
    grouped_foreach_size_split) made the replay slower than keeping it in the group."""
    rows, losing, winning = _split_rows(host)
    if not losing:
        return None
    models = sorted({str(g.get("name")) for g in copy_gpus(host, cuda_only=True) if g.get("name")})
    where = f"on {' + '.join(models)}" if models else "on this host's GPUs"
    above = [size for size in winning if size > max(losing)]
    if above:
        target = (
            f"split off only tensors of at least {fmt_bytes(min(above))} (where the split measured faster) "
            f"and keep tensors up to {fmt_bytes(max(losing))} in the foreach group"
        )
    else:
        target = (
            f"keep tensors up to {fmt_bytes(max(losing))} in the foreach group (no larger split was measured faster)"
        )
    crossover = median(v for v in (number(g.get("crossover_bytes")) for g in copy_gpus(host, cuda_only=True)) if v)
    note = (
        f" The single-tensor sweep puts the copy_() crossover at {fmt_bytes(crossover)}; inside a replay the "
        "extra copy costs more than the sweep shows."
        if crossover and crossover <= max(losing)
        else ""
    )
    return Finding(
        id="copies.split_wrong_for_gpu",
        severity="info",
        title=f"splitting tensors of {fmt_bytes(max(losing))} or less off the foreach group is slower {where}",
        hosts=(host.name,),
        evidence=(
            Evidence(
                kind="measurement",
                host=host.name,
                table=tuple(rows),
                text="replays measured both ways, medians "
                f"({dig(probe(host, 'copy_bench'), 'method') or 'copy_bench'})",
            ),
        ),
        recommendation=f"{where[0].upper()}{where[1:]}, {target}.{note}",
        sources=(source(host, "copy_bench"),),
        action=f"{where[0].upper()}{where[1:]}, {target}",
    )
