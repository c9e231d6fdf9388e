"""Bytes per decode step from config.json alone (docs/decode-model.md, "Bytes").

`Model.of(config)` reads the architecture (dense / GQA, MLA, MoE; `text_config` of multimodal checkpoints) and the
bytes per weight of each module kind from `torch_dtype` and `quantization_config`. `checkpoint_bytes()` is what the
checkpoint holds (tested against `metadata.total_size` of model.safetensors.index.json); `step_bytes()` is what one
forward pass of T tokens reads on one GPU under TP/EP, with experts touched by T tokens as an upper bound (uniform,
independent top-k routing) and the busiest EP rank's share.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "half": 2.0, "float32": 4.0, "float": 4.0, "float8_e4m3fn": 1.0}
# Module kinds and a representative checkpoint name each (HF naming); a quantization ignore list is matched
# against these names with layer and expert indices normalised.
KINDS = {
    "attn": ("model.layers.N.self_attn.q_proj", "model.layers.N.self_attn.o_proj", "model.layers.N.self_attn.q_b_proj"),
    "dense_mlp": ("model.layers.N.mlp.gate_proj", "model.layers.N.mlp.down_proj"),
    "shared": ("model.layers.N.mlp.shared_experts.gate_proj", "model.layers.N.mlp.shared_expert.gate_proj"),
    "experts": (
        "model.layers.N.mlp.experts.N.gate_proj",
        "model.layers.N.mlp.experts.gate_up_proj",
        "model.layers.N.block_sparse_moe.experts.N.w1",
    ),
    "router": ("model.layers.N.mlp.gate", "model.layers.N.mlp.router"),
    "lm_head": ("lm_head",),
    "embed": ("model.embed_tokens",),
}
LINEAR_KINDS = ("attn", "dense_mlp", "shared", "experts", "lm_head")  # what quantizers target by default


class ConfigError(ValueError):
    """config.json lacks or garbles a field the bytes need: the message names it."""


def _int(config: dict[str, Any], *names: str, default: int | None = None) -> int:
    """The first of `names` holding a whole number (≥ 1 where the field has no default, ≥ 0 otherwise)."""
    for name in names:
        value = config.get(name)
        if isinstance(value, bool):
            continue
        least = 0 if default is not None else 1
        if isinstance(value, (int, float)) and least <= value < 2**53 and float(value).is_integer():
            return int(value)
    if default is not None:
        return default
    raise ConfigError(f"config.json has no usable {' / '.join(names)}")


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _normalise(name: str) -> str:
    return re.sub(r"\.\d+(?=\.|$)", ".N", name.strip().strip("."))


def _ignored(entries: list[Any], kind: str) -> bool:
    """Whether a quantization ignore list (`ignore`, `modules_to_not_convert`, `ignored_layers`,
    `exclude_modules`) leaves this module kind unquantized; `re:` entries are regular expressions."""
    names = KINDS[kind]
    for raw in entries:
        if not isinstance(raw, str) or not raw:
            continue
        if raw.startswith("re:"):
            try:
                pattern = re.compile(raw[3:])
            except re.error:
                continue
            if any(pattern.match(n.replace(".N", ".0")) for n in names):
                return True
            continue
        entry = _normalise(raw)
        regex = re.escape(entry).replace(r"\*", r"[^ ]*")
        for name in names:
            if re.fullmatch(regex + r"(\..*)?", name) or (kind in ("lm_head", "embed") and name.endswith(entry)):
                return True
    return False


@dataclass(frozen=True)
class Quant:
    """Bytes per weight per module kind, and how the config said so."""

    default: float
    per_kind: dict[str, float]
    method: str  # none | fp8_block | int4_gN | mxfp4 | nvfp4 | …

    def bytes_of(self, kind: str) -> float:
        return self.per_kind.get(kind, self.default)

    def describe(self) -> dict[str, str]:
        return {kind: _label(self.bytes_of(kind), self.default, self.method) for kind in KINDS}


def _label(b: float, default: float, method: str) -> str:
    return method if b != default else {2.0: "bf16", 4.0: "fp32", 1.0: "fp8"}.get(default, f"{default:g} B")


def _quantized_bytes(qc: dict[str, Any], hidden: int) -> tuple[float, str] | None:
    """(bytes per weight, name) of the quantized modules, from a quantization_config; None if not understood."""
    method = str(qc.get("quant_method") or qc.get("quant_algo") or "").lower()
    if method == "fp8":
        block = qc.get("weight_block_size")
        if isinstance(block, list) and len(block) == 2 and all(isinstance(x, int) and x > 0 for x in block):
            return 1 + 4 / (block[0] * block[1]), f"fp8_block{block[0]}"
        return 1.0 + 4 / hidden, "fp8"  # per-channel fp32 scales
    if method == "mxfp4":
        return 0.5 + 1 / 32, "mxfp4"
    if method in ("nvfp4", "modelopt_fp4") or str(qc.get("quant_algo") or "").upper() == "NVFP4":
        return 0.5 + 1 / 16, "nvfp4"
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        width = _positive(qc.get("bits")) or 4
        size = _positive(qc.get("group_size")) or 128
        return width / 8 + (2 + width / 8) / size, f"int{width}_g{size}"
    if method == "compressed-tensors":
        groups = [g for g in _dict(qc.get("config_groups")).values() if isinstance(g, dict)]
        weights = _dict(groups[0].get("weights")) if groups else {}
        bits = _positive(weights.get("num_bits"))
        if bits is None:
            return None
        kind = str(weights.get("type") or "int")
        strategy = str(weights.get("strategy") or "")
        group = _positive(weights.get("group_size"))
        if kind == "float" and bits == 4:
            return 0.5 + 1 / (group or 16), "nvfp4"
        block = weights.get("block_structure")
        if strategy == "block" and isinstance(block, list) and len(block) == 2 and all(map(_positive, block)):
            return bits / 8 + 4 / (block[0] * block[1]), f"{kind}{bits}_block{block[0]}"
        if group:
            zero = 0 if weights.get("symmetric", True) else bits / 8
            return bits / 8 + (2 + zero) / group, f"{kind}{bits}_g{group}"
        return bits / 8 + 4 / hidden, f"{kind}{bits}"
    return None


def quant_of(config: dict[str, Any], hidden: int) -> Quant:
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16").lower().replace("torch.", "")
    default = DTYPE_BYTES.get(dtype, 2.0)
    qc = config.get("quantization_config")
    if not isinstance(qc, dict):
        return Quant(default, {}, "none")
    found = _quantized_bytes(qc, hidden)
    if found is None:
        raise ConfigError(f"quantization_config quant_method {qc.get('quant_method')!r} is not modelled")
    per_weight, name = found
    ignore = []
    for key in ("ignore", "modules_to_not_convert", "ignored_layers", "exclude_modules"):
        if isinstance(qc.get(key), list):
            ignore += qc[key]
    # HF's fp8/mxfp4 integrations never quantize lm_head unless told; compressed-tensors lists it in `ignore`.
    targets = [k for k in LINEAR_KINDS if k != "lm_head" or str(qc.get("quant_method")) == "compressed-tensors"]
    return Quant(default, {k: per_weight for k in targets if not _ignored(ignore, k)}, name)


@dataclass(frozen=True)
class Model:
    """The fields of config.json the bytes need (docs/decode-model.md names each)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    experts: int  # 0: dense
    top_k: int
    expert_inter: int
    shared_experts: int
    dense_layers: int  # leading dense layers of a MoE model (first_k_dense_replace)
    mla: dict[str, int] = field(default_factory=dict)  # q_lora_rank, kv_lora_rank, qk_rope_head_dim, ...
    mtp_layers: int = 0  # num_nextn_predict_layers: in the checkpoint, not in the decode step
    sliding_window: int = 0
    sliding_layers: int = 0
    model_type: str = ""
    attention_bias: bool = False
    quant: Quant = field(default_factory=lambda: Quant(2.0, {}, "none"))

    @classmethod
    def of(cls, config: dict[str, Any]) -> Model:
        if not isinstance(config, dict):
            raise ConfigError("config.json is not a JSON object")
        # A multimodal checkpoint keeps the language model under text_config.
        merged = dict(config, **_dict(config.get("text_config")))
        if isinstance(config.get("quantization_config"), dict):
            merged["quantization_config"] = config["quantization_config"]
        c = merged
        hidden = _int(c, "hidden_size", "d_model", "n_embd")
        heads = _int(c, "num_attention_heads", "n_head")
        layers = _int(c, "num_hidden_layers", "n_layer", "num_layers")
        experts = _int(c, "n_routed_experts", "num_local_experts", "num_experts", default=0)
        mla = {}
        if c.get("kv_lora_rank"):
            mla = {
                "q_lora_rank": _int(c, "q_lora_rank", default=0),
                "kv_lora_rank": _int(c, "kv_lora_rank"),
                "qk_rope_head_dim": _int(c, "qk_rope_head_dim"),
                "qk_nope_head_dim": _int(c, "qk_nope_head_dim"),
                "v_head_dim": _int(c, "v_head_dim"),
            }
        dense_layers = _int(c, "first_k_dense_replace", default=0) if experts else 0
        if experts and isinstance(c.get("mlp_only_layers"), list):
            dense_layers = max(dense_layers, len(c["mlp_only_layers"]))
        types: list[Any] = c["layer_types"] if isinstance(c.get("layer_types"), list) else []
        sliding = _int(c, "sliding_window", default=0) if c.get("sliding_window") else 0
        return cls(
            layers=layers,
            hidden=hidden,
            intermediate=_int(c, "intermediate_size", "ffn_hidden_size", default=4 * hidden),
            heads=heads,
            kv_heads=_int(c, "num_key_value_heads", default=heads),
            head_dim=_int(c, "head_dim", default=hidden // heads),
            vocab=_int(c, "vocab_size"),
            tied=bool(c.get("tie_word_embeddings", False)),
            experts=experts,
            top_k=_int(c, "num_experts_per_tok", "experts_per_token", "moe_topk", default=0) if experts else 0,
            expert_inter=_int(c, "moe_intermediate_size", "intermediate_size") if experts else 0,
            shared_experts=_int(c, "n_shared_experts", default=0) if experts else 0,
            dense_layers=dense_layers,
            mla=mla,
            mtp_layers=_int(c, "num_nextn_predict_layers", default=0),
            sliding_window=sliding,
            sliding_layers=sum(1 for t in types if t == "sliding_attention") if sliding else 0,
            model_type=str(c.get("model_type") or ""),
            attention_bias=bool(c.get("attention_bias", False)),
            quant=quant_of(c, hidden),
        )

    # Parameters per module, one layer (docs/decode-model.md, "Bytes").
    def attn_params(self) -> tuple[int, int]:
        """(TP-sharded, replicated) attention parameters of one layer. sglang's MLA keeps q_a and kv_a
        replicated; GQA's K/V heads are replicated once there are fewer of them than TP ranks (handled in
        step_bytes)."""
        h, H = self.hidden, self.heads
        if self.mla:
            m = self.mla
            rq, r, dr, dn, dv = (
                m["q_lora_rank"],
                m["kv_lora_rank"],
                m["qk_rope_head_dim"],
                m["qk_nope_head_dim"],
                m["v_head_dim"],
            )
            q = (rq * H * (dn + dr)) if rq else h * H * (dn + dr)
            sharded = q + r * H * (dn + dv) + H * dv * h
            replicated = (h * rq if rq else 0) + h * (r + dr)
            return sharded, replicated
        d = self.head_dim
        bias = (H + 2 * self.kv_heads) * d + h if self.attention_bias else 0
        return h * d * (H + 2 * self.kv_heads) + H * d * h + bias, 0

    def expert_params(self) -> int:
        bias = 2 * self.expert_inter + self.hidden if self.model_type == "gpt_oss" else 0
        return 3 * self.hidden * self.expert_inter + bias

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.experts else 0

    def expert_bytes(self) -> float:
        return self.expert_params() * self.quant.bytes_of("experts")

    def kv_bytes_per_token(self, kv_dtype_bytes: float = 2.0) -> float:
        """KV bytes one token adds per layer on a whole model (before TP): MLA keeps one latent (r + dr)."""
        if self.mla:
            return (self.mla["kv_lora_rank"] + self.mla["qk_rope_head_dim"]) * kv_dtype_bytes
        return 2 * self.kv_heads * self.head_dim * kv_dtype_bytes

    def _layer_bytes(self, moe: bool) -> float:
        q = self.quant
        sharded, replicated = self.attn_params()
        total = (sharded + replicated) * q.bytes_of("attn") + 2 * self.hidden * q.default  # + two norms
        if moe:
            total += self.experts * self.expert_bytes()
            total += self.shared_experts * 3 * self.hidden * self.expert_inter * q.bytes_of("shared")
            total += self.experts * self.hidden * q.bytes_of("router")
        else:
            total += 3 * self.hidden * self.intermediate * q.bytes_of("dense_mlp")
        return total

    def checkpoint_bytes(self) -> float:
        """What the checkpoint holds: every layer, the embedding, lm_head unless tied, and the MTP modules
        (num_nextn_predict_layers: a full layer, eh_proj, and their own copies of embedding and head)."""
        q = self.quant
        embed = self.vocab * self.hidden * q.bytes_of("embed")
        head = 0 if self.tied else self.vocab * self.hidden * q.bytes_of("lm_head")
        total = embed + head + self.hidden * q.default
        total += self.dense_layers * self._layer_bytes(False)
        total += (self.layers - self.dense_layers) * self._layer_bytes(bool(self.experts))
        mtp = self._layer_bytes(bool(self.experts)) + 2 * self.hidden * self.hidden * q.bytes_of("attn")
        total += self.mtp_layers * (mtp + embed + self.vocab * self.hidden * q.default)
        return total

    def active_params(self) -> float:
        """Parameters one token multiplies (routed experts: top_k of them), embedding excluded."""
        sharded, replicated = self.attn_params()
        per_attn = sharded + replicated
        dense = self.dense_layers if self.experts else self.layers
        total = self.layers * per_attn + dense * 3 * self.hidden * self.intermediate
        if self.experts:
            per_moe = (self.top_k + self.shared_experts) * 3 * self.hidden * self.expert_inter
            total += self.moe_layers * (per_moe + self.experts * self.hidden)
        return total + (0 if self.tied else self.vocab * self.hidden)


def experts_touched(experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts one layer reads for `tokens` tokens: E(1 − (1 − k/E)^T). Uniform, independent
    top-k routing; real routing is correlated, so this is an upper bound."""
    if experts <= 0 or tokens <= 0:
        return 0.0
    return experts * (1 - (1 - top_k / experts) ** tokens)


def busiest_rank_experts(experts: int, top_k: int, tokens: int, ranks: int) -> float:
    """Expected experts read by the busiest of `ranks` EP ranks (E/ranks experts each): each expert is touched
    independently with p = 1 − (1 − k/E)^T, so a rank's count is Binomial(E/ranks, p) and
    E[max] = Σ_x≥1 (1 − F(x − 1)^ranks). The independence is an approximation (tests compare it with a Monte Carlo
    of top-k routing)."""
    if ranks <= 1:
        return experts_touched(experts, top_k, tokens)
    per_rank = experts // ranks
    p = 1 - (1 - top_k / experts) ** tokens
    cdf, expected = 0.0, 0.0
    for x in range(per_rank + 1):
        cdf += math.comb(per_rank, x) * p**x * (1 - p) ** (per_rank - x)
        if x < per_rank:
            expected += 1 - min(cdf, 1.0) ** ranks
    return expected


@dataclass(frozen=True)
class StepBytes:
    weights: float  # bytes of weights one GPU reads in the step
    experts: float  # of which routed experts (busiest rank)
    kv: float  # KV cache bytes one GPU reads
    experts_touched: float  # per MoE layer, whole model (upper bound)
    busiest_rank_experts: float  # per MoE layer on the busiest EP rank (or the per-GPU slice without EP)

    @property
    def total(self) -> float:
        return self.weights + self.kv


def step_bytes(
    model: Model,
    tokens: int,
    tp: int,
    ep: int,
    kv_tokens: float,
    kv_dtype_bytes: float = 2.0,
    dp_attention: bool = False,
) -> StepBytes:
    """Bytes one GPU reads in one forward pass of `tokens` tokens (decode: running requests; verify: running ×
    block size) over `kv_tokens` cached tokens in all (Σ sequence lengths). Sharded weights divide by TP; MLA's
    q_a/kv_a and the router are replicated; routed experts: the busiest EP rank's experts (upper bound), or each
    touched expert's 1/TP slice without EP; KV: MLA's latent cache is whole on every TP rank unless DP attention."""
    q, t = model.quant, max(tp, 1)
    sharded, replicated = model.attn_params()
    if not model.mla and model.kv_heads < t:  # K/V heads replicated: each rank holds one
        kv_proj = 2 * model.hidden * model.head_dim * model.kv_heads
        sharded, replicated = sharded - kv_proj, replicated + 2 * model.hidden * model.head_dim
    attn = (sharded / t + replicated) * q.bytes_of("attn") * model.layers
    dense = (model.dense_layers if model.experts else model.layers) * 3 * model.hidden * model.intermediate
    weights = attn + dense * q.bytes_of("dense_mlp") / t
    head = model.vocab * model.hidden * q.bytes_of("lm_head") / t
    weights += head + tokens * model.hidden * q.bytes_of("embed") / t
    touched = busiest = experts = 0.0
    if model.experts:
        shared = model.shared_experts * 3 * model.hidden * model.expert_inter * q.bytes_of("shared") / t
        router = model.experts * model.hidden * q.bytes_of("router")
        touched = experts_touched(model.experts, model.top_k, tokens)
        if ep > 1:
            busiest = busiest_rank_experts(model.experts, model.top_k, tokens, ep)
            experts = busiest * model.expert_bytes() * model.moe_layers
        else:
            busiest = touched / t
            experts = touched * model.expert_bytes() / t * model.moe_layers
        weights += (shared + router) * model.moe_layers + experts
    per_token = model.kv_bytes_per_token(kv_dtype_bytes)
    if model.mla:
        per_token = per_token / t if dp_attention else per_token  # the latent cache is whole on every TP rank
    else:
        per_token = per_token / t if model.kv_heads >= t else per_token / model.kv_heads  # one head per rank
    layers_full = model.layers - model.sliding_layers
    kv = kv_tokens * per_token * layers_full
    if model.sliding_layers:
        kv += min(kv_tokens, model.sliding_window * max(tokens, 1)) * per_token * model.sliding_layers
    return StepBytes(weights, experts, kv, touched, busiest)
