"""Bytes one GPU reads in one forward pass of T tokens under TP/EP (docs/decode-model.md, "Bytes"): weights, with
the routed experts T tokens touch as an upper bound (uniform, independent top-k routing) and the busiest EP rank's
share, and the KV cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpudiag.decode.model_bytes import Model


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
