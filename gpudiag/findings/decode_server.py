"""One live server's decode step: its model (config.json the deployment probe read), its TP/EP, KV dtype and
speculation flags, and the host's hardware made into a roofline `Setup`, then the figures Q11-Q14 render: the
model, the parallelism and link, the GPU, the speculation settings and each measured bucket (decode_buckets)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.decode import hardware
from gpudiag.decode.config_fields import ConfigError
from gpudiag.decode.model_bytes import Model
from gpudiag.decode.roofline import BW_EFF_OF_DATASHEET, P_EFF_OF_PEAK, Setup
from gpudiag.decode.sourced import ASSUMED, CONFIG, DATASHEET, MEASURED, fig, mix, rounded
from gpudiag.decode.step_bytes import step_bytes
from gpudiag.findings.decode_buckets import bucket_figures, measured_buckets
from gpudiag.findings.decode_inputs import Hardware, config_record, int_arg, number
from gpudiag.findings.serving_view import ServerFigures
from gpudiag.findings.server_flags import graphs_disabled, server_args
from gpudiag.probe_view import as_dict, as_list, dig

CONTEXT_TOKENS = 1024  # assumed cached tokens per running request: the decode lines as stored keep no #token
DEFAULT_BLOCK = 16  # sglang's DFLASH block size when neither the flags nor the draft config say
# sglang resets an unset --max-running-requests to this for DFLASH, the EAGLE family and NGRAM (speculative_hook).
SPEC_RUNNING_CAP = 48
SPEC_CAPPED = ("DFLASH", "EAGLE", "EAGLE3", "NEXTN", "NGRAM", "STANDALONE")
DRAFT_LAYERS_ASSUMED = {"DFLASH": 6}  # z-lab's DFlash drafters: 6 layers of the target's width


@dataclass
class ServerDecode:
    """One server's analysis: `value` (sourced figures, what Q11-Q14 render) or `reason` (not checked)."""

    item: ServerFigures
    reason: str = ""
    model: Model | None = None
    setup: Setup | None = None
    value: dict[str, Any] | None = None


@dataclass(frozen=True)
class Speculation:
    """A server's speculative decoding as its flags and draft config say (algorithm "" for none)."""

    algorithm: str
    draft: Model | None
    draft_src: str
    block: int
    block_src: str


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
        value = int_arg(args, name)
        if value:
            return value, CONFIG
    config = as_dict(draft_record.get("config"))
    size = number(config.get("block_size")) or number(dig(config, "dflash_config", "block_size"))
    if size:
        return int(size), CONFIG
    return DEFAULT_BLOCK, ASSUMED


def _speculation(item: ServerFigures, model: Model) -> Speculation:
    algorithm = item.algorithm.upper()
    draft_record = config_record(item.host, item.server, "draft")
    # NGRAM drafts from a lookup table, not a model: no draft forward to cost.
    draft, draft_src = (
        _draft_model(algorithm, draft_record, model) if algorithm and algorithm != "NGRAM" else (None, "")
    )
    block, block_src = _block(item, draft_record) if algorithm else (1, "")
    return Speculation(algorithm, draft, draft_src, block, block_src)


def _model_of(found: ServerDecode, record: dict[str, Any]) -> Model | None:
    """The server's model from its config.json record, or None with `found.reason` saying why not."""
    if not record:
        found.reason = "the deployment probe read no config.json for it (an older gpudiag, or none found)"
        return None
    if not isinstance(record.get("config"), dict):
        found.reason = f"its config.json was not read: {record.get('reason') or 'no reason recorded'}"
        return None
    try:
        return Model.of(record["config"])
    except ConfigError as exc:
        found.reason = f"config.json at {record.get('where') or '?'} could not be modelled: {exc}"
        return None


def _link(hw: Hardware) -> hardware.Link:
    return hw.link or hardware.LINKS["pcie"]


def _setup(item: ServerFigures, hw: Hardware, gpu: hardware.Gpu, model: Model, spec: Speculation) -> Setup:
    """The step model's inputs: the server's flags, the GPU's datasheet and measured copy bandwidth, the link."""
    args = server_args(item.server)
    kv_dtype = str(args.get("kv_cache_dtype") or "auto")
    link = _link(hw)
    eagle = spec.algorithm in ("EAGLE", "EAGLE3", "NEXTN")
    steps = (int_arg(args, "speculative_num_steps") or max(spec.block - 1, 1)) if eagle else 1
    return Setup(
        model=model,
        tp=int_arg(args, "tp_size") or 1,
        ep=int_arg(args, "ep_size") or 1,
        dp_attention=bool(args.get("enable_dp_attention")),
        kv_dtype_bytes=1.0 if kv_dtype.startswith("fp8") else 2.0,
        all_to_all_moe=str(args.get("moe_a2a_backend") or "none") not in ("none", "")
        or bool(args.get("enable_deepep_moe")),
        bw_eff=(hw.copy_gbps * 1e9) if hw.copy_gbps else BW_EFF_OF_DATASHEET * gpu.mem_bw_gbps * 1e9,
        bw_peak=gpu.mem_bw_gbps * 1e9,
        p_eff=P_EFF_OF_PEAK * gpu.bf16_tflops * 1e12,
        p_peak=gpu.bf16_tflops * 1e12,
        busbw_gbps=link.busbw_gbps,
        alpha_us=link.alpha_us,
        context=CONTEXT_TOKENS,
        draft=spec.draft,
        draft_passes=steps,
        draft_tokens_per_request=1 if eagle else spec.block,
    )


def analyse(item: ServerFigures, hw: Hardware) -> ServerDecode:
    found = ServerDecode(item)
    record = config_record(item.host, item.server, "model")
    model = _model_of(found, record)
    if model is None:
        return found
    if hw.gpu is None:
        found.reason = f"no datasheet row for GPU {hw.gpu_name or '(none seen)'}"
        found.model = model
        return found
    spec = _speculation(item, model)
    setup = _setup(item, hw, hw.gpu, model, spec)
    found.model, found.setup = model, setup
    found.value = {
        "server": item.label,
        "pid": item.server.get("pid"),
        "algorithm": spec.algorithm or None,
        "model": _model_figures(record, setup),
        "parallel": _parallel_figures(setup, hw),
        "gpu": _gpu_figures(setup, hw, hw.gpu),
        "context_tokens": fig(CONTEXT_TOKENS, ASSUMED, "per running request; the stored decode lines keep no #token"),
        "graphs": _graphs(item),
        "speculation": _speculation_figures(spec),
        "buckets": [],
    }
    for measured in measured_buckets(item):
        found.value["buckets"].append(bucket_figures(setup, hw, measured, spec.block, spec.algorithm))
    return found


def _model_figures(record: dict[str, Any], setup: Setup) -> dict[str, Any]:
    model = setup.model
    index_total = number(record.get("index_total_size"))
    predicted = model.checkpoint_bytes()
    kv = step_bytes(model, 1, setup.tp, setup.ep, 1.0, setup.kv_dtype_bytes, setup.dp_attention).kv
    return {
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
        "kv_bytes_per_token_per_gpu": fig(rounded(kv, 4), CONFIG),
        "kv_replicated_tp": bool(model.mla) and setup.tp > 1 and not setup.dp_attention,
    }


def _parallel_figures(setup: Setup, hw: Hardware) -> dict[str, Any]:
    link = _link(hw)
    src_link = mix(hw.link_from)
    return {
        "tp": fig(setup.tp, CONFIG),
        "ep": fig(setup.ep, CONFIG),
        "dp_attention": setup.dp_attention,
        "moe_all_to_all": setup.all_to_all_moe,
        "link": fig(link.kind, src_link, "nvidia-smi topo -m" if src_link == MEASURED else "the GPU model's"),
        "busbw_gbps": fig(link.busbw_gbps, ASSUMED, link.source),
        "alpha_us": fig(link.alpha_us, ASSUMED, link.source),
    }


def _gpu_figures(setup: Setup, hw: Hardware, gpu: hardware.Gpu) -> dict[str, Any]:
    return {
        "name": fig(hw.gpu_name, MEASURED),
        "bw_peak_gbps": fig(gpu.mem_bw_gbps, DATASHEET, gpu.source),
        "bw_copy_gbps": fig(hw.copy_gbps, MEASURED) if hw.copy_gbps else fig(None, MEASURED, hw.copy_reason),
        "bw_eff_gbps": fig(
            round(setup.bw_eff / 1e9, 1),
            MEASURED if hw.copy_gbps else mix(DATASHEET, ASSUMED),
            "measured copy bandwidth" if hw.copy_gbps else f"{BW_EFF_OF_DATASHEET} × datasheet",
        ),
        "dense_tflops": fig(gpu.bf16_tflops, DATASHEET, gpu.source),
        "dense_tflops_fp": fig(gpu.fp8_tflops, DATASHEET, gpu.source),
        "ridge_flop_per_byte": fig(round(gpu.ridge), DATASHEET),
    }


def _speculation_figures(spec: Speculation) -> dict[str, Any]:
    draft = spec.draft
    return {
        "block": fig(spec.block, spec.block_src) if spec.algorithm else None,
        "draft": {
            "layers": fig(draft.layers, spec.draft_src),
            "params": fig(rounded(draft.checkpoint_bytes() / draft.quant.default, 3), spec.draft_src),
        }
        if draft
        else None,
    }


def _graphs(item: ServerFigures) -> str:
    graph = as_dict((item.figures or {}).get("graph"))
    if graphs_disabled(server_args(item.server)) or (graph.get("false") and not graph.get("true")):
        return "off"
    return "on" if graph.get("true") else "unknown"
