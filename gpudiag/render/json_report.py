"""The run's findings and summary as one JSON document (`gpudiag report --json`; see docs/report-json.md)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Sequence

from gpudiag.findings import host_facts
from gpudiag.models import SEVERITIES, Finding, HostResult
from gpudiag.run_records import LoadedRun
from gpudiag.render.answers_block import answer_set
from gpudiag.render.bench_block import bench_rows, log_rows
from gpudiag.render.safe_text import clean_run
from gpudiag.verdict import Verdict, verdict as compute_verdict

REPORT_SCHEMA = 1


def report_document(run: LoadedRun, findings: Sequence[Finding], verdict: Verdict | None = None) -> dict[str, Any]:
    run = clean_run(run)
    verdict = verdict or compute_verdict(run, findings)
    answers = answer_set(run)
    m = run.manifest
    bench = bench_rows(run)
    severities = Counter(f.severity for f in findings)
    statuses = Counter(h.status for h in run.hosts)
    doc: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "run": {
            "run_id": m.run_id,
            "kind": m.kind,
            "started_at": m.started_at,
            "finished_at": m.finished_at,
            "interrupted": m.interrupted,
            "gpudiag_version": m.gpudiag_version,
        },
        "summary": {
            "hosts": {"total": len(run.hosts), "by_status": dict(sorted(statuses.items()))},
            "findings": {"total": len(findings), "by_severity": {s: severities.get(s, 0) for s in SEVERITIES}},
            "has_errors": any(f.severity in ("critical", "error") for f in findings),
            "coverage": answers.coverage,
            "all_checked": not answers.unchecked and not verdict.incomplete,
        },
        "verdict": verdict.to_dict(),
        "answers": answers.to_dict(),
        "hosts": [_host(h, verdict) for h in run.hosts],
        "findings": [f.to_dict() for f in findings],
    }
    if bench:  # a `gpudiag bench` run: its per-level rows (docs/serving.md)
        doc["bench"], doc["bench_log"] = bench, log_rows(run)
    return doc


def _host(host: HostResult, verdict: Verdict) -> dict[str, Any]:
    """The host's facts and its verdict status; a host whose data cannot be read says so."""
    status = next((h for h in verdict.hosts if h.name == host.name), None)
    try:
        doc = host_facts(host).to_dict()
    except Exception as exc:  # noqa: BLE001 - one host's odd data never breaks the fleet's report
        doc = {"name": host.name, "status": host.status, "unreadable": f"{type(exc).__name__}"}
    if status is not None:
        doc["verdict"] = {"status": status.status, "reasons": list(status.reasons)}
    if host.oom is not None:  # a SIGKILL's kernel-log verdict (gpudiag/oom_check.py), as stored
        doc["oom"] = host.oom
    return doc


def render_json(run: LoadedRun, findings: Sequence[Finding], verdict: Verdict | None = None) -> str:
    return (
        json.dumps(
            report_document(run, findings, verdict), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False
        )
        + "\n"
    )
