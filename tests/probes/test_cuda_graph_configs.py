"""Model-dir and draft-config generation from real config.json shapes (no weights, no sglang)."""
import json

import pytest

from probes.graphrepro import configs

# Public config.json values of real checkpoints, trimmed of fields that do not matter here.
LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
             "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 8192,
             "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "torch_dtype": "bfloat16", "bos_token_id": 128000,
             "eos_token_id": 128009, "hidden_act": "silu", "tie_word_embeddings": False}
QWEN25_7B = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
             "intermediate_size": 18944, "num_attention_heads": 28, "num_key_value_heads": 4,
             "num_hidden_layers": 28, "vocab_size": 152064, "max_position_embeddings": 32768,
             "max_window_layers": 28, "rope_theta": 1000000.0, "sliding_window": 131072, "use_sliding_window": False,
             "torch_dtype": "bfloat16", "tie_word_embeddings": False, "rms_norm_eps": 1e-06}
QWEN3_30B_A3B = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
                 "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
                 "num_experts_per_tok": 8, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                 "num_hidden_layers": 48, "vocab_size": 151936, "max_position_embeddings": 40960,
                 "decoder_sparse_step": 1, "mlp_only_layers": [], "torch_dtype": "bfloat16"}
DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
               "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256,
               "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
               "num_attention_heads": 128, "num_key_value_heads": 128, "kv_lora_rank": 512, "q_lora_rank": 1536,
               "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "num_hidden_layers": 61,
               "num_nextn_predict_layers": 1, "vocab_size": 129280, "max_position_embeddings": 163840,
               "auto_map": {"AutoConfig": "configuration_deepseek.DeepseekV3Config"}, "torch_dtype": "bfloat16"}
GEMMA3_TEXT_NESTED = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                      "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "num_attention_heads": 8,
                                      "num_key_value_heads": 4, "num_hidden_layers": 34, "vocab_size": 262208,
                                      "layer_types": ["sliding_attention"] * 5 * 6 + ["full_attention"] * 4},
                      "vision_config": {"num_hidden_layers": 27, "hidden_size": 1152}}


def write(tmp_path, name, config):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


@pytest.mark.parametrize("config", [LLAMA3_8B, QWEN25_7B, QWEN3_30B_A3B, DEEPSEEK_V3])
def test_reduction_keeps_the_architecture_and_cuts_layers(tmp_path, config):
    folder = write(tmp_path, config["model_type"], config)
    reduced, source = configs.target_config(folder, 2)
    assert source.endswith("config.json")
    assert reduced["num_hidden_layers"] == 2
    for key, value in config.items():
        if key not in ("num_hidden_layers", "first_k_dense_replace"):
            assert reduced[key] == value, key
    assert config["num_hidden_layers"] > 2   # the input is untouched


def test_deepseek_dense_prefix_shrinks_with_the_layers():
    reduced = configs.reduce_layers(DEEPSEEK_V3, 2)
    assert reduced["first_k_dense_replace"] == 1   # one dense layer, one MoE layer: both kinds captured
    assert reduced["num_nextn_predict_layers"] == 1


def test_nested_text_config_is_reduced_and_vision_left_alone():
    reduced = configs.reduce_layers(GEMMA3_TEXT_NESTED, 3)
    assert reduced["text_config"]["num_hidden_layers"] == 3
    assert len(reduced["text_config"]["layer_types"]) == 3
    assert reduced["vision_config"]["num_hidden_layers"] == 27


def test_layers_never_grow_and_the_bundled_config_fills_in(tmp_path):
    assert configs.reduce_layers(LLAMA3_8B, 500)["num_hidden_layers"] == 32
    bundled, source = configs.target_config(str(tmp_path / "missing"), 2)
    assert source.startswith("bundled") and bundled["architectures"] == ["LlamaForCausalLM"]
    assert bundled["num_hidden_layers"] == 2


@pytest.mark.parametrize("algorithm, architecture", [("EAGLE", "LlamaForCausalLMEagle"),
                                                     ("EAGLE3", "LlamaForCausalLMEagle3"),
                                                     ("DFLASH", "DFlashDraftModel")])
def test_derived_draft_matches_the_target_shapes(algorithm, architecture):
    target = configs.reduce_layers(QWEN25_7B, 2)
    draft = configs.derive_draft(target, algorithm, draft_tokens=8)
    assert draft["architectures"] == [architecture] and draft["num_hidden_layers"] == 1
    for key in ("hidden_size", "num_attention_heads", "num_key_value_heads", "vocab_size"):
        assert draft[key] == QWEN25_7B[key]
    if algorithm == "EAGLE3":
        assert draft["draft_vocab_size"] == QWEN25_7B["vocab_size"]
        # two layers reach one capture point (before layer 1): id 1, the last layer, is never captured
        assert draft["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0]
    if algorithm == "DFLASH":
        dflash = draft["dflash_config"]
        assert dflash["block_size"] == 8 and dflash["num_target_layers"] == 2
        assert dflash["target_layer_ids"] == [0]
        assert dflash["mask_token_id"] == QWEN25_7B["vocab_size"] - 1   # no tokenizer to look it up


def test_deployment_draft_is_fitted_to_the_reduced_target(tmp_path):
    target = configs.reduce_layers(QWEN3_30B_A3B, 2)
    dflash_draft = {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 5, "hidden_size": 2048,
                    "dflash_config": {"block_size": 16, "target_layer_ids": [1, 12, 23, 34, 45],
                                      "mask_token_id": 151669}}
    fitted = configs.fit_draft(dflash_draft, target, "DFLASH", 4)
    assert fitted["num_hidden_layers"] == 5
    assert fitted["dflash_config"] == {"block_size": 4, "target_layer_ids": [0], "mask_token_id": 151669,
                                       "num_target_layers": 2}
    six = configs.reduce_layers(QWEN3_30B_A3B, 6)   # one more layer than the draft's five hidden states
    assert configs.fit_draft(dflash_draft, six, "DFLASH", 4)["dflash_config"]["target_layer_ids"] == [0, 1, 2, 3, 4]


def test_model_dir_holds_a_readable_config(tmp_path):
    folder = configs.write_model_dir(str(tmp_path / "m"), configs.reduce_layers(LLAMA3_8B, 2))
    assert configs.read_config(folder)["num_hidden_layers"] == 2
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    with pytest.raises(configs.ConfigError, match="bad/config.json: cannot read"):
        configs.read_config(str(tmp_path / "bad"))
    with pytest.raises(configs.ConfigError, match="lacks hidden_size"):
        configs.derive_draft({"num_attention_heads": 2, "vocab_size": 10}, "EAGLE")


def test_dflash_draft_takes_the_target_cut_its_override_will_force():
    draft = {"architectures": ["DFlashDraftModel"], "num_hidden_layers": 5,
             "layer_types": ["full_attention"] * 4 + ["sliding_attention"]}
    assert configs.set_layers(draft, 2)["layer_types"] == ["full_attention", "full_attention"]
    grown = configs.set_layers({"num_hidden_layers": 1, "layer_types": ["sliding_attention"]}, 3)
    assert grown == {"num_hidden_layers": 3, "layer_types": ["sliding_attention"] * 3}
    assert draft["num_hidden_layers"] == 5   # the original is never changed
    assert configs.layer_count({"text_config": {"num_hidden_layers": 7}}) == 7


def test_prepare_dirs_cuts_dflash_draft_to_the_written_target(tmp_path):
    from probes.graphrepro import sglang_repro
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(dict(LLAMA3_8B, num_hidden_layers=3)))
    settings = {"model": str(model), "layers": 8}   # asks for more layers than the model has
    target_dir, draft_dir, built = sglang_repro.prepare_dirs(str(tmp_path / "w"), settings, "DFLASH", 4)
    assert built["layers"] == 3 and configs.read_config(target_dir)["num_hidden_layers"] == 3
    draft = configs.read_config(draft_dir)
    assert draft["num_hidden_layers"] == 3 and draft["dflash_config"]["num_target_layers"] == 3
    assert draft["dflash_config"]["target_layer_ids"] == [0, 1] and built["refused"] is None
    _, eagle_dir, _ = sglang_repro.prepare_dirs(str(tmp_path / "e"), settings, "EAGLE", 4)
    assert configs.read_config(eagle_dir)["num_hidden_layers"] == 1
