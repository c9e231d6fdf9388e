"""Answers from what was measured on the GPUs: the replay copy's cost per decode step (Q5) and where CUDA graphs
break (Q6)."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.answers import (
    ANSWERED,
    NOT_CHECKED,
    PARTIAL,
    USABLE_STRATEGIES,
    Answer,
    _log_lines,
    _not_checked,
    no_gpu_reason,
    probe_gap,
)
from gpudiag.probe_view import as_dict, as_list, dig, fmt_us, number, probe
from gpudiag.findings.copies import ok_timing
from gpudiag.probe_view import copy_gpus, workloads
from gpudiag.findings.server_scope import scope
from gpudiag.models import HostResult


def q5_copy_cost(host: HostResult) -> Answer:
    command = "gpudiag scan HOST --deep"
    gap = probe_gap(host, "copy_bench", "--deep")
    if gap:
        return _not_checked("Q5", gap, command)
    gpus = copy_gpus(host, cuda_only=True)
    if not gpus:
        data = probe(host, "copy_bench") or {}
        why = no_gpu_reason(host) or ("measured on CPU only" if data.get("device") == "cpu" else "no GPU measured")
        return _not_checked("Q5", why, command)
    same: dict[str, list[str]] = {}
    for gpu in gpus:
        if gpu.get("status") != "ok":
            same.setdefault(f"not checked — {gpu.get('reason') or gpu.get('status')}", []).append(str(gpu.get("index")))
            continue
        best = _best_saving(gpu)
        if best:
            same.setdefault(best, []).append(str(gpu.get("index")))
    parts = [f"GPU{'s' if len(indices) > 1 else ''} {','.join(indices)}: {text}" for text, indices in same.items()]
    if not parts:
        return _not_checked("Q5", "no workload was measured", command)
    status = PARTIAL if any("not checked" in p for p in parts) else ANSWERED
    data = probe(host, "copy_bench") or {}
    ran_in = as_dict(data.get("interpreter")).get("path") or data.get("python")
    said = scope(host, str(ran_in) if ran_in else None, "timings")
    return Answer(
        "Q5",
        status,
        "; ".join(parts)
        + " (1 replay per path per decode step; step time not measured)"
        + (f"; {said}" if said else ""),
        command,
    )


def _best_saving(gpu: dict[str, Any]) -> str:
    """Per path, the largest batch size measured: installed µs/step → best usable strategy µs/step."""
    per_path: dict[str, dict[str, Any]] = {}
    for w in workloads(gpu):
        per_path[str(w.get("path"))] = w
    parts = []
    for path, w in sorted(per_path.items()):
        baseline = number(dig(w, "installed_baseline", "median_us"))
        if baseline is None and ok_timing(w, "installed"):
            baseline = number(ok_timing(w, "installed")["median_us"])  # type: ignore[index]
        usable = [(number(t["median_us"]), s) for s in USABLE_STRATEGIES if (t := ok_timing(w, s))]
        if baseline is None or not usable:
            continue
        best_us, best = min(usable, key=lambda pair: pair[0] or 0.0)
        saving = max(0.0, baseline - (best_us or 0.0))
        parts.append(
            f"{path} bs {w.get('batch_size')}: installed {fmt_us(baseline)}/step, {best} "
            f"{fmt_us(best_us)}/step, saves {fmt_us(saving)}/step"
        )
    return ", ".join(parts)


def _signature_name(cell: dict[str, Any]) -> str:
    signature = cell.get("signature")
    return str(signature.get("name") or "-") if isinstance(signature, dict) else str(signature or "no signature")


def q6_graph_breaks(host: HostResult) -> Answer:
    command = "gpudiag repro cuda-graph-crash HOST"
    logged = _log_lines(host, "", breaks_only=True)
    gap = probe_gap(host, "cuda_graph", "--deep or `gpudiag repro cuda-graph-crash`")
    if gap:
        return (
            Answer("Q6", ANSWERED, f"server log: {logged[0]}", command) if logged else _not_checked("Q6", gap, command)
        )
    data = probe(host, "cuda_graph") or {}
    answer = _q6_from_cells(data, command)
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
