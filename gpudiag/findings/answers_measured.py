"""Answers from what was measured on the GPUs: the replay copy's cost per decode step (Q5) and where CUDA graphs
break (Q6). Each carries its value (the savings per GPU; the logged crash line and the repro's breaks and
boundaries) and renders its sentence from it (q5_text, q6_text)."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.answers import (
    ANSWERED,
    PARTIAL,
    Answer,
    _log_lines,
    _not_checked,
    no_gpu_reason,
    probe_gap,
    with_scope,
)
from gpudiag.probe_view import as_dict, as_list, fmt_us, number, probe
from gpudiag.findings.savings import REPLAYS_PER_STEP
from gpudiag.findings.step_savings import host_savings
from gpudiag.probe_view import copy_gpus, cut_short
from gpudiag.findings.gpu_room import room
from gpudiag.findings.hidden_states_measured import hidden_states_verdict
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
    # A GPU whose benchmark was cut short (timeout, hang, death) keeps the workloads it measured first.
    cut = {str(g.get("index")): cut_short(g) for g in gpus if cut_short(g)}
    unmeasured = {
        str(g.get("index")): str(g.get("reason") or g.get("status"))
        for g in gpus
        if (g.get("status") != "ok" and str(g.get("index")) not in cut) or str(g.get("index")) not in savings
    }
    for gpu, why in list(unmeasured.items()):
        if why == "ok":
            unmeasured[gpu] = "no workload was timed on it"
    if not savings:
        return _not_checked("Q5", "no workload was measured (" + _reasons(unmeasured) + ")", command)
    lost = [
        {
            "gpu": str(g.get("index")),
            "field_sets": [str(f) for f in as_list(g.get("lost_field_sets"))],
            "needs_s": number(g.get("time_needed_s")),
        }
        for g in gpus
        if as_list(g.get("lost_field_sets"))
    ]
    needs = {str(g.get("index")): number(g.get("needs_s")) for g in gpus}
    value: dict[str, Any] = {
        "gpus": [s.to_dict() for s in savings.values()],
        "not_measured": [{"gpu": gpu, "reason": why, "needs_s": needs.get(gpu)} for gpu, why in unmeasured.items()],
        "lost_to_budget": lost,
        "cut_short": _cut_short(cut, savings),
        "replays_per_step": REPLAYS_PER_STEP,
        "step_time_measured": False,
        "hidden_states": hidden_states_verdict(host),
    }
    data = probe(host, "copy_bench") or {}
    ran_in = as_dict(data.get("interpreter")).get("path") or data.get("python")
    value["scope"] = scope(host, str(ran_in) if ran_in else None, "timings") or None
    return Answer(
        "Q5",
        PARTIAL
        if unmeasured or lost or value["cut_short"] or any(s.saving is None for s in savings.values())
        else ANSWERED,
        q5_text(value),
        command,
        value,
    )


def _cut_short(cut: dict[str, dict[str, Any]], savings: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPUs cut short whose kept workloads gave figures: how many of how many, and the time the rest needs."""
    return [
        {"gpu": gpu, "measured": c.get("measured"), "planned": c.get("planned"), "needs_s": number(c.get("needs_s"))}
        for gpu, c in cut.items()
        if gpu in savings
    ]


def _reasons(unmeasured: dict[str, str]) -> str:
    return "; ".join(f"GPU {gpu}: {why}" for gpu, why in unmeasured.items()) or "copy_bench timed nothing"


def _pair(pair: Any) -> str:
    """'38.1 µs CPU issue / 4.1 µs GPU stream' from a {cpu_issue_us, gpu_stream_us} value."""
    found = as_dict(pair)
    return f"{fmt_us(found.get('cpu_issue_us'))} CPU issue / {fmt_us(found.get('gpu_stream_us'))} GPU stream"


def _path_text(p: dict[str, Any], shared_gap: str | None) -> str:
    where = f"{p['path']} bs {p['batch_size']}" + (f" h{p['hidden_size']}" if p.get("hidden_size") else "")
    best = as_dict(p.get("best"))
    cpu, gpu = as_dict(best.get("cpu_issue")), as_dict(best.get("gpu_stream"))
    said = (
        f"best {cpu.get('strategy') or '-'} {fmt_us(cpu.get('us'))} CPU issue / "
        f"{gpu.get('strategy') or '-'} {fmt_us(gpu.get('us'))} GPU stream"
    )
    base = p.get("baseline")
    if not isinstance(base, dict):
        return f"{where}: {said}" + (
            "" if p.get("no_baseline") == shared_gap else f", no baseline — {p['no_baseline']}"
        )
    name = "installed" if base.get("kind") == "installed" else f"sglang {base.get('release')}'s known strategy"
    return (
        f"{where}: {name} ({base.get('strategy')}) {_pair(base)}, {said}, saves {_pair(p.get('saving_us_per_replay'))}"
    )


def _gpu_text(gpu: dict[str, Any]) -> str:
    """One GPU's clause: the step's saving when a baseline exists, each path's costs, the reason a baseline is
    missing (said once when every path shares it) and the batch size read."""
    paths = [as_dict(p) for p in as_list(gpu.get("paths"))]
    gaps = {str(p.get("no_baseline")) for p in paths if not isinstance(p.get("baseline"), dict)}
    shared = gaps.pop() if len(gaps) == 1 and all(not isinstance(p.get("baseline"), dict) for p in paths) else None
    body = "; ".join(_path_text(p, shared) for p in paths)
    saving = as_dict(gpu.get("saving_per_step"))
    if gpu.get("saving_us_per_step") is not None:
        head = (
            f"saves {fmt_us(gpu['saving_us_per_step'])} per decode step of CPU issue "
            f"({fmt_us(saving.get('gpu_stream_us'))} of GPU stream) ("
        )
    else:
        head = "copy cost per replay, CPU issue / GPU stream ("
    tail = f"; no baseline — {shared}" if shared else ""
    return f"{head}{body}; {gpu.get('basis')}){tail}"


def _need(gap: dict[str, Any], lead: str = "; ") -> str:
    """'; about 12 s more would measure it' where the probe said how long the missing work takes."""
    need = number(as_dict(gap).get("needs_s"))
    return f"{lead}about {need:.0f} s more would measure it" if need else ""


def q5_text(value: dict[str, Any]) -> str:
    """Q5's sentence, rendered from its value: GPUs with the same figures share one clause."""
    same: dict[str, list[str]] = {}
    for gpu in as_list(value.get("gpus")):
        same.setdefault(_gpu_text(as_dict(gpu)), []).append(str(as_dict(gpu).get("gpu")))
    for gap in as_list(value.get("not_measured")):
        same.setdefault(f"not checked — {gap['reason']}{_need(gap)}", []).append(gap["gpu"])
    for gap in as_list(value.get("lost_to_budget")):  # each GPU's rotated order loses different sets
        text = f"{', '.join(gap['field_sets'])} not measured (time budget spent{_need(gap, ', ')})"
        same.setdefault(text, []).append(gap["gpu"])
    for gap in as_list(value.get("cut_short")):  # the figures above are the workloads it measured first
        text = f"measurement cut short ({gap['measured']} of {gap['planned']} workloads measured{_need(gap, ', ')})"
        same.setdefault(text, []).append(gap["gpu"])
    parts = [f"GPU{'s' if len(ids) > 1 else ''} {','.join(ids)}: {text}" for text, ids in same.items()]
    hidden = as_dict(value.get("hidden_states"))
    return with_scope(
        "; ".join(parts)
        + f" ({value.get('replays_per_step', 1)} replay per path per decode step; step time not measured)"
        + (f"; {hidden['text']}" if hidden.get("text") else ""),
        value,
    )


def _signature_name(cell: dict[str, Any]) -> str:
    signature = cell.get("signature")
    return str(signature.get("name") or "-") if isinstance(signature, dict) else str(signature or "no signature")


def q6_graph_breaks(host: HostResult) -> Answer:
    command = "gpudiag repro cuda-graph-crash HOST"
    logged = _log_lines(host, "", breaks_only=True)
    gap = probe_gap(host, "cuda_graph", "--deep or `gpudiag repro cuda-graph-crash`")
    if gap and not logged:
        return _gpu_gap("Q6", host, gap, command)
    data = {} if gap else probe(host, "cuda_graph") or {}
    value: dict[str, Any] = {"log": logged[0] if logged else None, "repro": None if gap else _repro(data)}
    if not logged and not as_dict(value["repro"]).get("cells_run"):
        return _not_checked("Q6", as_dict(value["repro"]).get("skip_reason") or "every cell skipped", command)
    ran_in = as_dict(data.get("interpreter")).get("path")
    value["scope"] = None if gap else scope(host, str(ran_in) if ran_in else None, "graph results") or None
    return Answer("Q6", ANSWERED, q6_text(value), command, value)


def _repro(data: dict[str, Any]) -> dict[str, Any]:
    """What the repro cells showed: where graphs broke (algorithm, path, status, signature, sizes) and the
    probe's own boundary per sweep."""
    cells = [c for c in as_list(data.get("cells")) if isinstance(c, dict)]
    ran = [c for c in cells if c.get("status") != "skipped"]
    failing = [c for c in ran if c.get("status") not in ("ok", "error")]
    gpu = as_dict(data.get("gpu"))
    references = {
        str(s.get("name")): s.get("reference") for s in as_list(data.get("signatures")) if isinstance(s, dict)
    }
    breaks = []
    for algorithm, path, status, signature in sorted(
        {(str(c.get("algorithm")), str(c.get("path")), str(c.get("status")), _signature_name(c)) for c in failing}
    ):
        mine = [c for c in failing if (str(c.get("path")), _signature_name(c)) == (path, signature)]
        breaks.append(
            {
                "algorithm": algorithm,
                "path": path,
                "status": status,
                "batch_sizes": sorted({int(c["batch_size"]) for c in mine if isinstance(c.get("batch_size"), int)}),
                "draft_tokens": sorted(
                    {int(c["draft_tokens"]) for c in mine if isinstance(c.get("draft_tokens"), int)}
                ),
                "signature": signature,
                "reference": references.get(signature),
            }
        )
    boundaries = [
        {k: b.get(k) for k in ("label", "failing_from_batch_size", "safe_up_to", "fail_status")}
        for b in as_list(data.get("boundaries"))
        if isinstance(b, dict)
    ]
    return {
        "gpu": gpu.get("index"),
        "compute_capability": gpu.get("compute_capability"),
        "mode": data.get("mode"),
        "cells_run": len(ran),
        "skip_reason": None if ran else str(data.get("skip_reason") or "every cell skipped"),
        "breaks": breaks,
        "boundaries": boundaries,
    }


def _repro_text(repro: dict[str, Any]) -> str:
    if not repro["cells_run"]:
        return f"not checked — {repro['skip_reason']}"
    gpu = "?" if repro.get("gpu") is None else repro["gpu"]
    on = f"GPU {gpu} {repro.get('compute_capability') or ''}".strip()
    if not repro["breaks"]:
        return f"no break in {repro['cells_run']} cells on {on} ({repro.get('mode')} mode)"
    parts = [
        f"{b['algorithm']} {b['path']} {b['status']} at bs {','.join(map(str, b['batch_sizes']))} × draft tokens "
        f"{','.join(map(str, b['draft_tokens']))} ({b['signature']}"
        + (f", {b['reference']})" if b["reference"] else ")")
        for b in repro["breaks"]
    ]
    return f"on {on}: " + "; ".join(parts)


def q6_text(value: dict[str, Any]) -> str:
    """Q6's sentence, from its value: the server log's own crash line first, then what the repro cells showed."""
    repro = value.get("repro")
    parts = [f"server log: {value['log']}"] if value.get("log") else []
    if repro is not None:
        said = _repro_text(repro)
        parts.append(f"repro {said}" if value.get("log") and not repro["cells_run"] else said)
    return with_scope("; ".join(parts), value)
