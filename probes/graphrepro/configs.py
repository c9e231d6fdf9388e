"""Model and draft config.json generation for dummy-weight repros (no weights are ever read).

The target is the deployment's config.json cut to a few layers, or a bundled Llama-style config. The
draft is the deployment's draft config, or one derived from the target for EAGLE, EAGLE3 or DFlash.
Data lives here as Python because the bundle carries only modules.
"""
import copy
import json
import os

from probes.graphrepro import capture

# A Llama-3-8B-shaped config (public architecture numbers), used when the host gives none.
BUNDLED_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0, "hidden_act": "silu", "torch_dtype": "bfloat16", "tie_word_embeddings": False,
    "bos_token_id": 128000, "eos_token_id": 128001, "attention_bias": False,
}

# A small Llama-shaped config (1024 wide, 32000 tokens) for quick real launches, e.g. scripts/gpu-check.sh.
SMALL_LLAMA = dict(BUNDLED_LLAMA, hidden_size=1024, intermediate_size=2816, num_attention_heads=16,
                   num_key_value_heads=4, head_dim=64, num_hidden_layers=8, vocab_size=32000,
                   max_position_embeddings=4096, bos_token_id=1, eos_token_id=2)

DRAFT_ARCHITECTURES = {"EAGLE": "LlamaForCausalLMEagle", "EAGLE3": "LlamaForCausalLMEagle3",
                       "DFLASH": "DFlashDraftModel"}
# Keys that count layers in some architectures and must shrink with num_hidden_layers.
LAYER_BOUND_KEYS = ("first_k_dense_replace", "moe_layer_freq_start")


class ConfigError(ValueError):
    """A config.json that cannot be used; the message names the file."""


def read_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError("%s: cannot read: %s" % (path, exc)) from None
    if not isinstance(config, dict):
        raise ConfigError("%s: not a JSON object" % path)
    return config


def text_config(config):
    """Multimodal configs nest the language model under text_config / llm_config."""
    for key in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(key), dict) and "num_hidden_layers" in config[key]:
            return config[key]
    return config


def reduce_layers(config, layers):
    """A copy with `layers` decoder layers (never more than it had), consistent for MoE / MLA models."""
    reduced = copy.deepcopy(config)
    text = text_config(reduced)
    original = int(text.get("num_hidden_layers") or layers)
    keep = max(1, min(int(layers), original))
    text["num_hidden_layers"] = keep
    for key in LAYER_BOUND_KEYS:
        if isinstance(text.get(key), int):
            text[key] = min(text[key], keep - 1 if keep > 1 else 0)
    if isinstance(text.get("layer_types"), list):
        text["layer_types"] = text["layer_types"][:keep]
    return reduced


def layer_count(config):
    return int(text_config(config).get("num_hidden_layers") or 1)


def set_layers(config, layers):
    """A copy with exactly `layers` decoder layers (layer_types cut, or extended with its last entry).

    DFlash's draft gets the target's layer cut through --json-model-override-args, which sglang applies
    to the draft's config too: its config.json is made to say the same."""
    changed = copy.deepcopy(config)
    text = text_config(changed)
    text["num_hidden_layers"] = int(layers)
    types = text.get("layer_types")
    if isinstance(types, list) and types:
        text["layer_types"] = (types + [types[-1]] * int(layers))[:int(layers)]
    return changed


def derive_draft(target, algorithm, draft_tokens=16):
    """A one-layer draft config for the target: same hidden size, heads and vocabulary."""
    algorithm = algorithm.upper()
    if algorithm not in DRAFT_ARCHITECTURES:
        raise ConfigError("no draft config recipe for algorithm %r" % algorithm)
    text = text_config(target)
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "hidden_act",
            "torch_dtype", "bos_token_id", "eos_token_id", "rope_scaling")
    draft = dict((k, copy.deepcopy(text[k])) for k in keys if k in text)
    missing = [k for k in ("hidden_size", "num_attention_heads", "vocab_size") if k not in draft]
    if missing:
        raise ConfigError("target config lacks %s; cannot derive a draft" % ", ".join(missing))
    draft.setdefault("intermediate_size", 4 * draft["hidden_size"])
    draft.setdefault("num_key_value_heads", draft["num_attention_heads"])
    draft.update(architectures=[DRAFT_ARCHITECTURES[algorithm]], model_type="llama", num_hidden_layers=1,
                 tie_word_embeddings=False)
    target_layers = int(text.get("num_hidden_layers") or 1)
    if algorithm == "EAGLE3":
        draft["draft_vocab_size"] = draft["vocab_size"]
        draft["target_hidden_size"] = draft["hidden_size"]
        # Explicit aux ids: sglang's default points [2, L//2, L-3] are not all reached on a cut target.
        # num_aux_hidden_states: the 3 states 0.5.11's buffer hard-codes, said where later releases read it.
        draft["num_aux_hidden_states"] = capture.EAGLE3_AUX_STATES
        draft["eagle_config"] = {"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids":
                                 capture.spread_ids(capture.EAGLE3_AUX_STATES, target_layers)}
    elif algorithm == "DFLASH":
        # mask_token_id must be explicit: the repro runs with --skip-tokenizer-init.
        draft["dflash_config"] = {"block_size": int(draft_tokens), "num_target_layers": target_layers,
                                  "target_layer_ids": capture.spread_ids(capture.DERIVED_DFLASH_IDS,
                                                                         target_layers),
                                  "mask_token_id": int(draft["vocab_size"]) - 1}
    return draft


def fit_draft(draft, target, algorithm, draft_tokens):
    """The deployment's own draft config, kept, but pointed at the reduced target where it must be: its
    layer ids moved to layers the cut target captures, as many as it had (the fc width stays its own)."""
    fitted = copy.deepcopy(draft)
    algorithm = algorithm.upper()
    layers = int(text_config(target).get("num_hidden_layers") or 1)
    if algorithm == "EAGLE3" and capture.uses_aux(fitted):
        cfg = fitted.setdefault("eagle_config", {})
        count = capture.id_count(draft, "EAGLE3")
        cfg["eagle_aux_hidden_state_layer_ids"] = capture.fitted_ids(
            capture.eagle3_ids(draft) or [-1] * count, layers)
    if algorithm == "DFLASH":
        cfg = fitted.setdefault("dflash_config", {})
        cfg["block_size"] = int(draft_tokens)
        cfg["num_target_layers"] = layers
        cfg["target_layer_ids"] = capture.fitted_ids(capture.dflash_ids(draft) or [-1] * capture.DERIVED_DFLASH_IDS,
                                                     layers)
        fitted.pop("target_layer_ids", None)   # one place for the ids: dflash_config's, read first by sglang
        if cfg.get("mask_token_id") is None:
            cfg["mask_token_id"] = int(text_config(target).get("vocab_size", 2)) - 1
    return fitted


def write_model_dir(folder, config):
    """A model directory holding only config.json (enough for --load-format dummy)."""
    if not os.path.isdir(folder):
        os.makedirs(folder)
    path = os.path.join(folder, "config.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(config, fh, indent=2, sort_keys=True)
    return folder


def copy_code_files(source_dir, folder):
    """Remote-code configs (`auto_map`) need their .py files next to config.json; nothing else is copied."""
    copied = []
    if not source_dir or not os.path.isdir(source_dir):
        return copied
    for name in sorted(os.listdir(source_dir)):
        path = os.path.join(source_dir, name)
        if name.endswith(".py") and os.path.isfile(path):
            with open(path, "rb") as src, open(os.path.join(folder, name), "wb") as dst:
                dst.write(src.read())
            copied.append(name)
    return copied


def target_config(model_dir, layers):
    """(config, source): the host's config.json reduced, or the bundled one when there is none."""
    if model_dir and os.path.isfile(os.path.join(model_dir, "config.json")):
        return reduce_layers(read_config(model_dir), layers), os.path.join(model_dir, "config.json")
    return reduce_layers(BUNDLED_LLAMA, layers), "bundled Llama-3-8B-shaped config"
