"""What this host's own timings say about hidden_states inside the foreach kernel against on its own copy_(): the
measured verdict (`hidden_states_verdict`) and the finding that states it.

The verdict follows GPU-stream time (inside a replayed graph) where it was measured: eagerly both ways sit near the
launch floor and one more launch decides, which says nothing about the copy. It reads the one ranking of
gpudiag/findings/savings.py, as Q5 does."""

from __future__ import annotations

from typing import Any

from gpudiag.findings.common import median, source
from gpudiag.findings.savings import installed_section, rank
from gpudiag.models import Evidence, Finding, HostResult
from gpudiag.probe_view import as_list, copy_gpus, fmt_bytes, fmt_us, number, workloads
from probes.copybench import strategies as strategy_facts

LARGE_FIELDS = ("hidden_states",)  # contiguous tensors big enough for the DMA engine to beat a foreach kernel
SPLIT_MARGIN = 0.10  # the split must lose by more than this to be called wrong
PR_28465 = "sglang PR #28465 (0.5.14+)"


def _ratio_rows(host: HostResult) -> list[dict[str, Any]]:
    """Per GPU workload that copies hidden_states: grouped_foreach (hidden_states inside the foreach kernel) against
    grouped_foreach_dma_split (hidden_states on its own copy_()), both clocks, from the one ranking."""
    installed = installed_section(host)
    rows = []
    for gpu in copy_gpus(host, cuda_only=True):
        if gpu.get("status", "ok") != "ok":
            continue
        for w in workloads(gpu):
            hidden = [f for f in as_list(w.get("fields")) if isinstance(f, dict) and f.get("name") in LARGE_FIELDS]
            costs = rank(w, installed).costs
            inside, own = costs.get(strategy_facts.GROUPED), costs.get(strategy_facts.NAMED_SPLIT)
            if not hidden or inside is None or own is None:
                continue
            rows.append(
                {
                    "gpu": str(gpu.get("index")),
                    "workload": str(w.get("name")),
                    "bytes": number(hidden[0].get("bytes")),
                    "inside": inside,
                    "own": own,
                    "gpu_ratio": inside.gpu_us / own.gpu_us if inside.gpu_us and own.gpu_us else None,
                }
            )
    return rows


def hidden_states_verdict(host: HostResult) -> dict[str, Any] | None:
    """What this host's timings say about hidden_states inside the foreach kernel against its own copy_():
    {clock, keep: copy_()|foreach|either, ratio_min, ratio_median, ratio_max, bytes_min, bytes_max, eager_extra_us,
    workloads, text}; None when no workload timed both ways."""
    rows = _ratio_rows(host)
    if not rows:
        return None
    ratios = sorted(r["gpu_ratio"] for r in rows if r["gpu_ratio"] is not None)
    sizes = [r["bytes"] for r in rows if r["bytes"]]
    extra = median(r["own"].cpu_us - r["inside"].cpu_us for r in rows if r["own"].cpu_us and r["inside"].cpu_us)
    out: dict[str, Any] = {
        "workloads": len(rows),
        "bytes_min": min(sizes) if sizes else None,
        "bytes_max": max(sizes) if sizes else None,
        "eager_extra_us": None if extra is None else round(extra, 1),
    }
    if not ratios:
        out.update(clock="cpu_issue", keep="unknown", ratio_min=None, ratio_median=None, ratio_max=None)
        out["text"] = (
            "hidden_states inside the foreach kernel vs on its own copy_(): timed eagerly only (no graph replay), "
            "where one more launch decides; GPU time not measured"
        )
        return out
    typical = median(ratios) or 1.0
    keep = "copy_()" if typical > 1 + SPLIT_MARGIN else "foreach" if typical < 1 - SPLIT_MARGIN else "either"
    out.update(
        clock="gpu_stream",
        keep=keep,
        ratio_min=round(ratios[0], 2),
        ratio_median=round(typical, 2),
        ratio_max=round(ratios[-1], 2),
    )
    span = f"{fmt_bytes(out['bytes_min'])}–{fmt_bytes(out['bytes_max'])} of hidden_states"
    ratio = (
        f"{out['ratio_min']:.1f}–{out['ratio_max']:.1f}x (median {out['ratio_median']:.1f}x)"
        if len(ratios) > 1
        else f"{out['ratio_median']:.1f}x"
    )
    span = span if out["bytes_min"] != out["bytes_max"] else f"{fmt_bytes(out['bytes_min'])} of hidden_states"
    measured = (
        f"inside a replayed graph the foreach kernel takes {ratio} the GPU time of hidden_states on its own copy_() "
        f"({span}, {len(rows)} workload{'s' if len(rows) > 1 else ''})"
    )
    launch = f"; eagerly its own copy_() adds {fmt_us(extra)} of CPU issue (one more launch)" if extra else ""
    if keep == "copy_()":
        out["text"] = f"keep hidden_states on its own copy_(), as {PR_28465} does: {measured}{launch}"
    elif keep == "foreach":
        out["text"] = (
            f"on this GPU hidden_states copies faster inside the foreach kernel, unlike {PR_28465}: {measured}"
        )
    else:
        out["text"] = f"hidden_states costs the same inside the foreach kernel or on its own copy_(): {measured}"
    return out


def measured_hidden_states(host: HostResult) -> Finding | None:
    """The measured verdict on hidden_states as a finding, with the timings it rests on."""
    verdict = hidden_states_verdict(host)
    if verdict is None or verdict["keep"] in ("unknown", "either"):
        return None
    rows: list[tuple[str, ...]] = [
        ("GPU", "workload", "hidden_states", "inside foreach (CPU issue / GPU stream)", "own copy_()", "GPU ratio")
    ]
    for r in _ratio_rows(host):
        ratio = f"{r['gpu_ratio']:.2f}" if r["gpu_ratio"] else "-"
        rows.append((r["gpu"], r["workload"], fmt_bytes(r["bytes"]), r["inside"].text(), r["own"].text(), ratio))
    action = (
        "Keep hidden_states on its own copy_() (sglang 0.5.14+, PR #28465)"
        if verdict["keep"] == "copy_()"
        else "Measure hidden_states inside the foreach group on the serving release before changing its copy"
    )
    return Finding(
        id="copies.hidden_states_measured",
        severity="info",
        title=f"hidden_states measured: {'its own copy_()' if verdict['keep'] == 'copy_()' else 'the foreach kernel'} "
        f"is faster in GPU time (the foreach kernel takes {verdict['ratio_median']:.1f}x its own copy_()'s, median)",
        hosts=(host.name,),
        evidence=(
            Evidence(
                kind="measurement",
                host=host.name,
                table=tuple(rows),
                text="grouped_foreach (hidden_states inside the foreach kernel) against grouped_foreach_dma_split "
                "(hidden_states on its own copy_()), medians eager and inside a replayed graph",
            ),
        ),
        recommendation=verdict["text"][0].upper() + verdict["text"][1:] + ".",
        sources=(source(host, "copy_bench"),),
        action=action,
    )
