"""Answers from what was measured on the GPUs: the replay copy's cost per decode step (Q5) and where CUDA graphs
break (Q6)."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.answers import (
    ANSWERED,
    NOT_CHECKED,
    PARTIAL,
    Answer,
    _log_lines,
    _not_checked,
    no_gpu_reason,
    probe_gap,
)
from gpudiag.probe_view import as_dict, as_list, fmt_us, probe
from gpudiag.findings.savings import REPLAYS_PER_STEP, host_savings
from gpudiag.probe_view import copy_gpus
from gpudiag.findings.gpu_room import room
from gpudiag.findings.server_scope import scope
from gpudiag.models import HostResult


def _gpu_gap(qid: str, host: HostResult, gap: str, command: str) -> Answer:
    """A GPU check that did not run: offered again only where some GPU could take it, else said why not."""
    blocked = room(host).blocked_gap()
    if blocked:
        return _not_checked(qid, f"{gap.split(' (run it with')[0]}; {blocked}")
    return _not_checked(qid, gap, command)


def q5_copy_cost(host: HostResult) -> Answer:
    command = "gpudiag scan HOST --deep"
    gap = probe_gap(host, "copy_bench", "--deep")
    if gap:
        return _gpu_gap("Q5", host, gap, command)
    gpus = copy_gpus(host, cuda_only=True)
    if not gpus:
        data = probe(host, "copy_bench") or {}
        why = no_gpu_reason(host) or ("measured on CPU only" if data.get("device") == "cpu" else "no GPU measured")
        return _not_checked("Q5", why, command)
    savings = {s.gpu: s for s in host_savings(host)}
    unmeasured = {str(g.get("index")): str(g.get("reason") or g.get("status")) for g in gpus if g.get("status") != "ok"}
    if not savings:
        return _not_checked("Q5", "no workload was measured", command)
    lost = [
        {"gpu": str(g.get("index")), "field_sets": [str(f) for f in as_list(g.get("lost_field_sets"))]}
        for g in gpus
        if as_list(g.get("lost_field_sets"))
    ]
    value = {
        "gpus": [s.to_dict() for s in savings.values()],
        "not_measured": [{"gpu": gpu, "reason": why} for gpu, why in unmeasured.items()],
        "lost_to_budget": lost,
        "replays_per_step": REPLAYS_PER_STEP,
        "step_time_measured": False,
    }
    data = probe(host, "copy_bench") or {}
    ran_in = as_dict(data.get("interpreter")).get("path") or data.get("python")
    said = scope(host, str(ran_in) if ran_in else None, "timings")
    return Answer(
        "Q5",
        PARTIAL if unmeasured or lost else ANSWERED,
        q5_text(value) + (f"; {said}" if said else ""),
        command,
        value,
    )


def q5_text(value: dict[str, Any]) -> str:
    """Q5's sentence, rendered from its value: GPUs with the same figures share one clause."""
    same: dict[str, list[str]] = {}
    for gpu in as_list(value.get("gpus")):
        paths = ", ".join(
            f"{p['path']} bs {p['batch_size']}: installed {fmt_us(p['installed_us'])}, {p['best']} "
            f"{fmt_us(p['best_us'])}, saves {fmt_us(p['saving_us_per_replay'])}"
            for p in gpu["paths"]
        )
        same.setdefault(
            f"saves {fmt_us(gpu['saving_us_per_step'])} per decode step ({paths}; {gpu['basis']})", []
        ).append(gpu["gpu"])
    for gap in as_list(value.get("not_measured")):
        same.setdefault(f"not checked — {gap['reason']}", []).append(gap["gpu"])
    for gap in as_list(value.get("lost_to_budget")):  # each GPU's rotated order loses different sets
        same.setdefault(f"{', '.join(gap['field_sets'])} not measured (time budget spent)", []).append(gap["gpu"])
    parts = [f"GPU{'s' if len(ids) > 1 else ''} {','.join(ids)}: {text}" for text, ids in same.items()]
    return (
        "; ".join(parts)
        + f" ({value.get('replays_per_step', 1)} replay per path per decode step; step time not measured)"
    )


def _signature_name(cell: dict[str, Any]) -> str:
    signature = cell.get("signature")
    return str(signature.get("name") or "-") if isinstance(signature, dict) else str(signature or "no signature")


def q6_graph_breaks(host: HostResult) -> Answer:
    command = "gpudiag repro cuda-graph-crash HOST"
    logged = _log_lines(host, "", breaks_only=True)
    gap = probe_gap(host, "cuda_graph", "--deep or `gpudiag repro cuda-graph-crash`")
    if gap:
        return (
            Answer("Q6", ANSWERED, f"server log: {logged[0]}", command)
            if logged
            else _gpu_gap("Q6", host, gap, command)
        )
    data = probe(host, "cuda_graph") or {}
    answer = _q6_from_cells(data, command)
    if logged:  # a deeper run never drops what the server's own log showed
        cells_said = answer.text if answer.status != NOT_CHECKED else f"repro {answer.text}"
        answer = Answer("Q6", ANSWERED, f"server log: {logged[0]}; {cells_said}", command)
    ran_in = as_dict(data.get("interpreter")).get("path")
    said = scope(host, str(ran_in) if ran_in else None, "graph results") if answer.status != NOT_CHECKED else ""
    return Answer("Q6", answer.status, f"{answer.text}; {said}", command) if said else answer


def _q6_from_cells(data: dict[str, Any], command: str) -> Answer:
    cells = [c for c in as_list(data.get("cells")) if isinstance(c, dict)]
    ran = [c for c in cells if c.get("status") != "skipped"]
    if not ran:
        return _not_checked("Q6", str(data.get("skip_reason") or "every cell skipped"), command)
    failing = [c for c in ran if c.get("status") not in ("ok", "error")]
    gpu = as_dict(data.get("gpu"))
    on = f"GPU {gpu.get('index', '?')} {gpu.get('compute_capability') or ''}".strip()
    if not failing:
        return Answer("Q6", ANSWERED, f"no break in {len(ran)} cells on {on} ({data.get('mode')} mode)", command)
    signature_of = {str(s.get("name")): s for s in as_list(data.get("signatures")) if isinstance(s, dict)}
    breaks = sorted(
        {(str(c.get("algorithm")), str(c.get("path")), str(c.get("status")), _signature_name(c)) for c in failing}
    )
    parts = []
    for algorithm, path, status, signature in breaks:
        mine = [c for c in failing if (str(c.get("path")), _signature_name(c)) == (path, signature)]
        sizes = sorted({int(c["batch_size"]) for c in mine if isinstance(c.get("batch_size"), int)})
        tokens = sorted({int(c["draft_tokens"]) for c in mine if isinstance(c.get("draft_tokens"), int)})
        ref = as_dict(signature_of.get(signature)).get("reference")
        parts.append(
            f"{algorithm} {path} {status} at bs {','.join(map(str, sizes))} × draft tokens "
            f"{','.join(map(str, tokens))} ({signature}" + (f", {ref})" if ref else ")")
        )
    return Answer("Q6", ANSWERED, f"on {on}: " + "; ".join(parts), command)
