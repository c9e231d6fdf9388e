"""Reads the cuda_graph probe's data out of host results: the matrix, boundaries, signatures and advice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpudiag.models import HostResult

PROBE = "cuda_graph"
FAILING = (
    "capture_failed",
    "replay_failed",
    "mismatch",
    "device_fault",
    "timeout",
    "crashed_on_request",
    "hang",
    "silent_failure",
)
HARNESS_ERROR = "error"  # the cell could not be set up (bad config, launch error): not a graph failure


@dataclass(frozen=True)
class HostRepro:
    host: str
    ran: bool  # the probe produced data (even if every cell was skipped)
    reason: str
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def cells(self) -> list[dict[str, Any]]:
        return list(self.data.get("cells") or [])

    @property
    def all_skipped(self) -> bool:
        return all(c.get("status") == "skipped" for c in self.cells)

    @property
    def error_cells(self) -> list[dict[str, Any]]:
        return [c for c in self.cells if c.get("status") == HARNESS_ERROR]

    @property
    def failing_cells(self) -> list[dict[str, Any]]:
        return [c for c in self.cells if c.get("status") in FAILING]

    def environment_line(self) -> str:
        env = self.data.get("environment") or {}
        gpu = self.data.get("gpu") or {}
        parts = [
            f"GPU {gpu.get('name', '?')} ({gpu.get('compute_capability', '?')})" if gpu else "no GPU used",
            f"driver {env.get('driver') or '?'}",
            f"torch {env.get('torch') or 'absent'}",
            f"sglang {env.get('sglang') or 'not found'}",
            f"mode {self.data.get('mode', '?')}",
        ]
        return ", ".join(parts)


def host_repro(result: HostResult) -> HostRepro:
    probe = result.probes.get(PROBE)
    if probe is None:
        return HostRepro(result.name, False, result.reason or f"host {result.status}: the probe did not run")
    if probe.status != "ok" or not isinstance(probe.data, dict):
        detail = probe.reason or (probe.error or {}).get("message") or probe.status
        return HostRepro(result.name, False, f"cuda_graph {probe.status}: {detail}")
    return HostRepro(result.name, True, "", probe.data)


def outcome(repros: list[HostRepro]) -> str:
    """hosts_failed | failures | cells_failed_to_run | nothing_ran | ok, in that precedence."""
    if any(not r.ran for r in repros):
        return "hosts_failed"
    if any(r.failing_cells for r in repros):
        return "failures"
    if any(r.error_cells for r in repros):
        return "cells_failed_to_run"
    if all(r.all_skipped for r in repros):
        return "nothing_ran"
    return "ok"


def run_summary(repros: list[HostRepro], plan: dict[str, Any]) -> dict[str, Any]:
    """The `repro` block stored in run.json: enough for `gpudiag report` without opening host files."""
    hosts = []
    for r in repros:
        counts: dict[str, int] = {}
        for cell in r.cells:
            counts[cell.get("status", "?")] = counts.get(cell.get("status", "?"), 0) + 1
        hosts.append(
            {
                "host": r.host,
                "ran": r.ran,
                "reason": r.reason or r.data.get("skip_reason", ""),
                "environment": r.environment_line() if r.ran else "",
                "cell_counts": counts,
                "boundaries": [b.get("text") for b in r.data.get("boundaries") or [] if b.get("text")],
                "signatures": [s.get("name") for s in r.data.get("signatures") or []],
                "advice": list(r.data.get("advice") or []),
            }
        )
    return {"problem": "cuda-graph-crash", "plan": plan, "outcome": outcome(repros), "hosts": hosts}


COLUMNS = ("algorithm", "path", "bs", "draft", "status", "what happened")
# For cells recorded without their algorithm: EAGLE3 replays EAGLE's paths, so the path names EAGLE.
ALGORITHM_OF_PATH = {"eagle_draft": "EAGLE", "eagle_draft_extend": "EAGLE", "dflash_verify": "DFLASH"}


def _values(cells: list[dict[str, Any]], key: str) -> str:
    found = sorted({value for value in (c.get(key) for c in cells) if isinstance(value, int)})
    return ",".join(str(v) for v in found) or "?"


def cell_rows(repro: HostRepro) -> list[tuple[str, ...]]:
    """Matrix rows (COLUMNS), one per cell; skipped cells that differ only in batch size and draft tokens
    share one row with their count and the reason."""
    rows: list[tuple[tuple[Any, ...], tuple[str, ...]]] = []
    skipped: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for cell in repro.cells:
        path = str(cell.get("path", "?"))
        algorithm = str(cell.get("algorithm") or ALGORITHM_OF_PATH.get(path, "?"))
        if cell.get("status") == "skipped":
            skipped.setdefault((algorithm, path, str(cell.get("detail") or "no reason given")), []).append(cell)
            continue
        signature = (cell.get("signature") or {}).get("name")
        what = cell.get("detail") or ""
        if cell.get("max_abs_diff") is not None and cell.get("status") in ("ok", "mismatch"):
            what = (what + f" max|diff| {cell['max_abs_diff']:.2g}").strip()
        if signature:
            what = f"[{signature}] {what}"
        key = (algorithm, path, cell.get("batch_size") or 0, cell.get("draft_tokens") or 0)
        rows.append(
            (
                key,
                (
                    algorithm,
                    path,
                    str(cell.get("batch_size", "?")),
                    str(cell.get("draft_tokens", "?")),
                    str(cell.get("status", "?")),
                    what[:160],
                ),
            )
        )
    for (algorithm, path, reason), group in skipped.items():
        first = min((c.get("batch_size") or 0 for c in group), default=0)
        status = "skipped" if len(group) == 1 else f"skipped ×{len(group)}"
        rows.append(
            (
                (algorithm, path, first, -1),
                (algorithm, path, _values(group, "batch_size"), _values(group, "draft_tokens"), status, reason[:160]),
            )
        )
    return [
        row for _, row in sorted(rows, key=lambda r: tuple(str(k) if isinstance(k, str) else f"{k:09d}" for k in r[0]))
    ]
