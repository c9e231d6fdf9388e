"""A model's shape and bytes from config.json alone (docs/decode-model.md, "Bytes").

`Model.of(config)` reads the architecture (dense / GQA, MLA, MoE; `text_config` of multimodal checkpoints) and the
bytes per weight of each module kind (gpudiag.decode.quant). `checkpoint_bytes()` is what the checkpoint holds
(tested against `metadata.total_size` of model.safetensors.index.json); what one decode step reads of it is
gpudiag.decode.step_bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpudiag.decode.config_fields import ConfigError, as_object, int_field
from gpudiag.decode.quant import Quant, quant_of


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
        merged = dict(config, **as_object(config.get("text_config")))
        if isinstance(config.get("quantization_config"), dict):
            merged["quantization_config"] = config["quantization_config"]
        c = merged
        hidden = int_field(c, "hidden_size", "d_model", "n_embd")
        heads = int_field(c, "num_attention_heads", "n_head")
        layers = int_field(c, "num_hidden_layers", "n_layer", "num_layers")
        experts = int_field(c, "n_routed_experts", "num_local_experts", "num_experts", default=0)
        mla = {}
        if c.get("kv_lora_rank"):
            mla = {
                "q_lora_rank": int_field(c, "q_lora_rank", default=0),
                "kv_lora_rank": int_field(c, "kv_lora_rank"),
                "qk_rope_head_dim": int_field(c, "qk_rope_head_dim"),
                "qk_nope_head_dim": int_field(c, "qk_nope_head_dim"),
                "v_head_dim": int_field(c, "v_head_dim"),
            }
        dense_layers = int_field(c, "first_k_dense_replace", default=0) if experts else 0
        if experts and isinstance(c.get("mlp_only_layers"), list):
            dense_layers = max(dense_layers, len(c["mlp_only_layers"]))
        types: list[Any] = c["layer_types"] if isinstance(c.get("layer_types"), list) else []
        sliding = int_field(c, "sliding_window", default=0) if c.get("sliding_window") else 0
        return cls(
            layers=layers,
            hidden=hidden,
            intermediate=int_field(c, "intermediate_size", "ffn_hidden_size", default=4 * hidden),
            heads=heads,
            kv_heads=int_field(c, "num_key_value_heads", default=heads),
            head_dim=int_field(c, "head_dim", default=hidden // heads),
            vocab=int_field(c, "vocab_size"),
            tied=bool(c.get("tie_word_embeddings", False)),
            experts=experts,
            top_k=int_field(c, "num_experts_per_tok", "experts_per_token", "moe_topk", default=0) if experts else 0,
            expert_inter=int_field(c, "moe_intermediate_size", "intermediate_size") if experts else 0,
            shared_experts=int_field(c, "n_shared_experts", default=0) if experts else 0,
            dense_layers=dense_layers,
            mla=mla,
            mtp_layers=int_field(c, "num_nextn_predict_layers", default=0),
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
