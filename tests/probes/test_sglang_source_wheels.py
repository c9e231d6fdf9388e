"""sglang_source against real sglang wheels (0.4.6 to 0.5.23) unpacked from PyPI, never imported."""
import functools
import os
import shutil

import pytest

from probes import sglang_source
from probes.context import ProbeContext
from tests.sglang_wheels import require, site_packages_for

EAGLE_DRAFT = "sglang/srt/speculative/eagle_draft_cuda_graph_runner.py"


@functools.lru_cache(maxsize=None)
def _facts(version, site=None):
    site = site or str(site_packages_for(version))
    return sglang_source.collect(ProbeContext(options={"sglang_source": {"site_packages": site}}))


def facts(version):
    require(version)
    return _facts(version)


def flag(data, name):
    found = [f for f in data["server_flags"] if f["name"] == name]
    return found[0] if found else None


def test_0_4_10_predates_grouped_copies_and_dflash():
    data = facts("0.4.10")
    assert data["found"] and data["version"] == "0.4.10"
    assert data["version_source"]["file"] == "sglang/version.py"
    copies = data["grouped_foreach_copy"]
    assert copies["definitions"] == [] and copies["call_sites"] == [] and copies["has_foreach_copy_flag"] == []
    draft = data["eagle"]["draft"]
    assert draft["file"] == EAGLE_DRAFT and draft["replay_method"] == "replay"
    assert draft["batched"] is False and draft["hidden_states_separate"] is False
    assert draft["per_tensor_copies"] == 8 and "hidden_states" in draft["per_tensor_fields"]
    assert data["eagle"]["draft_extend"]["batched"] is False
    assert data["speculative_algorithms"] == ["NONE", "EAGLE", "EAGLE3"]
    assert data["dflash"]["present"] is False and data["dflash"]["worker_file"] is None
    assert data["breakable_graph"] == []
    assert flag(data, "--cuda-graph-max-bs")["via"] == "add_argument"
    assert flag(data, "--speculative-algorithm") is not None
    assert flag(data, "--enable-breakable-cuda-graph") is None


def test_0_5_11_has_one_grouped_copy_but_per_tensor_eagle_copies():
    data = facts("0.5.11")
    assert data["version"] == "0.5.11" and data["version_source"]["file"] == "sglang/_version.py"
    copies = data["grouped_foreach_copy"]
    [definition] = copies["definitions"]
    assert definition["file"] == "sglang/srt/model_executor/cuda_graph_runner.py"
    assert definition["snippet"].startswith("def _grouped_foreach_copy_")
    assert definition["fast_paths"] == []
    assert [f["file"] for f in copies["has_foreach_copy_flag"]] == [definition["file"]]
    [site] = copies["call_sites"]
    assert site["qualname"] == "DecodeInputBuffers.populate_from_forward_batch"
    assert {"input_ids", "seq_lens", "positions"} <= set(site["fields"])
    assert site["resolves_to"] == {"module": definition["module"], "file": definition["file"],
                                   "line": definition["line"]}
    for key in ("draft", "draft_extend"):
        runner = data["eagle"][key]
        assert runner["found"] and runner["batched"] is False and runner["replay_method"] == "replay"
        assert runner["per_tensor_copies"] >= 8
    assert "DFLASH" in data["speculative_algorithms"]
    assert data["dflash"]["present"] and data["dflash"]["worker_file"] == "sglang/srt/speculative/dflash_worker.py"
    assert data["dflash"]["draft_graph_guards"] == []
    assert {"BreakableCUDAGraphCapture", "eager_on_graph"} <= {b["name"] for b in data["breakable_graph"]}
    assert flag(data, "--cuda-graph-max-bs")["via"] == "add_argument"
    piecewise = flag(data, "--enable-piecewise-cuda-graph")
    assert piecewise["deprecated"] and piecewise["alias_of"] == "--enforce-piecewise-cuda-graph"


def test_0_5_14_first_batches_eagle_copies_without_fast_paths():
    data = facts("0.5.14")
    assert data["version"] == "0.5.14"
    definitions = data["grouped_foreach_copy"]["definitions"]
    assert sorted(d["file"] for d in definitions) == ["sglang/srt/model_executor/cuda_graph_buffer_registry.py",
                                                      "sglang/srt/model_executor/runner_utils/buffers.py"]
    assert all(d["fast_paths"] == [] for d in definitions)
    for key in ("draft", "draft_extend"):
        runner = data["eagle"][key]
        assert runner["batched"] and runner["hidden_states_separate"] and runner["replay_method"] == "execute"
        assert runner["grouped_resolves_to"][0]["file"] == "sglang/srt/model_executor/runner_utils/buffers.py"
    assert data["eagle"]["draft"]["per_tensor_fields"] == ["draft_probs", "hidden_states", "temperatures",
                                                           "seq_lens_cpu"]
    old = flag(data, "--cuda-graph-max-bs")
    assert old["deprecated"] and old["alias_of"] == "--cuda-graph-max-bs-decode" and old["via"] == "add_argument"
    assert flag(data, "--cuda-graph-max-bs-decode")["via"] == "field"
    [guard] = data["dflash"]["draft_graph_guards"]
    assert guard["condition"] == "available_mem < 1.0" and guard["disables"] == "capture_decode_cuda_graph"
    assert guard["conditions"] == ["is_cuda() and capture_decode_cuda_graph", "available_mem < 1.0"]
    assert guard["log_conditions"] == []


def test_0_5_23_has_two_definitions_and_eagle_resolves_to_the_reexported_one():
    data = facts("0.5.23")
    assert data["version"] == "0.5.23" and data["metadata_version"] == "0.5.23"
    copies = data["grouped_foreach_copy"]
    by_file = {d["file"]: d for d in copies["definitions"]}
    registry = by_file["sglang/srt/model_executor/cuda_graph_buffer_registry.py"]
    buffers = by_file["sglang/srt/model_executor/runner_utils/buffers.py"]
    assert len(by_file) == 2
    assert {(p["kind"], p["detail"]) for p in registry["fast_paths"]} == {
        ("env_gated", "SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH"),
        ("small_copy_kernel", "try_small_copy from sglang.kernels.ops.memory.small_copy")}
    assert [p["kind"] for p in buffers["fast_paths"]] == ["small_copy_kernel"]
    sites = {(s["file"], s["qualname"]): s["resolves_to"]["file"] for s in copies["call_sites"]}
    assert sites[(EAGLE_DRAFT, "EAGLEDraftCudaGraphRunner.execute")] == buffers["file"]
    assert sites[("sglang/srt/speculative/eagle_draft_extend_cuda_graph_runner.py",
                  "EAGLEDraftExtendCudaGraphRunner.execute")] == buffers["file"]
    assert sites[(registry["file"], "CudaGraphBufferRegistry.fill_from")] == registry["file"]
    for key in ("draft", "draft_extend"):
        runner = data["eagle"][key]
        assert runner["batched"] and runner["replay_method"] == "execute" and runner["hidden_states_separate"]
        assert "hidden_states" not in runner["grouped_fields"] and "seq_lens" in runner["grouped_fields"]
        assert runner["grouped_resolves_to"][0]["file"] == buffers["file"]
    assert data["eagle"]["draft"]["per_tensor_copies"] == 7


def test_0_5_23_dflash_guards_and_generated_flags():
    data = facts("0.5.23")
    dflash = data["dflash"]
    assert dflash["worker_file"] == "sglang/srt/speculative/dflash_worker_v2.py"
    guards = dflash["draft_graph_guards"]
    assert len(guards) == 3
    assert all(g["message"].startswith("Disable DFLASH draft cuda graph because") for g in guards)
    memory = [g for g in guards if "GB GPU" in g["message"]][0]
    assert memory["condition"] == "available_mem < 1.0"
    assert memory["conditions"][0] == "is_cuda() and capture_decode_cuda_graph"
    assert "Disable DFLASH draft cuda graph" in memory["snippet"]
    # The dp-attention guard logs only on TP rank 0: the guard is the if that turns the capture flag off.
    dp = [g for g in guards if "dp attention" in g["message"]][0]
    assert dp["condition"] == "target_dp_enabled and capture_decode_cuda_graph"
    assert dp["conditions"] == [dp["condition"]] and dp["log_conditions"] == ["self._target_tp_rank == 0"]
    platform = [g for g in guards if "device graph capture" in g["message"]][0]
    assert platform["condition"].startswith("capture_decode_cuda_graph and current_platform.is_out_of_tree()")
    assert {g["disables"] for g in guards} == {"capture_decode_cuda_graph"}
    assert flag(data, "--cuda-graph-max-bs") is None
    assert flag(data, "--cuda-graph-max-bs-decode")["via"] == "field"
    assert flag(data, "--cuda-graph-max-bs-decode")["file"] == "sglang/srt/arg_groups/fields/exec_.py"
    disable = flag(data, "--disable-cuda-graph")
    assert disable["deprecated"] and disable["alias_of"].startswith("--cuda-graph-backend")
    assert flag(data, "--speculative-draft-model")["alias_of"] == "--speculative-draft-model-path"
    assert {"DFLASH", "EAGLE", "EAGLE3"} <= set(data["speculative_algorithms"])
    assert data["parse_errors"] == []


def test_0_4_6_enum_algorithms_and_version_literal():
    data = facts("0.4.6")
    assert data["version"] == "0.4.6" and data["version_source"]["file"] == "sglang/version.py"
    assert data["speculative_algorithms"] == ["NONE", "EAGLE", "EAGLE3"]
    assert {a["via"] for a in data["speculative_algorithm_evidence"]} == {"enum"}
    assert data["dflash"]["present"] is False


def test_0_5_14_populate_call_site_is_unreachable_and_the_live_ones_are_reached():
    sites = {s["qualname"]: s for s in facts("0.5.14")["grouped_foreach_copy"]["call_sites"]}
    dead = sites["DecodeInputBuffers.populate_from_forward_batch"]
    assert dead["reachable"] is False and dead["reached_from"] is None
    assert dead["unreachable"].startswith("nothing in the package refers to populate_from_forward_batch")
    registry = sites["CudaGraphBufferRegistry.fill_from"]
    assert registry["reachable"] is True and registry["reached_from"]["name"] == "fill_from"
    assert "fill_from(" in registry["reached_from"]["snippet"]
    assert sites["EAGLEDraftCudaGraphRunner.execute"]["reachable"] is True


@pytest.mark.parametrize("version", ["0.5.11", "0.5.14", "0.5.23"])
def test_call_sites_name_fields_never_loop_variables(version):
    for site in facts(version)["grouped_foreach_copy"]["call_sites"]:
        assert not {"dst", "src", "buf", "dsts", "copy_dsts", "buffer"} & set(site["fields"]), site
        for text in site["dynamic_fields"]:
            assert " for each " in text


def test_0_5_23_registry_fields_are_dynamic_and_draft_extend_is_complete():
    data = facts("0.5.23")
    sites = {s["qualname"]: s for s in data["grouped_foreach_copy"]["call_sites"]}
    fill = sites["CudaGraphBufferRegistry.fill_from"]
    assert fill["fields"] == [] and fill["dynamic_fields"] == ["slot.buffer for each slot in self._slots.values()"]
    extend = data["eagle"]["draft_extend"]["grouped_fields"]
    # refresh_track_indices(buffers.mamba_track_indices, ..., copy_dsts=copy_dsts) appends for the caller.
    assert extend[-2:] == ["select_index", "mamba_track_indices"]
    assert extend == sites["EAGLEDraftExtendCudaGraphRunner.execute"]["fields"]
    assert "hidden_states" not in extend


@pytest.mark.parametrize("version", ["0.4.6", "0.4.10", "0.5.5", "0.5.11", "0.5.14", "0.5.23"])
def test_every_cited_fact_matches_its_line_and_the_record(version):
    data = facts(version)
    site = data["site_packages"]
    assert data["integrity"]["method"] == "record" and data["integrity"]["modified"] == []
    assert data["integrity"]["checked"] >= 3 and data["integrity"]["missing"] == []
    cited = [data["eagle"]["draft"]] + data["grouped_foreach_copy"]["definitions"] + data["cuda_graph_runners"]
    for fact in cited:
        with open(os.path.join(site, fact["file"]), encoding="utf-8") as handle:
            line = handle.read().splitlines()[fact["line"] - 1]
        assert line.strip().startswith(fact.get("snippet", line.strip())[:40])


def test_a_modified_byte_and_a_missing_file_show_in_integrity(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(require("0.4.10"), site)
    target = site / EAGLE_DRAFT
    data = bytearray(target.read_bytes())
    data[-2] = ord("#") if data[-2] != ord("#") else ord(" ")
    target.write_bytes(bytes(data))
    (site / "sglang/api.py").unlink()
    cited = _facts("0.4.10", str(site))
    assert cited["integrity"]["modified"] == [EAGLE_DRAFT] and cited["integrity"]["scope"] == "cited"
    everything = sglang_source.collect(ProbeContext(options={"sglang_source": {
        "site_packages": str(site), "verify_all": True}}))
    assert everything["integrity"]["modified"] == [EAGLE_DRAFT]
    assert everything["integrity"]["missing"] == ["sglang/api.py"]
    assert everything["integrity"]["checked"] > 400


def test_wheel_cache_unpacks_once_and_redoes_an_interrupted_unpack(tmp_path, monkeypatch):
    from tests import sglang_wheels
    wheel = sglang_wheels.wheel_path("0.4.10") if require("0.4.10") else None
    monkeypatch.setenv("GPUDIAG_WHEEL_CACHE", str(tmp_path))
    shutil.copy2(wheel, tmp_path / wheel.name)
    site = sglang_wheels.site_packages_for("0.4.10")
    assert site == tmp_path / "unpacked" / "sglang-0.4.10"
    assert (site / "sglang" / "version.py").is_file() and (site / sglang_wheels.STAMP).is_file()
    marker = site / "sglang" / "marker"
    marker.write_text("kept")
    assert sglang_wheels.site_packages_for("0.4.10") == site and marker.is_file()  # reused, not redone
    (site / sglang_wheels.STAMP).unlink()  # as if the first unpack had been interrupted
    assert sglang_wheels.site_packages_for("0.4.10") == site and not marker.exists()
