"""sglang source rules (2, 10) on minimal hand-written results."""
from gpudiag.findings import sglang
from gpudiag.models import HostResult, ProbeResult


def host(name="h1", **probes):
    return HostResult(name=name, status="ok", probes={k: ProbeResult(status="ok", data=v) for k, v in probes.items()})


def eagle(batched=False, version="0.5.12"):
    line = {"file": "sglang/srt/speculative/eagle_draft_cuda_graph_runner.py", "line": 281,
            "snippet": "self.seq_lens[:raw_bs].copy_(forward_batch.seq_lens)"}
    return {"version": version, "eagle": {"draft": {"class": "EAGLEDraftCudaGraphRunner", "replay_method": "replay",
                                                    "batched": batched, "per_tensor_copies": 7,
                                                    "per_tensor_fields": ["seq_lens"], "evidence": [line]}}}


def serving(algorithm):
    return {"servers": [{"pid": 1, "args": {"speculative_algorithm": algorithm}}]}


def test_unmeasured_per_tensor_replay_cites_upstream_saving_and_first_batched_release():
    [finding] = sglang.eagle_per_tensor_copies([host(sglang_source=eagle(), deployment=serving("EAGLE3"))])
    assert finding.severity == "warning"          # a server pays it now
    assert "48 µs" in finding.recommendation and "#28465" in finding.recommendation
    assert "0.5.12 to 0.5.14" in finding.recommendation
    assert finding.evidence[0].file.endswith("eagle_draft_cuda_graph_runner.py") and finding.evidence[0].line == 281


def test_measured_saving_replaces_the_upstream_figure():
    bench = {"method": "CUDA events", "gpus": [{"index": 0, "workloads": [
        {"name": "draft_bs32", "path": "eagle_draft", "best": "grouped_foreach", "saving_vs_installed_us": 21.5,
         "strategies": {"installed": {"median_us": 30.0}, "grouped_foreach": {"median_us": 8.5}}}]}]}
    [finding] = sglang.eagle_per_tensor_copies([host(sglang_source=eagle(), copy_bench=bench)])
    assert "21.5 µs" in finding.recommendation and "48 µs" not in finding.recommendation
    assert finding.severity == "info"             # no EAGLE server on the host
    assert "h1/probes/copy_bench" in finding.sources


def test_a_release_that_should_batch_points_at_local_changes_not_an_upgrade():
    [finding] = sglang.eagle_per_tensor_copies([host(sglang_source=eagle(version="0.5.15"))])
    assert "Upgrade" not in finding.recommendation and "local modifications" in finding.recommendation


def test_batched_replay_or_no_source_data_is_silent():
    assert sglang.eagle_per_tensor_copies([host(sglang_source=eagle(batched=True)), host("h2")]) == []


def test_files_differing_from_record_are_named():
    integrity = {"method": "record", "checked": 10, "modified": ["sglang/b.py", "sglang/a.py"], "missing": ["sglang/c.py"]}
    [finding] = sglang.local_modifications([host(sglang_source={"version": "0.5.13", "integrity": integrity})])
    assert finding.evidence[0].table[1:] == (("sglang/a.py", "modified"), ("sglang/b.py", "modified"),
                                             ("sglang/c.py", "missing"))
    assert "sglang==0.5.13" in finding.recommendation


def test_dirty_editable_checkout_is_named_and_a_clean_one_is_silent():
    dirty = {"method": "editable", "editable": {"path": "/src/sglang", "commit": "abc123", "dirty": ["python/x.py"]}}
    clean = {"method": "editable", "editable": {"path": "/src/sglang", "commit": "abc123", "dirty": False}}
    [finding] = sglang.local_modifications([host(sglang_source={"integrity": dirty}),
                                            host("h2", sglang_source={"integrity": clean})])
    assert finding.hosts == ("h1",) and "/src/sglang" in finding.evidence[0].text
    assert "python/x.py" in finding.evidence[0].text


def eagle_0_4_10():
    """sglang 0.4.10's draft replay as the probe reads it: eight copy_() calls in a row."""
    fields = ["req_pool_indices", "seq_lens", "out_cache_loc", "positions", "topk_p", "topk_index", "hidden_states",
              "seq_lens_cpu"]
    file = "sglang/srt/speculative/eagle_draft_cuda_graph_runner.py"
    return {"version": "0.4.10", "eagle": {"draft": {
        "class": "EAGLEDraftCudaGraphRunner", "replay_method": "replay", "batched": False, "per_tensor_copies": 8,
        "per_tensor_fields": fields, "hidden_states_separate": False, "file": file, "replay_line": 293,
        "evidence": [{"file": file, "line": 293, "role": "replay_method", "snippet": "def replay(self, forward_batch):"},
                     {"file": file, "line": 325, "role": "hidden_states_copy",
                      "snippet": "self.hidden_states[:raw_bs].copy_(forward_batch.spec_info.hidden_states)"}]}}}


def test_nextn_and_standalone_servers_pay_the_eagle_replay_cost():
    for algorithm in ("NEXTN", "STANDALONE", "eagle3"):
        [finding] = sglang.eagle_per_tensor_copies([host(sglang_source=eagle(), deployment=serving(algorithm))])
        assert finding.severity == "warning", algorithm
    [idle] = sglang.eagle_per_tensor_copies([host(sglang_source=eagle(), deployment=serving("DFLASH"))])
    assert idle.severity == "info"


def test_per_tensor_count_is_what_a_batched_release_groups():
    [finding] = sglang.eagle_per_tensor_copies([host(sglang_source=eagle_0_4_10())])
    summary, hidden = finding.evidence[0].text, finding.evidence[1].text
    assert "copies 6 small inputs" in summary and "8 inputs" not in summary
    assert "req_pool_indices, seq_lens, out_cache_loc, positions, topk_p, topk_index" in summary
    assert "also copied on their own in both: hidden_states, seq_lens_cpu" in summary
    assert "copied on its own" not in hidden and "like every input here" in hidden
    assert finding.evidence[1].line == 325
