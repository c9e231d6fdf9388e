"""Each #running-req bucket of a server's decode lines (Q10's figures) through the step model: the measured step
time and throughput beside the modelled bytes, FLOPs, collectives and shares, and the verdict; a speculative
server's buckets add the verify pass against a plain decode step of the same batch."""

from __future__ import annotations

from typing import Any

from gpudiag.decode.roofline import Setup, components_ms, shares_of, step, verdict
from gpudiag.decode.sourced import ASSUMED, CONFIG, DATASHEET, MEASURED, fig, mix, rounded
from gpudiag.findings.decode_inputs import Hardware, number
from gpudiag.findings.serving_view import ServerFigures
from gpudiag.probe_view import as_dict
from probes.servingstats.buckets import BUCKETS

LOW, BOUNDS = {name: low for name, low, _ in BUCKETS}, {name: (low, high) for name, low, high in BUCKETS}


def measured_buckets(item: ServerFigures) -> list[dict[str, Any]]:
    out = []
    for name, bucket in as_dict((item.figures or {}).get("buckets")).items():
        bucket = as_dict(bucket)
        tps = number(bucket.get("median_gen_throughput"))
        if name not in LOW or not tps or LOW[name] < 1:
            continue
        running = number(bucket.get("median_running_req"))
        low, high = BOUNDS[name]
        if running:
            run = fig(int(running), MEASURED)
        elif low == high:
            run = fig(low, MEASURED)
        else:
            run = fig(low, ASSUMED, f"lower bound of bucket {name}: the stored decode figures keep no median")
        accept = number(bucket.get("median_accept_len"))
        out.append({"bucket": name, "running_req": run, "gen_tps": fig(tps, MEASURED), "accept_len": accept})
    return sorted(out, key=lambda b: b["running_req"]["v"])


def bucket_figures(setup: Setup, hw: Hardware, measured: dict[str, Any], block: int, algorithm: str) -> dict[str, Any]:
    running = measured["running_req"]
    b = int(running["v"])
    tau = measured["accept_len"] if algorithm else None
    per_step = max(tau or 1.0, 1.0)
    step_s = b * per_step / measured["gen_tps"]["v"]
    step_src = mix(MEASURED, running["src"])
    modelled = step(setup, b, block if algorithm else 1)
    main = modelled.main
    shares = shares_of(modelled, step_s)
    mbu = main.bytes / step_s / setup.bw_peak
    model_src = mix(CONFIG, ASSUMED, running["src"])
    bucket = {
        "bucket": measured["bucket"],
        "mode": "spec" if algorithm else "base",
        "running_req": running,
        "accept_len": fig(tau, MEASURED) if algorithm else None,
        "gen_tps": measured["gen_tps"],
        "step_ms": fig(round(step_s * 1e3, 2), step_src, "running × max(accept len, 1) / gen throughput"),
        "step_ms_spacing": fig(None, MEASURED, "not checked — the stored decode figures keep no line spacing"),
        "tokens": main.tokens,
        "experts_touched": fig(round(main.experts_touched, 1), model_src, "upper bound: uniform independent routing")
        if setup.model.experts
        else None,
        "busiest_rank_experts": fig(round(main.busiest_rank_experts, 1), model_src, "upper bound")
        if setup.model.experts
        else None,
        "bytes_per_gpu": fig(rounded(main.bytes, 4), model_src),
        "kv_bytes_per_gpu": fig(rounded(main.kv_bytes, 3), model_src, "upper bound on context: assumed"),
        "achieved_gbps": fig(round(main.bytes / step_s / 1e9, 1), mix(step_src, model_src)),
        "mbu": fig(round(mbu, 3), mix(step_src, model_src, DATASHEET)),
        "mbu_copy": fig(round(main.bytes / step_s / (hw.copy_gbps * 1e9), 3), mix(step_src, model_src, MEASURED))
        if hw.copy_gbps
        else fig(None, MEASURED, hw.copy_reason),
        "tflop_per_gpu": fig(rounded(main.flops / 1e12, 3), model_src),
        "mfu": fig(round(main.flops / step_s / setup.p_peak, 4), mix(step_src, model_src, DATASHEET)),
        "model_ms": components_ms(modelled, step_s),
        "shares": shares,
        "collectives": dict(main.collectives, share=shares["comm"]),
        "verdict": verdict(mbu, shares),
    }
    if algorithm:
        decode = step(setup, b, 1).main
        bucket["verify"] = {
            "tokens": main.tokens,
            "ms": round(main.seconds * 1e3, 2),
            "decode_ms": round(decode.seconds * 1e3, 2),
            "draft_ms": round(modelled.draft_s * 1e3, 2),
            "expert_amplification": round(main.experts_touched / decode.experts_touched, 2)
            if decode.experts_touched
            else None,
        }
    return bucket
