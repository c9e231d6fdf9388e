"""The decode step of each live server explained once, for Q11-Q14 and the roofline findings to read: its
model's bytes (config.json the deployment probe read), its TP/EP and flags, the GPU's datasheet and measured copy
bandwidth, the interconnect from nvidia-smi's topology, and each #running-req bucket of its decode lines (Q10's
figures) put through gpudiag.decode's step model. A speculative server is paired with a baseline server of the same
model on the same host for the fitted overhead and the measured speedup.

Every number in the analysis is `{v, src}`: `src` joins the sources of what it was computed from (measured: the
server's log, nvidia-smi, copy_bench; config: config.json and the command line; datasheet: gpudiag.decode.hardware;
assumed: the defaults named in docs/decode-model.md).
"""

from __future__ import annotations

import statistics
import weakref
from dataclasses import dataclass
from typing import Any

from gpudiag.decode import hardware
from gpudiag.decode.config_fields import ConfigError
from gpudiag.decode.model_bytes import Model
from gpudiag.decode.roofline import (
    BW_EFF_OF_DATASHEET,
    P_EFF_OF_PEAK,
    Setup,
    components_ms,
    shares_of,
    step,
    verdict,
)
from gpudiag.decode.sourced import ASSUMED, CONFIG, DATASHEET, MEASURED, fig, rounded
from gpudiag.decode.speculation import acceptance_rate, break_even, fitted_overhead, predicted_step, speedup, tau_at
from gpudiag.decode.step_bytes import step_bytes
from gpudiag.findings.serving import ServerFigures, serving_figures
from gpudiag.findings.server_flags import graphs_disabled, server_args
from gpudiag.models import HostResult
from gpudiag.probe_view import as_dict, as_list, dig, probe
from probes.servingstats.buckets import BUCKETS

CONTEXT_TOKENS = 1024  # assumed cached tokens per running request: the decode lines as stored keep no #token
DEFAULT_BLOCK = 16  # sglang's DFLASH block size when neither the flags nor the draft config say
# sglang resets an unset --max-running-requests to this for DFLASH, the EAGLE family and NGRAM (speculative_hook).
SPEC_RUNNING_CAP = 48
SPEC_CAPPED = ("DFLASH", "EAGLE", "EAGLE3", "NEXTN", "NGRAM", "STANDALONE")
DRAFT_LAYERS_ASSUMED = {"DFLASH": 6}  # z-lab's DFlash drafters: 6 layers of the target's width
F_BASE_ASSUMED_S = 1.5e-3  # fixed overhead of a graph-replayed decode step when no baseline was measured
LOW, BOUNDS = {name: low for name, low, _ in BUCKETS}, {name: (low, high) for name, low, high in BUCKETS}


def mix(*sources: str) -> str:
    """'config+measured': the sources a derived figure rests on, each named once."""
    seen = []
    for src in sources:
        for part in src.split("+"):
            if part and part not in seen:
                seen.append(part)
    return "+".join(sorted(seen))


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _int_arg(args: dict[str, Any], name: str) -> int | None:
    value = args.get(name)
    try:
        number = int(str(value))
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


@dataclass(frozen=True)
class Hardware:
    gpu: hardware.Gpu | None
    gpu_name: str
    link: hardware.Link | None
    link_from: str  # measured (nvidia-smi topo) | datasheet (the GPU model's links)
    copy_gbps: float | None
    copy_reason: str


def _copy_bandwidth(host: HostResult, gpu: hardware.Gpu | None) -> tuple[float | None, str]:
    """Device copy bandwidth (read + write bytes per second) from copy_bench's largest copy, when that copy is
    at least 8× the L2 cache (a smaller one measures L2, not DRAM)."""
    data = probe(host, "copy_bench")
    if data is None:
        return None, "copy_bench did not run (a --deep scan measures it)"
    floor = 8 * (gpu.l2_mb if gpu else 128) * 1e6
    best, largest = None, 0
    for entry in as_list(data.get("gpus")):
        for point in as_list(as_dict(entry).get("sweep")):
            size, us = _num(as_dict(point).get("bytes")), _num(as_dict(point).get("copy_us"))
            if size and us:
                largest = max(largest, int(size))
                if size >= floor:
                    rate = 2 * size / (us * 1e-6) / 1e9
                    best = rate if best is None else max(best, rate)
    if best is None:
        return None, f"copy_bench's largest copy ({largest / 2**20:.0f} MiB) fits in L2; DRAM bandwidth not measured"
    return round(best, 1), ""


def host_hardware(host: HostResult) -> Hardware:
    env = probe(host, "env") or {}
    names = [str(as_dict(d).get("name") or "") for d in as_list(dig(env, "gpus", "devices"))]
    name = names[0] if names else ""
    gpu = hardware.gpu_of(name)
    summary = str(dig(env, "topology", "summary") or "")
    kind = hardware.link_kind(summary, gpu)
    link_from = MEASURED if summary in ("nvlink", "pcie", "mixed") else DATASHEET
    copy, why = _copy_bandwidth(host, gpu)
    return Hardware(gpu, name, hardware.LINKS.get(kind or ""), link_from, copy, why)


def _config_record(host: HostResult, server: dict[str, Any], role: str) -> dict[str, Any]:
    records = as_dict(dig(probe(host, "deployment"), "model_configs"))
    return as_dict(as_dict(records.get(str(server.get("pid")))).get(role))


@dataclass
class ServerDecode:
    """One server's analysis: `value` (sourced figures, what Q11-Q14 render) or `reason` (not checked)."""

    item: ServerFigures
    reason: str = ""
    model: Model | None = None
    setup: Setup | None = None
    value: dict[str, Any] | None = None


def _draft_model(algorithm: str, record: dict[str, Any], target: Model) -> tuple[Model | None, str]:
    config = record.get("config")
    if isinstance(config, dict):
        try:
            return Model.of(config), CONFIG
        except ConfigError:
            pass
    layers = DRAFT_LAYERS_ASSUMED.get(algorithm, 1)
    shaped = {
        "hidden_size": target.hidden,
        "intermediate_size": target.intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": max(target.hidden // 128, 1),
        "head_dim": 128,
        "vocab_size": target.vocab,
    }
    return Model.of(shaped), ASSUMED


def _block(item: ServerFigures, draft_record: dict[str, Any]) -> tuple[int, str]:
    args = server_args(item.server)
    for name in ("speculative_num_draft_tokens", "speculative_dflash_block_size"):
        value = _int_arg(args, name)
        if value:
            return value, CONFIG
    config = as_dict(draft_record.get("config"))
    size = _num(config.get("block_size")) or _num(dig(config, "dflash_config", "block_size"))
    if size:
        return int(size), CONFIG
    return DEFAULT_BLOCK, ASSUMED


def _measured_buckets(item: ServerFigures) -> list[dict[str, Any]]:
    out = []
    for name, bucket in as_dict((item.figures or {}).get("buckets")).items():
        bucket = as_dict(bucket)
        tps = _num(bucket.get("median_gen_throughput"))
        if name not in LOW or not tps or LOW[name] < 1:
            continue
        running = _num(bucket.get("median_running_req"))
        low, high = BOUNDS[name]
        if running:
            run = fig(int(running), MEASURED)
        elif low == high:
            run = fig(low, MEASURED)
        else:
            run = fig(low, ASSUMED, f"lower bound of bucket {name}: the stored decode figures keep no median")
        accept = _num(bucket.get("median_accept_len"))
        out.append({"bucket": name, "running_req": run, "gen_tps": fig(tps, MEASURED), "accept_len": accept})
    return sorted(out, key=lambda b: b["running_req"]["v"])


def analyse(item: ServerFigures, hw: Hardware) -> ServerDecode:
    found = ServerDecode(item)
    record = _config_record(item.host, item.server, "model")
    if not record:
        found.reason = "the deployment probe read no config.json for it (an older gpudiag, or none found)"
        return found
    if not isinstance(record.get("config"), dict):
        found.reason = f"its config.json was not read: {record.get('reason') or 'no reason recorded'}"
        return found
    try:
        model = Model.of(record["config"])
    except ConfigError as exc:
        found.reason = f"config.json at {record.get('where') or '?'} could not be modelled: {exc}"
        return found
    if hw.gpu is None:
        found.reason = f"no datasheet row for GPU {hw.gpu_name or '(none seen)'}"
        found.model = model
        return found
    args = server_args(item.server)
    tp = _int_arg(args, "tp_size") or 1
    ep = _int_arg(args, "ep_size") or 1
    dp_attention = bool(args.get("enable_dp_attention"))
    kv_dtype = str(args.get("kv_cache_dtype") or "auto")
    kv_bytes = 1.0 if kv_dtype.startswith("fp8") else 2.0
    a2a = str(args.get("moe_a2a_backend") or "none") not in ("none", "") or bool(args.get("enable_deepep_moe"))
    link = hw.link or hardware.LINKS["pcie"]
    bw_eff = (hw.copy_gbps * 1e9) if hw.copy_gbps else BW_EFF_OF_DATASHEET * hw.gpu.mem_bw_gbps * 1e9
    algorithm = item.algorithm.upper()
    draft_record = _config_record(item.host, item.server, "draft")
    # NGRAM drafts from a lookup table, not a model: no draft forward to cost.
    draft, draft_src = (
        _draft_model(algorithm, draft_record, model) if algorithm and algorithm != "NGRAM" else (None, "")
    )
    block, block_src = _block(item, draft_record) if algorithm else (1, "")
    eagle = algorithm in ("EAGLE", "EAGLE3", "NEXTN")
    steps = (_int_arg(args, "speculative_num_steps") or max(block - 1, 1)) if eagle else 1
    setup = Setup(
        model=model,
        tp=tp,
        ep=ep,
        dp_attention=dp_attention,
        kv_dtype_bytes=kv_bytes,
        all_to_all_moe=a2a,
        bw_eff=bw_eff,
        bw_peak=hw.gpu.mem_bw_gbps * 1e9,
        p_eff=P_EFF_OF_PEAK * hw.gpu.bf16_tflops * 1e12,
        p_peak=hw.gpu.bf16_tflops * 1e12,
        busbw_gbps=link.busbw_gbps,
        alpha_us=link.alpha_us,
        context=CONTEXT_TOKENS,
        draft=draft,
        draft_passes=steps,
        draft_tokens_per_request=1 if eagle else block,
    )
    found.model, found.setup = model, setup
    index_total = _num(record.get("index_total_size"))
    predicted = model.checkpoint_bytes()
    src_link = mix(hw.link_from)
    found.value = {
        "server": item.label,
        "pid": item.server.get("pid"),
        "algorithm": algorithm or None,
        "model": {
            "config": record.get("where"),
            "found_by": record.get("how"),
            "arch": (as_list(record["config"].get("architectures")) or [model.model_type])[0],
            "layers": fig(model.layers, CONFIG),
            "experts": fig(model.experts, CONFIG),
            "top_k": fig(model.top_k, CONFIG),
            "quant": model.quant.describe(),
            "ckpt_bytes_pred": fig(rounded(predicted, 4), CONFIG),
            "ckpt_bytes_index": fig(int(index_total), CONFIG)
            if index_total
            else fig(None, CONFIG, "not checked — no model.safetensors.index.json metadata was read"),
            "ckpt_pred_over_index": round(predicted / index_total, 4) if index_total else None,
            "active_params": fig(rounded(model.active_params(), 4), CONFIG),
            "expert_bytes": fig(rounded(model.expert_bytes(), 4), CONFIG),
            "kv_bytes_per_token_per_gpu": fig(
                rounded(step_bytes(model, 1, tp, ep, 1.0, kv_bytes, dp_attention).kv, 4), CONFIG
            ),
            "kv_replicated_tp": bool(model.mla) and tp > 1 and not dp_attention,
        },
        "parallel": {
            "tp": fig(tp, CONFIG),
            "ep": fig(ep, CONFIG),
            "dp_attention": dp_attention,
            "moe_all_to_all": a2a,
            "link": fig(link.kind, src_link, "nvidia-smi topo -m" if src_link == MEASURED else "the GPU model's"),
            "busbw_gbps": fig(link.busbw_gbps, ASSUMED, link.source),
            "alpha_us": fig(link.alpha_us, ASSUMED, link.source),
        },
        "gpu": {
            "name": fig(hw.gpu_name, MEASURED),
            "bw_peak_gbps": fig(hw.gpu.mem_bw_gbps, DATASHEET, hw.gpu.source),
            "bw_copy_gbps": fig(hw.copy_gbps, MEASURED) if hw.copy_gbps else fig(None, MEASURED, hw.copy_reason),
            "bw_eff_gbps": fig(
                round(bw_eff / 1e9, 1),
                MEASURED if hw.copy_gbps else mix(DATASHEET, ASSUMED),
                "measured copy bandwidth" if hw.copy_gbps else f"{BW_EFF_OF_DATASHEET} × datasheet",
            ),
            "dense_tflops": fig(hw.gpu.bf16_tflops, DATASHEET, hw.gpu.source),
            "dense_tflops_fp": fig(hw.gpu.fp8_tflops, DATASHEET, hw.gpu.source),
            "ridge_flop_per_byte": fig(round(hw.gpu.ridge), DATASHEET),
        },
        "context_tokens": fig(CONTEXT_TOKENS, ASSUMED, "per running request; the stored decode lines keep no #token"),
        "graphs": _graphs(item),
        "speculation": {
            "block": fig(block, block_src) if algorithm else None,
            "draft": {
                "layers": fig(draft.layers, draft_src),
                "params": fig(rounded(draft.checkpoint_bytes() / draft.quant.default, 3), draft_src),
            }
            if draft
            else None,
        },
        "buckets": [],
    }
    for measured in _measured_buckets(item):
        found.value["buckets"].append(_bucket(setup, hw, measured, block, algorithm))
    return found


def _graphs(item: ServerFigures) -> str:
    graph = as_dict((item.figures or {}).get("graph"))
    if graphs_disabled(server_args(item.server)) or (graph.get("false") and not graph.get("true")):
        return "off"
    return "on" if graph.get("true") else "unknown"


def _bucket(setup: Setup, hw: Hardware, measured: dict[str, Any], block: int, algorithm: str) -> dict[str, Any]:
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


# HostResult is not hashable: keyed by id, with a weak reference telling a reused id from its host.
_CACHE: dict[int, tuple[weakref.ref[HostResult], list[ServerDecode]]] = {}


def host_decode(host: HostResult) -> list[ServerDecode]:
    """Every live server's analysis (computed once per host), speculative ones with their economics."""
    cached = _CACHE.get(id(host))
    if cached is not None and cached[0]() is host:
        return cached[1]
    hw = host_hardware(host)
    analysed = [analyse(item, hw) for item in serving_figures(host)]
    for spec in analysed:
        if spec.value is not None and spec.item.algorithm:
            spec.value["speculation"].update(economics(spec, analysed))
    for key in [k for k, (ref, _) in _CACHE.items() if ref() is None]:
        del _CACHE[key]
    _CACHE[id(host)] = (weakref.ref(host), analysed)
    return analysed


def _model_key(found: ServerDecode) -> str:
    return str(server_args(found.item.server).get("model_path") or "").rstrip("/")


def economics(spec: ServerDecode, analysed: list[ServerDecode]) -> dict[str, Any]:
    """Fit, measured-vs-predicted speedup per bucket, break-even and what-ifs for one speculative server."""
    assert spec.setup is not None and spec.value is not None
    setup, value = spec.setup, spec.value
    block = int(value["speculation"]["block"]["v"])
    spec_buckets = [b for b in value["buckets"] if b["accept_len"] and b["accept_len"]["v"]]
    if not spec_buckets:
        return {"reason": "not checked — no decode line with an accept len"}
    base = next(
        (
            a
            for a in analysed
            if a is not spec and not a.item.algorithm and a.value is not None and _model_key(a) == _model_key(spec)
        ),
        None,
    )
    base_buckets = {b["bucket"]: b for b in (base.value["buckets"] if base and base.value else [])}
    lowest = spec_buckets[0]
    b_low = int(lowest["running_req"]["v"])
    f_spec = fitted_overhead(setup, b_low, block, lowest["step_ms"]["v"] / 1e3)
    if lowest["bucket"] in base_buckets:
        f_base = fitted_overhead(setup, b_low, 1, base_buckets[lowest["bucket"]]["step_ms"]["v"] / 1e3)
        f_base_fig = fig(round(f_base * 1e3, 2), MEASURED, f"fitted at #running-req {lowest['bucket']}")
    else:
        f_base = F_BASE_ASSUMED_S
        f_base_fig = fig(F_BASE_ASSUMED_S * 1e3, ASSUMED, "no baseline server of this model on the host")
    taus = [b["accept_len"]["v"] for b in spec_buckets]
    tau = statistics.median(taus)
    pairs = []
    for bucket in spec_buckets:
        b = int(bucket["running_req"]["v"])
        predicted = speedup(setup, b, block, bucket["accept_len"]["v"], f_base, f_spec)
        paired = base_buckets.get(bucket["bucket"])
        measured = bucket["gen_tps"]["v"] / paired["gen_tps"]["v"] if paired else None
        pairs.append(
            {
                "bucket": bucket["bucket"],
                "running_req": bucket["running_req"],
                "s_meas": fig(round(measured, 3), MEASURED) if measured else None,
                "s_pred": fig(round(predicted, 3), mix(CONFIG, ASSUMED, MEASURED)),
                "fit": bucket is lowest,
                "spec_tps_pred": round(b * bucket["accept_len"]["v"] / predicted_step(setup, b, block, f_spec), 1),
            }
        )
    even = break_even(setup, block, tau, f_base, f_spec)
    out: dict[str, Any] = {
        "baseline": base.item.label if base else None,
        "fit": {
            "bucket": lowest["bucket"],
            "f_spec_ms": fig(round(f_spec * 1e3, 2), MEASURED, f"fitted at #running-req {lowest['bucket']}"),
            "f_base_ms": f_base_fig,
        },
        "tau": fig(round(tau, 3), MEASURED, "median of the buckets' accept len"),
        "pairs": pairs,
        "break_even_running_req": fig(even, mix(CONFIG, ASSUMED, MEASURED), _even_note(even)),
        "what_if": _what_if(setup, block, tau, f_base, f_spec, spec_buckets, base, value, lowest),
    }
    return out


def _even_note(even: int | None) -> str:
    if even is None:
        return "pays at every batch up to 512 running requests"
    if even == 0:
        return "never pays at the measured acceptance"
    return "largest #running-req with predicted S ≥ 1, τ held at its median, F fitted at the lowest bucket"


def _what_if(
    setup: Setup,
    block: int,
    tau: float,
    f_base: float,
    f_spec: float,
    spec_buckets: list[dict[str, Any]],
    base: ServerDecode | None,
    value: dict[str, Any],
    lowest: dict[str, Any],
) -> dict[str, Any]:
    top = spec_buckets[-1]
    b_top = int(top["running_req"]["v"])
    out: dict[str, Any] = {}
    smaller = max(2, block // 2)
    alpha = acceptance_rate(tau, block)
    if alpha is not None and smaller < block:
        tau2 = tau_at(alpha, smaller)
        out["block_size"] = {
            "block": smaller,
            "alpha": fig(round(alpha, 3), mix(MEASURED, ASSUMED), "i.i.d. acceptance, inverted from τ"),
            "tau": fig(round(tau2, 2), mix(MEASURED, ASSUMED)),
            "s_pred_at_top": fig(round(speedup(setup, b_top, smaller, tau2, f_base, f_spec), 3), mix(CONFIG, ASSUMED)),
            "break_even_running_req": fig(break_even(setup, smaller, tau2, f_base, f_spec), mix(CONFIG, ASSUMED)),
        }
    even = break_even(setup, block, tau, f_base, f_spec)
    if even:
        cap_s = predicted_step(setup, even, block, f_spec)
        out["cap_running"] = {
            "cap": even,
            "spec_tps_pred": fig(round(even * tau / cap_s, 1), mix(CONFIG, ASSUMED, MEASURED)),
            "base_tps_pred": fig(
                round(even / predicted_step(setup, even, 1, f_base), 1), mix(CONFIG, ASSUMED, MEASURED)
            ),
        }
    base_graphs = base.value["graphs"] if base and base.value else "unknown"
    if value["graphs"] == "off" and base_graphs == "on" and f_spec > f_base:
        saved = f_spec - f_base
        b_low = int(lowest["running_req"]["v"])
        low_s = lowest["step_ms"]["v"] / 1e3
        out["cuda_graphs"] = {
            "recoverable_ms": fig(round(saved * 1e3, 2), MEASURED, "at most F_spec − F_base, at the fit bucket"),
            "of_step_ms": lowest["step_ms"],
            "spec_tps_pred": fig(round(b_low * lowest["accept_len"]["v"] / (low_s - saved), 1), mix(MEASURED, ASSUMED)),
        }
    else:
        out["cuda_graphs"] = {
            "reason": "not checked — "
            + (
                "the speculative server's decode lines ran with graphs"
                if value["graphs"] != "off"
                else "no baseline server with graphs on to fit a graph-replayed overhead against"
            )
        }
    return out
