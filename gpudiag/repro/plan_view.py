"""`repro cuda-graph-crash --plan`: the launches each host's probe planned (no GPU touched), as text or JSON.

The JSON for one host is `{"host", "launches": [{"algorithm", "argv", "env", "target_config", "draft_config",
"cells", "gpus", ...}], "budget": {...}, "gpus", "notes", "mode", "interpreter"}`; for several hosts,
`{"hosts": [that, ...]}`. Everything in it comes from the host: the text form is sanitised by the caller.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from gpudiag.models import HostResult

PROBE = "cuda_graph"


def host_plan(result: HostResult) -> dict[str, Any]:
    """The planned launches of one host, or {"host", "error"} when its probe gave no plan."""
    probe = result.probes.get(PROBE)
    if probe is None or probe.status != "ok" or not isinstance(probe.data, dict):
        why = result.reason or (probe and (probe.reason or (probe.error or {}).get("message") or probe.status))
        return {"host": result.name, "error": str(why or f"host {result.status}: the probe did not run")}
    plan = probe.data.get("plan")
    if not isinstance(plan, dict):
        return {"host": result.name, "error": "the host's cuda_graph probe gave no plan (an older bundle?)"}
    return {
        "host": result.name,
        "launches": [item for item in plan.get("launches") or [] if isinstance(item, dict)],
        "budget": plan.get("budget") if isinstance(plan.get("budget"), dict) else {},
        "gpus": plan.get("gpus") if isinstance(plan.get("gpus"), dict) else {},
        "notes": [str(n) for n in probe.data.get("notes") or []],
        "mode": probe.data.get("modes") or [probe.data.get("mode")],
        "sglang": (probe.data.get("environment") or {}).get("sglang"),
        "interpreter": probe.data.get("interpreter") or {},
    }


def as_json(plans: list[dict[str, Any]]) -> str:
    block: dict[str, Any] = plans[0] if len(plans) == 1 else {"hosts": plans}
    return json.dumps(block, indent=2, sort_keys=True)


def _compact(config: Any) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":")) if config is not None else "(none)"


def launch_lines(number: int, launch: dict[str, Any]) -> list[str]:
    cells = launch.get("cells") or []
    sizes = ",".join(str(c[0]) for c in cells if isinstance(c, list) and c)
    sources = launch.get("config_sources") or {}
    limits = launch.get("limits") or {}
    env = " ".join(f"{k}={v}" for k, v in sorted((launch.get("env") or {}).items()))
    lines = [
        f"launch {number}: {launch.get('algorithm')} at {launch.get('draft_tokens')} draft tokens "
        f"({launch.get('when', 'always')})",
        f"  argv: {shlex.join(str(word) for word in launch.get('argv') or [])}",
        f"  env (over the probe's own): {env or '(unchanged)'}",
        f"  cells: batch sizes {sizes or '?'} x {launch.get('draft_tokens')} draft tokens, one server",
        f"  GPUs: {_gpu_text(launch)}",
        f"  target config.json ({sources.get('target', '?')}, {launch.get('layers', '?')} layers): "
        f"{_compact(launch.get('target_config'))}",
        f"  draft config.json ({sources.get('draft', '?')}): {_compact(launch.get('draft_config'))}",
    ]
    if limits:
        lines.append(
            f"  limits: import check {limits.get('import_check_s')} s, ready {limits.get('ready_s')} s, "
            f"{limits.get('per_batch_size_s')} s per batch size, {limits.get('worst_s')} s at worst"
        )
    lines += [f"  note: {note}" for note in launch.get("config_notes") or []]
    if launch.get("omitted_flags"):
        lines.append(f"  flags this release lacks, left out: {' '.join(launch['omitted_flags'])}")
    if launch.get("refused"):
        lines.append(f"  REFUSED, never launched: {launch['refused']}")
    return lines


def _gpu_text(item: dict[str, Any]) -> str:
    gpus = item.get("gpus") or []
    chosen = ",".join(str(g) for g in gpus) if gpus else "none"
    return f"{chosen} ({item.get('gpus_why') or item.get('why') or 'no reason given'})"


def text_lines(plan: dict[str, Any]) -> list[str]:
    if plan.get("error"):
        return [f"{plan['host']}: no plan: {plan['error']}"]
    interp = plan.get("interpreter") or {}
    lines = [
        f"{plan['host']}: plan for sglang {plan.get('sglang') or '(not found)'}, mode {','.join(map(str, plan['mode']))}, "
        f"interpreter {interp.get('path', '?')} ({interp.get('why') or interp.get('reason') or '?'})",
        f"GPUs it would take: {_gpu_text(plan.get('gpus') or {})}",
    ]
    for number, launch in enumerate(plan["launches"], 1):
        lines += launch_lines(number, launch)
    if not plan["launches"]:
        lines.append("no sglang launch planned")
    budget = plan.get("budget") or {}
    lines.append(
        f"budget: probe {budget.get('probe_s')} s, {budget.get('reserve_s')} s kept back for cleanup, "
        f"{budget.get('work_s')} s of work; " + str(budget.get("what_fits") or "no sglang launches")
    )
    lines += [f"note: {note}" for note in plan.get("notes") or []]
    return lines
