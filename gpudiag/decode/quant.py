"""Bytes per weight of each module kind, from `torch_dtype` and `quantization_config` (docs/decode-model.md,
"Bytes"): fp8 blocks, compressed-tensors, AWQ/GPTQ, mxfp4 and nvfp4, with the modules a quantization ignore list
leaves at the checkpoint's dtype."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpudiag.decode.config_fields import ConfigError, as_object, positive_int

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
        width = positive_int(qc.get("bits")) or 4
        size = positive_int(qc.get("group_size")) or 128
        return width / 8 + (2 + width / 8) / size, f"int{width}_g{size}"
    if method == "compressed-tensors":
        groups = [g for g in as_object(qc.get("config_groups")).values() if isinstance(g, dict)]
        weights = as_object(groups[0].get("weights")) if groups else {}
        bits = positive_int(weights.get("num_bits"))
        if bits is None:
            return None
        kind = str(weights.get("type") or "int")
        strategy = str(weights.get("strategy") or "")
        group = positive_int(weights.get("group_size"))
        if kind == "float" and bits == 4:
            return 0.5 + 1 / (group or 16), "nvfp4"
        block = weights.get("block_structure")
        if strategy == "block" and isinstance(block, list) and len(block) == 2 and all(map(positive_int, block)):
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
