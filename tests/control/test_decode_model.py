"""gpudiag.decode against figures it did not compute.

- Checkpoint bytes predicted from config.json alone, within 2% of `metadata.total_size` of the published
  model.safetensors.index.json (fixtures laid out as the Hugging Face cache does: config.json and the index's
  metadata only; the weight map is left empty):
  Llama-3.1-8B-Instruct, dense bf16, 16,060,522,496 B (https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct,
  also quoted in the HF hub docs); DeepSeek-V3, fp8 block-128 MoE with one MTP module, 688,586,727,753 B
  (https://huggingface.co/deepseek-ai/DeepSeek-V3); gpt-oss-20b, mxfp4 experts, 13,761,264,768 B
  (https://huggingface.co/openai/gpt-oss-20b, config.json and index as published). Kimi-K2-Thinking (int4 g32
  routed experts, compressed-tensors) has no index in the fixtures: its check is the published on-disk size,
  "about 594 GB" (https://shipboardai.com/blog/kimi-k2-6-native-int4-on-vessel); its config fields are those of
  https://huggingface.co/RedHatAI/Kimi-K2-Thinking-FP8-Block/blob/main/config.json with Moonshot's INT4 scheme.
- Active parameters against the model cards: DeepSeek-V3 36.6B incl. the 0.9B head (README_WEIGHTS.md), gpt-oss-20b
  3.6B, Kimi K2 "32B activated".
- Distinct experts touched by T tokens against a seeded Monte Carlo of uniform top-k routing; the busiest EP rank
  likewise.
- Bus bandwidth against published nccl-tests rows (https://github.com/kvcache-ai/Mooncake/pull/3484: all_reduce_perf
  on 8 GPUs, algbw = size/time, busbw = 1.75 × algbw).
- Single-stream bandwidth share of a published benchmark: Llama-3.1-8B bf16 on one H100 at 158.34 tok/s without
  speculation (sglang's speculative decoding docs, from the EAGLE-3 paper, https://arxiv.org/abs/2503.01840):
  about 0.76 of 3.35 TB/s.
"""
import json
import random
from pathlib import Path

import pytest

from gpudiag.decode import hardware
from gpudiag.decode.collectives import ALL_GATHER, ALL_REDUCE, bus_factor, seconds, step_collectives
from gpudiag.decode.config_fields import ConfigError
from gpudiag.decode.model_bytes import Model
from gpudiag.decode.roofline import Setup, step
from gpudiag.decode.speculation import acceptance_rate, tau_at
from gpudiag.decode.step_bytes import busiest_rank_experts, experts_touched, step_bytes

CACHE = Path(__file__).resolve().parents[1] / "fixtures" / "hf_cache"



def _read(repo):
    folder = next((CACHE / ("models--" + repo.replace("/", "--")) / "snapshots").iterdir())
    config = json.loads((folder / "config.json").read_text())
    index = folder / "model.safetensors.index.json"
    total = json.loads(index.read_text())["metadata"]["total_size"] if index.exists() else None
    return config, total


@pytest.mark.parametrize("repo, quant", [
    ("meta-llama/Llama-3.1-8B-Instruct", "none"),
    ("deepseek-ai/DeepSeek-V3", "fp8_block128"),
    ("openai/gpt-oss-20b", "mxfp4"),
])
def test_checkpoint_bytes_match_the_published_index_within_2_percent(repo, quant):
    config, total = _read(repo)
    model = Model.of(config)
    assert model.quant.method == quant
    assert abs(model.checkpoint_bytes() / total - 1) < 0.02


def test_the_int4_moe_matches_its_published_size_and_leaves_all_but_routed_experts_bf16():
    config, _ = _read("moonshotai/Kimi-K2-Thinking")
    model = Model.of(config)
    assert abs(model.checkpoint_bytes() / 594e9 - 1) < 0.02
    described = model.quant.describe()
    assert described["experts"] == "int4_g32" and {described[k] for k in described if k != "experts"} == {"bf16"}
    assert model.expert_bytes() == 3 * 7168 * 2048 * (0.5 + 2 / 32)


@pytest.mark.parametrize("repo, published, tolerance", [
    ("deepseek-ai/DeepSeek-V3", 36.6e9, 0.02),
    ("openai/gpt-oss-20b", 3.6e9, 0.03),
    ("moonshotai/Kimi-K2-Thinking", 32e9, 0.05),
])
def test_active_parameters_match_the_model_cards(repo, published, tolerance):
    assert abs(Model.of(_read(repo)[0]).active_params() / published - 1) < tolerance


def test_a_multimodal_checkpoint_is_read_from_its_text_config():
    config, _ = _read("moonshotai/Kimi-K2-Thinking")
    wrapped = {"architectures": ["KimiK25ForConditionalGeneration"], "text_config": dict(config),
               "quantization_config": config["quantization_config"], "vision_config": {"hidden_size": 1152}}
    del wrapped["text_config"]["quantization_config"]
    assert Model.of(wrapped).checkpoint_bytes() == Model.of(config).checkpoint_bytes()
    # Kimi K2.5/K2.6 (`kimi_k25`) keep the quantization block inside text_config
    inner = {"model_type": "kimi_k25", "vision_config": {"vt_num_hidden_layers": 27}, "text_config": dict(config)}
    assert Model.of(inner).quant.describe()["experts"] == "int4_g32"


@pytest.mark.parametrize("bad", [{}, {"hidden_size": "7168"}, [], {"hidden_size": 8, "num_attention_heads": 2,
                                                                    "num_hidden_layers": True, "vocab_size": 4},
                                 {"hidden_size": 8, "num_attention_heads": 0, "num_hidden_layers": 2, "vocab_size": 4},
                                 {"hidden_size": 1e300, "num_attention_heads": 2, "num_hidden_layers": 2,
                                  "vocab_size": 4},
                                 {"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 2, "vocab_size": 4,
                                  "quantization_config": {"quant_method": "some_future_scheme"}}])
def test_a_garbled_config_is_a_one_line_error(bad):
    with pytest.raises(ConfigError):
        Model.of(bad)


def _monte_carlo(experts, top_k, tokens, ranks, trials, seed):
    rng = random.Random(seed)
    distinct, busiest = 0.0, 0.0
    per_rank = experts // ranks
    for _ in range(trials):
        hit = set()
        for _ in range(tokens):
            hit.update(rng.sample(range(experts), top_k))
        distinct += len(hit)
        counts = [0] * ranks
        for e in hit:
            counts[e // per_rank] += 1
        busiest += max(counts)
    return distinct / trials, busiest / trials


@pytest.mark.parametrize("experts, top_k, tokens", [(384, 8, 1), (384, 8, 16), (384, 8, 128), (256, 8, 48),
                                                    (32, 4, 3), (128, 8, 300)])
def test_expected_distinct_experts_match_a_seeded_monte_carlo(experts, top_k, tokens):
    distinct, _ = _monte_carlo(experts, top_k, tokens, 8, 400, seed=7)
    assert abs(experts_touched(experts, top_k, tokens) / distinct - 1) < 0.01


@pytest.mark.parametrize("tokens", [1, 16, 128])
def test_the_busiest_ep_rank_matches_a_seeded_monte_carlo(tokens):
    _, busiest = _monte_carlo(384, 8, tokens, 8, 400, seed=11)
    assert abs(busiest_rank_experts(384, 8, tokens, 8) / busiest - 1) < 0.06


# all_reduce_perf rows (size B, time µs, algbw GB/s, busbw GB/s), out-of-place, from Mooncake PR #3484.
NCCL_TESTS_ROWS = [(4194304, 53.24, 78.78, 137.87), (8388608, 81.16, 103.36, 180.88),
                   (16777216, 121.33, 138.28, 242.00), (33554432, 195.40, 171.72, 300.51)]


@pytest.mark.parametrize("size, time_us, algbw, busbw", NCCL_TESTS_ROWS)
def test_bus_bandwidth_is_nccl_tests_definition(size, time_us, algbw, busbw):
    assert abs(size / (time_us * 1e-6) / 1e9 - algbw) < 0.01 * algbw
    assert abs(algbw * bus_factor(ALL_REDUCE, 8) - busbw) < 0.01 * busbw
    # and the time of that collective at that bus bandwidth, without latency, is the measured time
    assert abs(seconds(ALL_REDUCE, size, 8, busbw, 0.0) * 1e6 - time_us) < 0.01 * time_us


def test_gather_moves_n_minus_1_over_n_and_one_gpu_moves_nothing():
    assert bus_factor(ALL_GATHER, 8) == 7 / 8 and bus_factor(ALL_REDUCE, 2) == 1.0
    assert seconds(ALL_REDUCE, 1e6, 1, 28, 40) == 0.0
    # 8-byte all-reduce on PCIe: the latency row of nccl#1530 (42.56 µs) is what the table assumes (40 µs)
    assert abs(seconds(ALL_REDUCE, 8, 8, 28, hardware.LINKS["pcie"].alpha_us) * 1e6 - 42.56) < 5


def test_per_step_collectives_count_two_all_reduces_per_layer_and_the_logits_gather():
    c = step_collectives(16, 7168, 163840, 61, 60, 8, 8, 28, 40)
    assert c.all_reduces == 122 and c.all_reduce_bytes == 16 * 7168 * 2 and c.gather_bytes == 16 * 163840 * 2
    deepep = step_collectives(16, 7168, 163840, 61, 60, 8, 8, 28, 40, all_to_all_moe=True)
    assert deepep.all_reduces == 62 and deepep.a2a_per_layer_bytes == 16 * 8 * 7168 * 3


def test_single_stream_llama_8b_on_h100_reads_about_three_quarters_of_its_bandwidth():
    model = Model.of(_read("meta-llama/Llama-3.1-8B-Instruct")[0])
    read = step_bytes(model, 1, 1, 1, 1024)
    h100 = hardware.gpu_of("NVIDIA H100 80GB HBM3")
    mbu = read.total * 158.34 / (h100.mem_bw_gbps * 1e9)
    assert 0.7 < mbu < 0.8


def test_datasheet_rows_are_found_by_nvidia_smi_names():
    assert hardware.gpu_of("NVIDIA RTX PRO 6000 Blackwell Server Edition").mem_bw_gbps == 1792
    assert hardware.gpu_of("NVIDIA H100 PCIe").name == "H100 PCIe"
    assert hardware.gpu_of("NVIDIA A100-SXM4-40GB").mem_bw_gbps == 1555
    assert hardware.gpu_of("Tesla T4") is None
    assert hardware.link_kind("unknown", hardware.gpu_of("NVIDIA H200")) == "nvlink"
    assert hardware.link_kind("mixed", None) == "pcie"


def test_mla_kv_cache_is_whole_on_every_tp_rank_and_gqa_splits_by_heads():
    kimi = Model.of(_read("moonshotai/Kimi-K2-Thinking")[0])
    assert step_bytes(kimi, 1, 8, 8, 1000).kv == 1000 * 576 * 2 * 61
    assert step_bytes(kimi, 1, 8, 8, 1000, dp_attention=True).kv == 1000 * 576 * 2 * 61 / 8
    llama = Model.of(_read("meta-llama/Llama-3.1-8B-Instruct")[0])
    assert step_bytes(llama, 1, 4, 1, 1000).kv == 1000 * 2 * 8 * 128 * 2 * 32 / 4
    assert step_bytes(llama, 1, 16, 1, 1000).kv == 1000 * 2 * 128 * 2 * 32   # one KV head per rank


def test_leviathan_acceptance_inverts():
    alpha = acceptance_rate(3.75, 16)
    assert abs(tau_at(alpha, 16) - 3.75) < 1e-9
    assert acceptance_rate(1.0, 16) is None and acceptance_rate(16, 16) is None


def test_verify_reads_the_expert_union_and_moves_toward_compute():
    kimi = Model.of(_read("moonshotai/Kimi-K2-Thinking")[0])
    gpu = hardware.gpu_of("RTX PRO 6000 Blackwell")
    setup = Setup(kimi, 8, 8, False, 2.0, False, 0.8 * gpu.mem_bw_gbps * 1e9, gpu.mem_bw_gbps * 1e9,
                  0.6 * gpu.bf16_tflops * 1e12, gpu.bf16_tflops * 1e12, 28, 40, 1024)
    decode, verify = step(setup, 1).main, step(setup, 1, 16).main
    assert verify.experts_touched / decode.experts_touched > 13           # research: ~110 of 384 vs 8
    assert verify.bytes / decode.bytes > 3
    # research §2: at 128 running and a 16-token block, verify needs about 19 TFLOP per GPU
    assert 17e12 < step(setup, 128, 16).main.flops < 20e12
