"""Speculation against its baseline: live servers of the same model, some with speculative decoding and some
without, compared bucket by bucket (#running-req) on the median steady gen throughput of their own decode
lines. The comparison is computed once (`compare`) and the finding renders from it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from gpudiag.findings.common import source
from gpudiag.findings.serving import ServerFigures, serving_figures
from gpudiag.findings.server_flags import server_args
from gpudiag.models import Evidence, Finding, HostResult
from gpudiag.probe_view import as_dict
from probes.servingstats.buckets import BUCKET_NAMES

MAX_PAIRS = 8


@dataclass(frozen=True)
class BucketComparison:
    bucket: str
    spec_tok_s: float
    baseline_tok_s: float
    accept_len: float | None

    @property
    def ratio(self) -> float:
        return self.spec_tok_s / self.baseline_tok_s


@dataclass(frozen=True)
class Comparison:
    model: str
    spec: ServerFigures
    baseline: ServerFigures
    rows: tuple[BucketComparison, ...]

    @property
    def stops_paying(self) -> BucketComparison | None:
        """The first bucket (by concurrency) where speculation is slower than the baseline."""
        return next((row for row in self.rows if row.ratio < 1.0), None)

    def to_value(self) -> dict[str, Any]:
        loses = self.stops_paying
        return {
            "model": self.model,
            "spec": _who(self.spec),
            "baseline": _who(self.baseline),
            "buckets": [
                {
                    "bucket": r.bucket,
                    "spec_tok_s": r.spec_tok_s,
                    "baseline_tok_s": r.baseline_tok_s,
                    "ratio": round(r.ratio, 3),
                    "accept_len": r.accept_len,
                }
                for r in self.rows
            ],
            "stops_paying_at": loses.bucket if loses else None,
        }


def _who(item: ServerFigures) -> dict[str, Any]:
    return {"host": item.host.name, "pid": item.server.get("pid"), "algorithm": item.algorithm or None}


def model_of(item: ServerFigures) -> str:
    """The served model, by its last path part (one checkpoint under different mount points is one model)."""
    path = str(server_args(item.server).get("model_path") or server_args(item.server).get("model") or "")
    return os.path.basename(path.rstrip("/")) or ""


def _steady(item: ServerFigures, bucket: str) -> tuple[float | None, float | None]:
    found = as_dict(as_dict((item.figures or {}).get("buckets")).get(bucket))
    tput, accept = found.get("median_gen_throughput"), found.get("median_accept_len")
    return (
        float(tput) if isinstance(tput, (int, float)) and tput > 0 else None,
        float(accept) if isinstance(accept, (int, float)) else None,
    )


def compare(hosts: list[HostResult]) -> list[Comparison]:
    """Every (speculative, baseline) pair of one model with at least one bucket both measured."""
    items = [i for h in hosts for i in serving_figures(h) if i.figures and model_of(i)]
    out = []
    for spec in (i for i in items if i.algorithm):
        for base in (i for i in items if not i.algorithm and model_of(i) == model_of(spec)):
            rows = []
            for bucket in BUCKET_NAMES:
                (spec_tput, accept), (base_tput, _) = _steady(spec, bucket), _steady(base, bucket)
                if spec_tput is not None and base_tput is not None:
                    rows.append(BucketComparison(bucket, spec_tput, base_tput, accept))
            if rows:
                out.append(Comparison(model_of(spec), spec, base, tuple(rows)))
    return out[:MAX_PAIRS]


def _table(comparison: Comparison) -> tuple[tuple[str, ...], ...]:
    header = ("#running-req", f"{comparison.spec.algorithm} tok/s", "baseline tok/s", "ratio", "accept len")
    return (header,) + tuple(
        (
            r.bucket,
            f"{r.spec_tok_s:g}",
            f"{r.baseline_tok_s:g}",
            f"{r.ratio:.2f}×",
            f"{r.accept_len:.2f}" if r.accept_len is not None else "-",
        )
        for r in comparison.rows
    )


def spec_vs_baseline(hosts: list[HostResult]) -> list[Finding]:
    """The table for every pair, as info where speculation wins everywhere, as a warning where it loses."""
    findings = []
    for comparison in compare(hosts):
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
        eager = int(as_dict((spec.figures or {}).get("graph")).get("false") or 0)
        loses = comparison.stops_paying
        hosts_named = tuple(dict.fromkeys((spec.host.name, base.host.name)))
        sources = tuple(dict.fromkeys(source(h, "deployment") for h in (spec.host, base.host)))
        if loses is None:
            findings.append(
                Finding(
                    id="serving.spec_vs_baseline",
                    severity="info",
                    title=f"speculative decoding ({spec.algorithm}) pays in every bucket measured, up to "
                    f"{max(r.ratio for r in comparison.rows):.2f}× the baseline",
                    hosts=hosts_named,
                    evidence=tuple(evidence),
                    recommendation="Nothing to change; the table is the evidence.",
                    sources=sources,
                )
            )
            continue
        advice = (
            f"Speculation stops paying from #running-req {loses.bucket}: keep that load on the baseline, or cap "
            f"the speculative server below it with --max-running-requests"
        )
        if eager:
            advice += (
                f"; {eager} of its decode lines ran without CUDA graphs, which costs most at high "
                "concurrency: get graphs working first"
            )
        findings.append(
            Finding(
                id="serving.speculation_loses",
                severity="warning",
                title=f"speculative decoding ({spec.algorithm}) is slower than the baseline from #running-req "
                f"{loses.bucket}: {loses.spec_tok_s:g} vs {loses.baseline_tok_s:g} tok/s",
                hosts=hosts_named,
                evidence=tuple(evidence),
                recommendation=advice + ".",
                sources=sources,
            )
        )
    return findings
