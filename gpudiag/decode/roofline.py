"""The roofline of one decode (or verify) step: what the step must read, compute and communicate on one GPU,
the time each would take at this host's limits, and — against the step time the server measured — the verdict.

Step time from a decode line: sglang's `gen throughput` is tokens generated since the previous line over the wall
time since it, and `accept len` is tokens per request per verify step (bonus token included), so
T_step = #running-req × max(accept len, 1) / gen throughput. Achieved bandwidth = bytes per GPU / T_step; MBU is
that over the datasheet peak (Databricks' definition), also given over the measured copy bandwidth when one was
measured. Component times: memory bytes/BW_eff (BW_eff = measured copy bandwidth, else 0.8 × datasheet), compute
FLOPs/(0.6 × dense BF16 peak), collectives (collectives.py). Thresholds (docs/decode-model.md): bandwidth-bound
when MBU ≥ 0.5 and memory time ≥ 60% of the step; communication-bound when collectives take ≥ 40%; compute-bound
when compute takes ≥ 60%; overhead-bound when what the model does not explain is ≥ 50%; partly bandwidth-bound
when MBU is 0.3–0.5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.decode.collectives import step_collectives
from gpudiag.decode.model_bytes import Model
from gpudiag.decode.step_bytes import step_bytes

BW_EFF_OF_DATASHEET = 0.8  # copy kernels reach about 0.88 of datasheet; decode kernels less
P_EFF_OF_PEAK = 0.6
BANDWIDTH_MBU, BANDWIDTH_SHARE = 0.5, 0.6
PARTLY_MBU = 0.3
COMM_SHARE, COMPUTE_SHARE, OVERHEAD_SHARE = 0.4, 0.6, 0.5

BANDWIDTH, PARTLY, COMMUNICATION, COMPUTE, OVERHEAD, MIXED = (
    "bandwidth-bound",
    "partly bandwidth-bound",
    "communication-bound",
    "compute-bound",
    "overhead-bound",
    "mixed",
)


@dataclass(frozen=True)
class Setup:
    """One server on one host: what the step model needs besides the batch."""

    model: Model
    tp: int
    ep: int
    dp_attention: bool
    kv_dtype_bytes: float
    all_to_all_moe: bool
    bw_eff: float  # bytes/s
    bw_peak: float  # bytes/s, datasheet
    p_eff: float  # FLOP/s
    p_peak: float  # FLOP/s, dense BF16 datasheet
    busbw_gbps: float
    alpha_us: float
    context: float  # tokens cached per running request
    draft: Model | None = None
    draft_passes: int = 1  # draft forwards per step (DFLASH: one block; EAGLE: num_steps)
    draft_tokens_per_request: int = 1  # tokens per request in each draft forward


def attention_flops_per_query(model: Model, context: float) -> float:
    """Per query token over `context` cached tokens, all layers: dense 4·H·d·ctx; MLA (absorbed)
    H·(2(r + dr) + 2r)·ctx."""
    if model.mla:
        r, dr = model.mla["kv_lora_rank"], model.mla["qk_rope_head_dim"]
        return model.heads * (2 * (r + dr) + 2 * r) * context * model.layers
    return 4 * model.heads * model.head_dim * context * model.layers


@dataclass(frozen=True)
class Pass:
    """One forward pass of `tokens` tokens on one GPU: bytes, FLOPs and the times they take."""

    tokens: int
    bytes: float
    expert_bytes: float
    kv_bytes: float
    experts_touched: float
    busiest_rank_experts: float
    flops: float
    mem_s: float
    compute_s: float
    comm_s: float
    collectives: dict[str, float]

    @property
    def seconds(self) -> float:
        return max(self.mem_s, self.compute_s) + self.comm_s


def forward(setup: Setup, model: Model, tokens: int, requests: int, logits: bool = True, kv: bool = True) -> Pass:
    t = max(setup.tp, 1)
    kv_tokens = requests * setup.context if kv else 0.0
    read = step_bytes(model, tokens, setup.tp, setup.ep, kv_tokens, setup.kv_dtype_bytes, setup.dp_attention)
    flops = (
        2 * model.active_params() * tokens + attention_flops_per_query(model, setup.context if kv else 0) * tokens
    ) / t
    comm = step_collectives(
        tokens,
        model.hidden,
        model.vocab,
        model.layers,
        model.moe_layers,
        model.top_k,
        setup.tp,
        setup.busbw_gbps,
        setup.alpha_us,
        setup.all_to_all_moe,
        logits,
    )
    return Pass(
        tokens,
        read.total,
        read.experts,
        read.kv,
        read.experts_touched,
        read.busiest_rank_experts,
        flops,
        read.total / setup.bw_eff,
        flops / setup.p_eff,
        comm.seconds,
        comm.to_value(),
    )


@dataclass(frozen=True)
class Step:
    """A decode step (speculative: a draft pass and a verify pass of running × block tokens)."""

    main: Pass
    draft_s: float

    @property
    def seconds(self) -> float:
        return self.main.seconds + self.draft_s


def step(setup: Setup, running: int, block: int = 1) -> Step:
    """The model's step without its fixed overhead: a decode of `running` tokens, or with `block` > 1 a verify of
    running × block tokens after the draft."""
    main = forward(setup, setup.model, running * block, running)
    draft_s = 0.0
    if block > 1 and setup.draft is not None:
        tokens = running * setup.draft_tokens_per_request
        one = forward(setup, setup.draft, tokens, running, logits=True, kv=False)
        draft_s = one.seconds * setup.draft_passes
    return Step(main, draft_s)


def verdict(mbu: float, shares: dict[str, float]) -> str:
    if mbu >= BANDWIDTH_MBU and shares["mem"] >= BANDWIDTH_SHARE:
        return BANDWIDTH
    if shares["comm"] >= COMM_SHARE:
        return COMMUNICATION
    if shares["compute"] >= COMPUTE_SHARE:
        return COMPUTE
    if shares["fixed"] >= OVERHEAD_SHARE:
        return OVERHEAD
    if mbu >= PARTLY_MBU:
        return PARTLY
    return MIXED


def shares_of(modelled: Step, step_s: float) -> dict[str, float]:
    """Each component's share of the measured step; `fixed` is what the model leaves unexplained."""
    main = modelled.main
    parts = {
        "mem": main.mem_s,
        "compute": main.compute_s,
        "comm": main.comm_s,
        "draft": modelled.draft_s,
    }
    parts["fixed"] = max(step_s - modelled.seconds, 0.0)
    return {k: round(v / step_s, 3) if step_s > 0 else 0.0 for k, v in parts.items()}


def components_ms(modelled: Step, step_s: float) -> dict[str, Any]:
    main = modelled.main
    return {
        "mem": round(main.mem_s * 1e3, 2),
        "compute": round(main.compute_s * 1e3, 2),
        "comm": round(main.comm_s * 1e3, 2),
        "draft": round(modelled.draft_s * 1e3, 2),
        "fixed": round(max(step_s - modelled.seconds, 0.0) * 1e3, 2),
    }
