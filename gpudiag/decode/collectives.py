"""Collectives of one decode or verify step and their time on the host's interconnect.

Bus bandwidth follows nccl-tests (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
busbw = algbw × 2(n−1)/n for all-reduce and × (n−1)/n for all-gather, reduce-scatter and all-to-all, so one bus
bandwidth figure describes a link whatever the GPU count. A collective of S bytes takes α + S·f/busbw with f that
factor. Per step (T tokens, bf16 activations): one all-reduce of T·h·2 bytes after attention and one after each
MLP/MoE block (sglang's default MoE path, no DeepEP), the logits all-gather of T·V·2 bytes, and with a DeepEP /
all-to-all MoE backend a dispatch (T·k·h·1, fp8) and combine (T·k·h·2) per MoE layer instead of that all-reduce.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_REDUCE, ALL_GATHER, ALL_TO_ALL = "all_reduce", "all_gather", "all_to_all"


def bus_factor(op: str, ranks: int) -> float:
    """busbw / algbw for a collective over `ranks` GPUs (nccl-tests' definition)."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks if op == ALL_REDUCE else (ranks - 1) / ranks


def seconds(op: str, size: float, ranks: int, busbw_gbps: float, alpha_us: float) -> float:
    """α + size·f/busbw: the time of one collective moving `size` bytes (its algorithm size) over `ranks` GPUs."""
    if ranks <= 1 or size <= 0:
        return 0.0
    return alpha_us * 1e-6 + size * bus_factor(op, ranks) / (busbw_gbps * 1e9)


@dataclass(frozen=True)
class StepCollectives:
    all_reduces: int
    all_reduce_bytes: float  # each
    gather_bytes: float  # the logits all-gather
    a2a_per_layer_bytes: float  # dispatch + combine, per MoE layer (0 without an all-to-all MoE backend)
    seconds: float

    def to_value(self) -> dict[str, float]:
        return {
            "all_reduces": self.all_reduces,
            "all_reduce_bytes": self.all_reduce_bytes,
            "logits_gather_bytes": self.gather_bytes,
            "all_to_all_bytes_per_layer": self.a2a_per_layer_bytes,
            "ms": round(self.seconds * 1e3, 3),
        }


def step_collectives(
    tokens: int,
    hidden: int,
    vocab: int,
    layers: int,
    moe_layers: int,
    top_k: int,
    tp: int,
    busbw_gbps: float,
    alpha_us: float,
    all_to_all_moe: bool = False,
    logits: bool = True,
) -> StepCollectives:
    """The TP collectives of one forward pass of `tokens` tokens through `layers` layers."""
    per = tokens * hidden * 2
    reduces = layers + (layers - moe_layers if all_to_all_moe else layers)
    total = reduces * seconds(ALL_REDUCE, per, tp, busbw_gbps, alpha_us)
    gather = tokens * vocab * 2 if logits else 0
    total += seconds(ALL_GATHER, gather, tp, busbw_gbps, alpha_us) if logits else 0.0
    a2a = tokens * top_k * hidden * 3 if all_to_all_moe else 0
    if all_to_all_moe:
        total += moe_layers * 2 * seconds(ALL_TO_ALL, a2a / 2, tp, busbw_gbps, alpha_us)
    return StepCollectives(reduces, per, gather, a2a, total)
