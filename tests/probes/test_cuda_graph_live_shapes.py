"""The repro's defaults come from the live server: its model found as huggingface_hub caches it, its TP, its
largest captured batch size and its draft-token count; the bundled config is used only when said."""
import hashlib
import json
import os

from probes import cuda_graph
from probes.graphrepro import live_shapes

REVISION = "3b2c1f0e9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c"


def fake_hub_cache(cache, model_id, config):
    """The layout huggingface_hub writes: blobs/<sha256>, snapshots/<rev>/config.json -> ../../blobs/<sha256>,
    refs/main holding <rev>."""
    repo = cache / ("models--" + model_id.replace("/", "--"))
    body = json.dumps(config).encode()
    digest = hashlib.sha256(body).hexdigest()
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / digest).write_bytes(body)
    (repo / "snapshots" / REVISION).mkdir(parents=True)
    os.symlink(os.path.join("..", "..", "blobs", digest), str(repo / "snapshots" / REVISION / "config.json"))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    return repo / "snapshots" / REVISION


def server(env, **args):
    return {"servers": [{"pid": 42, "env": env, "args": args}]}


def test_a_hub_id_is_found_in_the_servers_hf_home_cache(tmp_path):
    snapshot = fake_hub_cache(tmp_path / "hf" / "hub", "moonshotai/Kimi-K2.6", {"hidden_size": 7168,
                                                                               "num_hidden_layers": 61})
    draft = fake_hub_cache(tmp_path / "hf" / "hub", "lightseekorg/kimi-k2.6-eagle3",
                           {"architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1})
    deployment = server({"HF_HOME": str(tmp_path / "hf")}, model_path="moonshotai/Kimi-K2.6", tp_size=8,
                        cuda_graph_max_bs=128, speculative_num_draft_tokens=4, speculative_algorithm="EAGLE3",
                        speculative_draft_model_path="lightseekorg/kimi-k2.6-eagle3")
    settings, notes = cuda_graph.settings_from({}), []
    live_shapes.apply(settings, deployment, set(), notes)
    assert settings["model"] == str(snapshot)
    assert settings["draft_model"] == str(draft) and settings["draft_algorithm"] == "EAGLE3"
    assert any("the Hugging Face cache snapshot of moonshotai/Kimi-K2.6" in n for n in notes)
    assert settings["tp"] == 8 and settings["batch_sizes"] == [1, 4, 16, 64, 128]
    assert settings["draft_tokens"] == [2, 4]


def test_hf_hub_cache_wins_over_hf_home_and_given_options_win_over_the_server(tmp_path, monkeypatch):
    snapshot = fake_hub_cache(tmp_path / "hub-cache", "org/model", {"hidden_size": 64, "num_hidden_layers": 4})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    deployment = server({"HF_HOME": str(tmp_path / "elsewhere")}, model_path="org/model", tp_size=2,
                        cuda_graph_bs=[1, 2, 48], speculative_num_draft_tokens=6)
    settings, notes = cuda_graph.settings_from({"tp": 1, "draft_tokens": [3, 3]}), []
    live_shapes.apply(settings, deployment, {"tp", "draft_tokens"}, notes)
    # the server's HF_HOME is looked in first (a miss), then the probe's HF_HUB_CACHE (over its HF_HOME)
    assert live_shapes.hub_cache_dirs({"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}) == ["/a"]
    assert settings["model"] == str(snapshot)
    assert settings["tp"] == 1 and settings["draft_tokens"] == [3, 3] and settings["batch_sizes"] == [1, 4, 16, 48]


def test_a_model_found_nowhere_uses_the_bundled_config_and_says_so(tmp_path):
    deployment = server({"HF_HOME": str(tmp_path / "none")}, model_path="org/absent")
    settings, notes = cuda_graph.settings_from({}), []
    live_shapes.apply(settings, deployment, set(), notes)
    assert settings["model"] is None
    assert notes[0].startswith("model: org/absent is neither a local directory with config.json nor in the "
                               "Hugging Face cache (%s, " % (tmp_path / "none" / "hub"))
    assert notes[0].endswith("; the bundled Llama-3-8B-shaped config is used")
    settings, notes = cuda_graph.settings_from({}), []
    live_shapes.apply(settings, {"servers": []}, set(), notes)
    assert notes == ["model: no live server; the bundled Llama-3-8B-shaped config is used"]


def test_the_default_home_cache_is_read_when_nothing_is_set(tmp_path):
    snapshot = fake_hub_cache(tmp_path / ".cache" / "huggingface" / "hub", "org/m", {"num_hidden_layers": 2})
    caches = live_shapes.hub_cache_dirs({"HOME": str(tmp_path)})
    assert live_shapes.hub_snapshot("org/m", caches) == str(snapshot)
    assert live_shapes.hub_snapshot("../etc", caches) is None
