"""The deployment probe's model configs: each server's config.json and draft config found as the server finds
them (HF cache with the server's own HF_HOME, a relative --model-path from the server's working directory, a
directory), the index's total_size and nothing else of it, weights never opened, bounds and odd files said as
reasons. The cache is the fixture laid out as huggingface_hub lays it out (tests/fixtures/hf_cache)."""
import json
import os
import shutil
from pathlib import Path

from probes.hostinfo import model_config

CACHE = Path(__file__).resolve().parents[1] / "fixtures" / "hf_cache"


def _server(pid, tmp_path, **args):
    return {"pid": pid, "args": args, "env": {"HF_HOME": str(tmp_path / "hf")}}


def _proc(tmp_path, pid, cwd):
    root = tmp_path / "proc"
    (root / str(pid)).mkdir(parents=True, exist_ok=True)
    os.symlink(cwd, root / str(pid) / "cwd")
    return str(root)


def test_a_hub_id_is_read_from_the_server_s_own_cache_with_the_index_total_only(tmp_path):
    shutil.copytree(CACHE, tmp_path / "hf" / "hub")
    server = _server(11, tmp_path, model_path="deepseek-ai/DeepSeek-V3",
                     speculative_draft_model_path="meta-llama/Llama-3.1-8B-Instruct")
    found = model_config.read_model_configs([server], _proc(tmp_path, 11, tmp_path))["11"]
    model = found["model"]
    assert model["config"]["n_routed_experts"] == 256 and model["index_total_size"] == 688586727753
    assert "Hugging Face cache" in model["how"] and model["where"].startswith(str(tmp_path / "hf" / "hub"))
    assert set(model) == {"where", "how", "config", "index_total_size", "index_reason"} - {"index_reason"}
    assert found["draft"]["config"]["hidden_size"] == 4096


def test_a_relative_model_path_is_the_server_s_working_directory_s(tmp_path):
    work = tmp_path / "srv"
    (work / "models" / "m").mkdir(parents=True)
    (work / "models" / "m" / "config.json").write_text(json.dumps({"hidden_size": 64}))
    (work / "models" / "m" / "model-00001-of-00001.safetensors").write_bytes(b"\0" * 16)
    proc = _proc(tmp_path, 12, work)
    found = model_config.read_model_configs([_server(12, tmp_path, model_path="models/m")], proc)["12"]["model"]
    assert found["where"] == str(work / "models" / "m") and found["config"] == {"hidden_size": 64}
    assert found["index_total_size"] is None and "no model.safetensors.index.json" in found["index_reason"]


def test_bounds_and_odd_files_are_reasons_never_failures(tmp_path, monkeypatch):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("[1, 2]")
    (folder / "model.safetensors.index.json").write_text("{not json")
    proc = _proc(tmp_path, 13, tmp_path)
    odd = model_config.read_model_configs([_server(13, tmp_path, model_path=str(folder))], proc)["13"]["model"]
    assert odd["reason"] == "config.json is not a JSON object"
    (folder / "config.json").write_text(json.dumps({"hidden_size": 8}))
    found = model_config.read_model_configs([_server(13, tmp_path, model_path=str(folder))], proc)["13"]["model"]
    assert found["index_total_size"] is None and "is not JSON" in found["index_reason"]
    monkeypatch.setattr(model_config, "MAX_CONFIG", 4)
    big = model_config.read_model_configs([_server(13, tmp_path, model_path=str(folder))], proc)["13"]["model"]
    assert "over the 4-byte bound" in big["reason"] and "config" not in big
    missing = model_config.read_model_configs([_server(13, tmp_path, model_path="org/absent")], proc)["13"]
    assert "neither a local directory" in missing["model"]["reason"]
    assert model_config.read_model_configs([{"pid": 14, "args": {}}], proc) == {}
