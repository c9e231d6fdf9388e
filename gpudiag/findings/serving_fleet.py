"""Speculation against its baseline, as a finding: the per-bucket table, what else differs between the two
servers, and the advice, rendered from the one comparison of gpudiag/findings/serving_compare.py."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.common import source
from gpudiag.findings.serving_compare import Comparison, compare
from gpudiag.findings.serving_view import cadence_note, eager_lines, graph_state
from gpudiag.models import Evidence, Finding, HostResult


def _cell(tok_s: float | None, figures: dict[str, Any]) -> str:
    if tok_s is None:
        return "-" if not figures else f"no figure ({figures.get('count', 0)} lines)"
    return f"{tok_s:g}" + (" (few)" if figures.get("few_sample") else "")


def _table(comparison: Comparison) -> tuple[tuple[str, ...], ...]:
    header = ("#running-req", f"{comparison.spec.algorithm} tok/s", "baseline tok/s", "ratio", "accept len")
    return (header,) + tuple(
        (
            r.bucket,
            _cell(r.spec_tok_s, r.spec),
            _cell(r.baseline_tok_s, r.base),
            f"{r.ratio:.2f}×" if r.ratio is not None else "not judged",
            f"{r.accept_len:.2f}" if r.accept_len is not None else "-",
        )
        for r in comparison.rows
    )


def _not_judged_text(comparison: Comparison) -> str:
    return "; ".join(f"{r.bucket}: {r.why_not(comparison.spec.algorithm)}" for r in comparison.not_judged)


def _evidence(comparison: Comparison) -> list[Evidence]:
    spec, base = comparison.spec, comparison.baseline
    who = (
        f"{spec.host.name} {spec.label} ({spec.algorithm}) against {base.host.name} {base.label} "
        f"(no speculation), model {comparison.model}"
    )
    evidence = [
        Evidence(
            kind="measurement",
            host=spec.host.name,
            text=who + ": median steady gen throughput of each server's own decode lines, by #running-req",
            table=_table(comparison),
        )
    ]
    if comparison.not_judged:
        evidence.append(Evidence(kind="text", text="not judged — " + _not_judged_text(comparison)))
    for d in comparison.differences:
        evidence.append(
            Evidence(
                kind="flag",
                text=f"differs besides speculation: {d.what} — "
                + (d.detail or f"{spec.algorithm} server {d.spec}, baseline {d.base}")
                + (f" ({d.explains})" if d.explains else ""),
            )
        )
    for item in (spec, base):
        eager = eager_lines(item)
        if eager:
            evidence.append(Evidence(kind="measurement", host=item.host.name, text=f"{item.label}: {eager[1]}"))
        note = cadence_note(item)
        if note:
            evidence.append(Evidence(kind="flag", host=item.host.name, text=note))
    return evidence


def _title(comparison: Comparison) -> str:
    spec = comparison.spec
    loses = comparison.stops_paying
    confounds = comparison.confounds
    tail = ""
    if confounds:
        tail = "; " + ", ".join(
            f"{d.what} also differ{'' if d.what.endswith('s') else 's'} ({d.spec} vs {d.base})" for d in confounds[:2]
        )
    if loses is not None and loses.ratio is not None:
        return (
            f"speculative decoding ({spec.algorithm}) loses from #running-req {loses.bucket}: {loses.ratio:.2f}× "
            f"the baseline ({loses.spec_tok_s:g} vs {loses.baseline_tok_s:g} tok/s)" + tail
        )
    judged = comparison.judged
    best = max((r.ratio or 0.0) for r in judged)
    if comparison.not_judged:
        return (
            f"speculative decoding ({spec.algorithm}) pays where judged ({', '.join(r.bucket for r in judged)}, "
            f"up to {best:.2f}× the baseline); not judged: {', '.join(r.bucket for r in comparison.not_judged)}" + tail
        )
    return f"speculative decoding ({spec.algorithm}) pays in every bucket logged, up to {best:.2f}× the baseline" + tail


def _advice(comparison: Comparison) -> tuple[str, str]:
    """(recommendation, action)."""
    loses = comparison.stops_paying
    graphs = next((d for d in comparison.confounds if d.what == "CUDA graphs"), None)
    others = [d for d in comparison.confounds if d is not graphs]
    alike = ""
    if graphs is not None:
        spec_off = graph_state(comparison.spec)[0] == "off"
        alike = (
            "The two servers differ in CUDA graphs as well as in speculation, and graphs alone can explain the gap: "
            + (
                "run the speculative server with graphs on (drop the flag that disables them) and compare again"
                if spec_off
                else "run the baseline with graphs on and compare again"
            )
        )
    if others:
        alike += (
            ("; " if alike else "")
            + "they also differ in "
            + ", ".join(d.what for d in others)
            + (": a like-for-like pair differs only in --speculative-algorithm")
        )
    if loses is None:
        text = "Speculation pays where both servers have figures" + (
            f"; buckets not judged ({_not_judged_text(comparison)}) need steady lines from both"
            if comparison.not_judged
            else ""
        )
        return (text + (". " + alike if alike else "") + ".", "")
    advice = (
        f"Speculation stops paying from #running-req {loses.bucket}: keep that load on the baseline, or cap the "
        "speculative server below it with --max-running-requests"
    )
    if alike:
        action = "Rerun the speculative server with CUDA graphs on, then compare" if graphs is not None else ""
        return (alike + ". Until then: " + advice[0].lower() + advice[1:] + ".", action)
    return advice + ".", f"Cap the speculative server below {loses.bucket} running requests (--max-running-requests)"


def spec_vs_baseline(hosts: list[HostResult]) -> list[Finding]:
    """The table for every pair: info where speculation pays where judged, a warning where it loses."""
    findings = []
    for comparison in compare(hosts):
        spec, base = comparison.spec, comparison.baseline
        hosts_named = tuple(dict.fromkeys((spec.host.name, base.host.name)))
        sources = tuple(dict.fromkeys(source(h, "deployment") for h in (spec.host, base.host)))
        advice, action = _advice(comparison)
        loses = comparison.stops_paying is not None
        findings.append(
            Finding(
                id="serving.speculation_loses" if loses else "serving.spec_vs_baseline",
                severity="warning" if loses else "info",
                title=_title(comparison),
                hosts=hosts_named,
                evidence=tuple(_evidence(comparison)),
                recommendation=advice,
                sources=sources,
                action=action,
            )
        )
    return findings
