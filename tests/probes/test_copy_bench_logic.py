"""copy_bench's pure parts: workload field sets, what the installed release does, the crossover, savings,
outliers, timing statistics, the idle verdict on recorded nvidia-smi output, and option validation."""
import os

import pytest

from gpudiag.probe_data import probe_problem
from probes import gpu_layer, replay_fields
from probes.copybench import analysis, options, workloads
from probes.hostinfo import nvidia_smi
from probes.child import parse_frame
from probes.copybench.child import MARK
from probes.copybench.timing import iterations_for, summarize

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "nvidia-smi")

# What sglang_source reports for a release that batches the generic runner and the draft-extend replay
# (call sites with their field lists) while the draft replay still copies tensor by tensor.
NEW_RELEASE = {
    "found": True, "reason": None, "interpreter": {"path": "/usr/bin/python3", "why": "default"}, "version": "0.5.14",
    "grouped_foreach_copy": {
        "definitions": [{"module": "sglang.srt.model_executor.runner", "file": "a.py", "line": 1},
                        {"module": "sglang.srt.model_executor.input_buffers", "file": "b.py", "line": 2}],
        "call_sites": [
            {"qualname": "DecodeInputBuffers.populate_from_forward_batch", "file": "b.py", "line": 40,
             "snippet": "_grouped_foreach_copy_(dsts, srcs)",
             "fields": ["input_ids", "req_pool_indices", "seq_lens", "out_cache_loc", "positions",
                        "mamba_track_mask"],
             "resolves_to": {"module": "sglang.srt.model_executor.input_buffers", "file": "b.py", "line": 2}},
            {"qualname": "EAGLEDraftExtendCudaGraphRunner.execute", "file": "c.py", "line": 9,
             "fields": ["input_ids", "seq_lens", "out_cache_loc", "positions", "req_pool_indices"],
             "resolves_to": "sglang.srt.model_executor.runner._grouped_foreach_copy_"}],
        "has_foreach_copy_flag": []},
    "eagle": {
        "draft": {"batched": False, "per_tensor_fields": ["seq_lens", "topk_p", "hidden_states", "seq_lens_cpu"],
                  "file": "d.py", "line": 5},
        "draft_extend": {"batched": True, "grouped_fields": ["input_ids", "seq_lens", "out_cache_loc",
                                                             "positions", "req_pool_indices"],
                         "per_tensor_fields": ["hidden_states", "seq_lens_cpu"], "hidden_states_separate": True,
                         "grouped_resolves_to": [{"module": "sglang.srt.model_executor.runner"}],
                         "evidence": [{"file": "c.py", "line": 9, "snippet": "_grouped_foreach_copy_(...)"}]}},
}
OLD_RELEASE = {"found": True, "reason": None, "interpreter": {"path": "/usr/bin/python3", "why": "default"},
               "version": "0.5.9", "grouped_foreach_copy": {"definitions": [], "call_sites": [],
                                                            "has_foreach_copy_flag": []},
               "eagle": {"draft": {"batched": False, "per_tensor_fields": ["seq_lens"]},
                         "draft_extend": {"batched": False, "per_tensor_fields": ["seq_lens"]}}}


def test_the_hand_written_release_facts_have_the_probe_declared_shape():
    for facts in (NEW_RELEASE, OLD_RELEASE):
        assert probe_problem("sglang_source", {"status": "ok", "data": facts}) is None


def shape_of(specs, name):
    return [s for s in specs if s["name"] == name][0]


def test_eagle_draft_fields_follow_batch_topk_steps_and_hidden():
    specs = workloads.field_specs("eagle_draft", 8, 4096, topk=4, steps=3, draft_tokens=8)
    assert [s["name"] for s in specs] == ["seq_lens", "out_cache_loc", "positions", "topk_p", "topk_index",
                                          "req_pool_indices", "hidden_states"]
    assert shape_of(specs, "out_cache_loc")["shape"] == [8 * 4 * 3]
    assert shape_of(specs, "topk_p") == {"name": "topk_p", "dtype": "float32", "src_dtype": "float32",
                                         "shape": [8, 4], "numel": 32, "bytes": 128, "own_copy": False,
                                         "assumed": False}
    assert [s["name"] for s in specs if s["own_copy"]] == ["hidden_states"]
    old = workloads.field_specs("eagle_draft", 8, 4096, topk=4, steps=3, draft_tokens=8, release="0.5.11")
    assert [s["name"] for s in old] == ["seq_lens", "out_cache_loc", "positions", "topk_p", "topk_index",
                                        "hidden_states", "req_pool_indices"]
    hidden = shape_of(specs, "hidden_states")
    assert hidden["dtype"] == "bfloat16" and hidden["shape"] == [8, 4096] and hidden["bytes"] == 8 * 4096 * 2


@pytest.mark.parametrize("path", workloads.PATHS)
def test_seq_lens_is_cast_from_int64_up_to_0_5_11_and_copied_as_is_from_0_5_14(path):
    def seq_lens(release):
        spec = shape_of(workloads.field_specs(path, 2, 64, 2, 2, 4, release=release), "seq_lens")
        return spec["dtype"], spec["src_dtype"], spec["bytes"]
    assert seq_lens("0.5.11") == seq_lens("0.4.10.post1") == ("int32", "int64", 8)
    assert seq_lens("0.5.14") == seq_lens("0.5.23") == seq_lens(None) == ("int64", "int64", 16)
    assert replay_fields.release_tuple("0.5.11rc1") == (0, 5, 11) and replay_fields.release_tuple("dev") is None


def test_draft_extend_and_dflash_use_one_row_per_draft_token():
    extend = workloads.field_specs("eagle_draft_extend", 4, 7168, topk=1, steps=3, draft_tokens=16)
    assert shape_of(extend, "hidden_states")["shape"] == [64, 7168]
    assert shape_of(extend, "seq_lens")["dtype"] == "int64"
    verify = workloads.field_specs("dflash_verify", 4, 7168, topk=1, steps=3, draft_tokens=16)
    assert "hidden_states" not in [s["name"] for s in verify]
    assert shape_of(verify, "positions")["shape"] == [64]
    assert workloads.workload_grid(["dflash_verify", "eagle_draft"], [1, 8], [4096, 7168]) == [
        ("dflash_verify", 1, None), ("dflash_verify", 8, None), ("eagle_draft", 1, 4096),
        ("eagle_draft", 1, 7168), ("eagle_draft", 8, 4096), ("eagle_draft", 8, 7168)]


def test_release_field_names_replace_the_defaults_and_unknown_ones_are_assumed():
    names = workloads.fields_from_source({"sglang_source": NEW_RELEASE})
    assert names["eagle_draft"] == ["seq_lens", "topk_p", "hidden_states"]        # seq_lens_cpu is host-side
    assert names["eagle_draft_extend"][-1] == "hidden_states"
    assert names["dflash_verify"][-1] == "mamba_track_mask"
    specs = workloads.field_specs("eagle_draft", 2, 64, 2, 2, 4, names=["seq_lens", "brand_new_buffer"])
    assert [s["name"] for s in specs] == ["seq_lens", "brand_new_buffer", "hidden_states"]
    assert shape_of(specs, "brand_new_buffer")["assumed"] is True
    assert shape_of(specs, "seq_lens")["assumed"] is False
    assert workloads.field_name("buffers.seq_lens[:raw_bs]") == "seq_lens"


def test_installed_behaviour_per_path_from_the_release_facts():
    new = workloads.installed_behaviour({"sglang_source": NEW_RELEASE})
    assert new["eagle_draft"]["kind"] == "per_tensor"
    assert new["eagle_draft_extend"]["kind"] == "grouped"
    assert new["eagle_draft_extend"]["hidden_states_separate"] is True
    assert new["eagle_draft_extend"]["module"] == "sglang.srt.model_executor.runner"
    assert new["dflash_verify"] == {"kind": "grouped", "hidden_states_separate": True,
                                    "module": "sglang.srt.model_executor.input_buffers",
                                    "evidence": {"file": "b.py", "line": 40,
                                                 "snippet": "_grouped_foreach_copy_(dsts, srcs)"}}
    old = workloads.installed_behaviour({"sglang_source": OLD_RELEASE})
    assert {v["kind"] for v in old.values()} == {"per_tensor"}
    assert {v["kind"] for v in workloads.installed_behaviour({}).values()} == {"unknown"}
    assert workloads.installed_definitions({"sglang_source": NEW_RELEASE}) == [
        "sglang.srt.model_executor.runner", "sglang.srt.model_executor.input_buffers"]


def test_sweep_sizes_stop_at_the_memory_cap():
    assert workloads.sweep_sizes(1024, 1 << 28, 4, cap_bytes=1 << 20) == [1024, 4096, 16384, 65536, 262144]


def row(size, copy_us, foreach_us):
    return {"bytes": size, "copy_us": copy_us, "foreach_us": foreach_us}


def test_crossover_is_where_copy_wins_from_then_on():
    sweep = [row(1024, 3.0, 2.0), row(4096, 2.0, 2.5), row(16384, 3.0, 2.9), row(65536, 4.0, 6.0),
             row(262144, 9.0, 20.0)]
    assert analysis.crossover_bytes(sweep) == 65536           # the early win at 4 KiB does not hold
    assert analysis.crossover_bytes([row(1024, 3.0, 2.0), row(4096, 5.0, 4.0)]) is None
    assert analysis.recommended_split(None)[0] is None
    assert analysis.recommended_split(65536, override=1 << 20) == (1 << 20, "set by the copy_bench.split_bytes option")


def spread_row(size, copy, foreach):
    """A sweep row from (p10, median, p90) of each kernel."""
    def timing(p10, median, p90):
        return {"status": "ok", "p10_us": p10, "median_us": median, "p90_us": p90}
    return dict(row(size, copy[1], foreach[1]), copy=timing(*copy), foreach=timing(*foreach))


def test_crossover_needs_copy_clearly_faster_than_the_noise():
    noisy = [spread_row(1024, (2.0, 3.0, 4.0), (1.5, 2.0, 2.5)),
             spread_row(4096, (2.0, 2.4, 5.0), (2.2, 2.6, 3.0)),      # median faster, spreads overlap
             spread_row(16384, (2.5, 2.8, 3.0), (6.0, 7.0, 8.0))]     # clearly faster
    assert analysis.crossover_bytes(noisy) == 16384
    assert analysis.crossover_bytes(noisy[:2]) is None
    split, why = analysis.recommended_split(16384, cuda=False)
    assert split is None and "no copy engine" in why
    assert analysis.recommended_split(16384, override=4096, cuda=False)[0] == 4096


def timed(median):
    return {"status": "ok", "median_us": median}


def test_speedups_best_and_saving_against_what_the_release_does():
    results = {"loop": timed(40.0), "grouped_foreach": timed(16.0), "grouped_foreach_dma_split": timed(10.0),
               "packed": {"status": "wrong", "reason": "field x differs"}, "installed": timed(20.0)}
    analysis.add_speedups(results)
    assert results["grouped_foreach_dma_split"]["speedup_vs_loop"] == 4.0
    assert "speedup_vs_loop" not in results["packed"]
    assert analysis.best_strategy(results) == "grouped_foreach_dma_split"
    saving, baseline = analysis.saving_vs_installed(results, {"kind": "per_tensor"})
    assert saving == 30.0 and baseline["strategy"] == "loop"
    saving, baseline = analysis.saving_vs_installed(results, {"kind": "grouped", "hidden_states_separate": True})
    assert saving == 10.0 and baseline["strategy"] == "installed" and baseline["exact"] is True
    assert analysis.saving_vs_installed(results, {"kind": "unknown"})[0] is None


def gpu(index, copy_us, loop_us, noisy_loop=False, others=1.0):
    loop = dict(timed(loop_us), noisy=noisy_loop)
    return {"index": index, "status": "ok", "sweep": [row(1 << 20, copy_us, 9.0 * others)],
            "workloads": [{"name": "w", "strategies": {"loop": loop, "grouped_foreach": timed(5.0 * others)}}]}


def test_outliers_decide_on_the_median_ratio_of_steady_figures_with_three_gpus():
    gpus = [gpu(0, 10.0, 40.0), gpu(1, 10.5, 41.0), gpu(2, 14.0, 40.5), gpu(3, 9.8, 39.0),
            gpu(4, 13.0, 52.0, others=1.3), gpu(5, 10.0, 90.0, noisy_loop=True), {"index": 6, "status": "skipped"}]
    found = analysis.find_outliers(gpus)
    # GPU 2: one of three figures 40% off, the median ratio is not; GPU 5: its only odd figure is noisy.
    assert [f["index"] for f in found] == [4]
    assert found[0]["median_ratio"] == pytest.approx(1.3, abs=0.01) and found[0]["metrics_compared"] == 4
    assert found[0]["ratio"] == 1.3 and found[0]["metric"] in ("sweep_copy_us@1048576", "w/grouped_foreach")
    assert analysis.find_outliers([gpu(0, 10.0, 40.0), gpu(1, 20.0, 80.0)]) == []   # two GPUs: no odd one


def test_summarize_gives_median_spread_and_flags_noise():
    steady = summarize([10.0] * 9 + [10.2], "cuda_events", 50)
    assert steady["median_us"] == 10.0 and steady["samples"] == 10 and steady["noisy"] is False
    noisy = summarize([10, 12, 9, 15, 10, 11, 30, 10, 9, 10], "perf_counter", 5)
    assert noisy["noisy"] is True and noisy["p90_us"] > noisy["median_us"] > noisy["p10_us"]
    assert iterations_for(2.0, 500.0, 200) == 200 and iterations_for(1000.0, 500.0, 200) == 1


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as fh:
        return fh.read()


def test_gpu_policy_refuses_a_gpu_serving_sglang_and_accepts_an_idle_one():
    busy = nvidia_smi.parse_query_gpu(fixture("h200x8-query-gpu-idle-fields.csv"),
                                      nvidia_smi.LEGACY_QUERY_GPU_FIELDS)
    apps = nvidia_smi.parse_compute_apps(fixture("h200x8-compute-apps.csv"))
    for device in busy:
        device["processes"] = [a for a in apps if a["gpu_uuid"] == device["uuid"]]
    table = gpu_layer.verdicts(busy, [], False, 1024)
    verdict = gpu_layer.verdict_for(table, "6513270e-269e-4d37-b2a7-4de452e6b438")
    assert verdict["use"] is False and verdict["kind"] == "busy"
    assert "sglang::scheduler_TP0 (pid 48211)" in verdict["reason"]
    free = nvidia_smi.parse_query_gpu(fixture("b300x8-query-gpu-idle-fields.csv"), nvidia_smi.LEGACY_QUERY_GPU_FIELDS)
    for device in free:
        device["processes"] = []
    table = gpu_layer.verdicts(free, [], False, 1024)
    verdict = gpu_layer.verdict_for(table, "GPU-907a70c3-1012-4037-b64c-e4228c38fb29")
    assert verdict["use"] is True and verdict["kind"] == "idle"


def test_options_validate_with_one_line_errors_and_take_server_flags():
    results = {"deployment": {"servers": [{"args": {"speculative_eagle_topk": 8, "speculative_num_steps": 5}}]}}
    settings, sources = options.resolve({"batch_sizes": "1,4", "steps": 2}, "cpu", results)
    assert settings["batch_sizes"] == [1, 4] and settings["topk"] == 8 and settings["steps"] == 2
    assert sources == {"topk": "server", "steps": "option", "batch_sizes": "option"}
    assert options.resolve({}, "cuda")[0]["hidden_sizes"] == [4096, 7168]
    with pytest.raises(options.OptionError, match="unknown option batch_size "):
        options.resolve({"batch_size": 4}, "cpu")
    with pytest.raises(options.OptionError, match="copy_bench.paths: unknown medusa"):
        options.resolve({"paths": ["medusa"]}, "cpu")
    with pytest.raises(options.OptionError, match="copy_bench.samples: expected an integer"):
        options.resolve({"samples": "many"}, "cpu")


def test_the_live_servers_batch_size_is_measured_and_measured_first():
    results = {"deployment": {"servers": [{"args": {"cuda_graph_max_bs": 48}}]}}
    settings, sources = options.resolve({}, "cuda", results)
    assert settings["live_batch_size"] == 48 and settings["batch_sizes"] == [1, 8, 32, 48, 128]
    assert sources == {"live_batch_size": "server", "batch_sizes": "server"}
    given, _ = options.resolve({"batch_sizes": "1,8"}, "cuda", results)   # an explicit list is kept as given
    assert given["batch_sizes"] == [1, 8] and given["live_batch_size"] == 48
    listed = {"deployment": {"servers": [{"args": {"cuda_graph_bs": [1, 2, 4, 16]}}]}}
    assert options.resolve({}, "cuda", listed)[0]["live_batch_size"] == 16
    grid = workloads.workload_grid(["eagle_draft", "dflash_verify"], settings["batch_sizes"], [4096, 7168])
    assert workloads.priority_cells(grid, 48) == [("eagle_draft", 48, 7168), ("dflash_verify", 48, None)]
    assert workloads.priority_cells(grid, None) == [("eagle_draft", 128, 7168), ("dflash_verify", 128, None)]


def test_child_lines_are_read_from_noisy_output():
    out = "torch warning\n%s{\"index\": 0, \"status\": \"ok\"}\nnoise\n%s{broken\n" % (MARK, MARK)
    assert [r for r in (parse_frame(MARK, line) for line in out.splitlines()) if r is not None] == [{"index": 0, "status": "ok"}]


def test_the_gpu_query_reads_an_old_driver_that_rejects_compute_cap(tmp_path, monkeypatch):
    """Drivers before R510 refuse the compute_cap field: the one query asks again without it."""
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\ncase \"$*\" in\n"
                      "  *compute_cap*) echo 'Field \"compute_cap\" is not a valid field to query.'; exit 2 ;;\n"
                      "  *--query-gpu=*) cat %s ;;\n  *--query-compute-apps=*) exit 0 ;;\n  *) exit 0 ;;\nesac\n"
                      % os.path.join(FIXTURES, "r470-query-gpu-legacy.csv"))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % tmp_path)
    devices, error = gpu_layer.query(5.0)
    assert error is None and devices[0]["name"] == "Tesla V100-SXM2-32GB" and devices[0]["processes"] == []
