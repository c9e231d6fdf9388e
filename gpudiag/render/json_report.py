"""The run's findings and summary as one JSON document (`gpudiag report --json`; see docs/report-json.md)."""
from __future__ import annotations

import json
from collections import Counter
from typing import Any, Sequence

from gpudiag.findings.facts import host_facts
from gpudiag.models import SEVERITIES, Finding
from gpudiag.models import LoadedRun

REPORT_SCHEMA = 1


def report_document(run: LoadedRun, findings: Sequence[Finding]) -> dict[str, Any]:
    m = run.manifest
    severities = Counter(f.severity for f in findings)
    statuses = Counter(h.status for h in run.hosts)
    return {
        "schema": REPORT_SCHEMA,
        "run": {"run_id": m.run_id, "kind": m.kind, "started_at": m.started_at, "finished_at": m.finished_at,
                "interrupted": m.interrupted, "gpudiag_version": m.gpudiag_version},
        "summary": {
            "hosts": {"total": len(run.hosts), "by_status": dict(sorted(statuses.items()))},
            "findings": {"total": len(findings), "by_severity": {s: severities.get(s, 0) for s in SEVERITIES}},
            "has_errors": any(f.severity in ("critical", "error") for f in findings),
        },
        "hosts": [host_facts(h).to_dict() for h in run.hosts],
        "findings": [f.to_dict() for f in findings],
    }


def render_json(run: LoadedRun, findings: Sequence[Finding]) -> str:
    return json.dumps(report_document(run, findings), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
