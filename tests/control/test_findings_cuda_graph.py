"""CUDA-graph rules (4, 5, 6) on minimal hand-written results."""
from gpudiag.findings import cuda_graph
from gpudiag.models import HostResult, ProbeResult


def host(name="h1", **probes):
    return HostResult(name=name, status="ok", probes={k: ProbeResult(status="ok", data=v) for k, v in probes.items()})


def server(**args):
    return {"servers": [{"pid": 42, "cmdline": "python -m sglang.launch_server ...", "args": args}]}


GUARDS = {"dflash": {"present": True, "draft_graph_guards": [
    {"condition": "self.server_args.enable_dp_attention", "message": "Disable DFLASH draft cuda graph because dp",
     "file": "sglang/srt/speculative/dflash_worker.py", "line": 97, "snippet": "if self.server_args.enable_dp_attention:"},
    {"condition": "free_gpu_memory < 4 * 1024", "message": "Disable DFLASH draft cuda graph because low memory",
     "file": "sglang/srt/speculative/dflash_worker.py", "line": 104, "snippet": "if free_gpu_memory < 4 * 1024:"}]}}


def env(used_mib):
    return {"gpus": {"source": "nvidia-smi", "devices": [{"index": 0, "memory_total_mib": 81559,
                                                          "memory_used_mib": used_mib}]}}


def test_dp_attention_guard_holds_for_a_dflash_server_with_dp_attention():
    h = host(sglang_source=GUARDS, env=env(1000),
             deployment=server(speculative_algorithm="DFLASH", enable_dp_attention=True))
    [finding] = cuda_graph.dflash_draft_graph_disabled([h])
    [evidence] = finding.evidence
    assert evidence.line == 97 and "--enable-dp-attention" in evidence.text


def test_low_free_memory_guard_holds_only_under_its_threshold():
    low = host(sglang_source=GUARDS, env=env(79000), deployment=server(speculative_algorithm="DFLASH"))
    roomy = host(sglang_source=GUARDS, env=env(10000), deployment=server(speculative_algorithm="DFLASH"))
    [finding] = cuda_graph.dflash_draft_graph_disabled([low, roomy])
    assert finding.hosts == ("h1",)
    assert finding.evidence[0].line == 104 and "2559 MiB" in finding.evidence[0].text


def test_guards_are_silent_without_a_dflash_deployment():
    h = host(sglang_source=GUARDS, env=env(79000),
             deployment=server(speculative_algorithm="EAGLE3", enable_dp_attention=True))
    assert cuda_graph.dflash_draft_graph_disabled([h, host("h2", sglang_source=GUARDS)]) == []


def repro(*cells_):
    return {"mode": "sglang", "gpu": {"index": 0, "name": "NVIDIA H200", "compute_capability": "sm_90"},
            "cells": [dict(zip(("path", "batch_size", "draft_tokens", "status"), c)) for c in cells_],
            "boundary": {"text": "clean up to bs 16"}}


def test_spec_without_graphs_uses_the_repro_boundary_when_known():
    cells_ = repro(("eagle_draft", 1, 4, "ok"), ("eagle_draft", 16, 4, "ok"), ("eagle_draft", 32, 4, "capture_failed"),
                   ("eagle_draft", 64, 4, "ok"))
    h = host(deployment=server(speculative_algorithm="EAGLE", disable_cuda_graph=True, speculative_num_steps=3),
             cuda_graph=cells_)
    [finding] = cuda_graph.spec_without_graphs([h])
    assert "--cuda-graph-max-bs 16" in finding.recommendation   # below the first failure, not the clean 64
    assert "4 forward passes" in finding.recommendation
    assert finding.evidence[0].kind == "flag"


def test_spec_without_graphs_without_repro_points_at_repro_and_graphs_on_is_silent():
    off = host(deployment=server(speculative_algorithm="DFLASH", disable_cuda_graph="true"))
    on = host("h2", deployment=server(speculative_algorithm="DFLASH", disable_cuda_graph=False))
    plain = host("h3", deployment=server(speculative_algorithm=None, disable_cuda_graph=True))
    [finding] = cuda_graph.spec_without_graphs([off, on, plain])
    assert finding.hosts == ("h1",) and "gpudiag repro" in finding.recommendation


def test_repro_failures_group_by_signature_with_gpu_and_boundary():
    data = repro(("eagle_draft", 1, 4, "ok"), ("eagle_draft", 64, 4, "capture_failed"),
                 ("eagle_draft_extend", 64, 4, "mismatch"))
    data["cells"][1]["signature"] = {"name": "eagle-capture-oom", "meaning": "capture runs out of memory",
                                     "recommendation": "Lower --cuda-graph-max-bs.", "reference": "sglang #3395"}
    findings = cuda_graph.repro_failures([host(cuda_graph=data)])
    by_status = {f.title.split()[1]: f for f in findings}
    assert set(by_status) == {"capture_failed", "mismatch"}
    oom = by_status["capture_failed"]
    assert oom.severity == "error" and oom.recommendation == "Lower --cuda-graph-max-bs."
    assert "sm_90" in oom.evidence[0].text and oom.evidence[0].table[1][:4] == ("eagle_draft", "64", "4", "capture_failed")
    assert any("sglang #3395" in e.text for e in oom.evidence)
    assert any("clean up to bs 16" in e.text for e in oom.evidence)
    assert by_status["mismatch"].severity == "critical"      # wrong answers without a crash


def test_all_ok_or_skipped_repro_is_silent():
    assert cuda_graph.repro_failures([host(cuda_graph=repro(("eagle_draft", 1, 4, "ok"),
                                                            ("eagle_draft", 8, 4, "skipped")))]) == []


def test_repro_failure_says_whether_the_live_server_runs_inside_the_failing_range():
    data = repro(("eagle_draft", 16, 4, "ok"), ("eagle_draft", 64, 16, "capture_failed"))
    inside = host(cuda_graph=data, deployment=server(speculative_algorithm="EAGLE3", cuda_graph_max_bs=64,
                                                     speculative_num_draft_tokens=16))
    outside = host("h2", cuda_graph=data, deployment=server(speculative_algorithm="EAGLE3", cuda_graph_max_bs=64,
                                                            speculative_num_draft_tokens=4))
    [a], [b] = cuda_graph.repro_failures([inside]), cuda_graph.repro_failures([outside])
    assert "inside the failing range" in a.evidence[-1].text and a.evidence[-1].kind == "flag"
    assert "outside the failing range" in b.evidence[-1].text


def test_real_dflash_guard_shapes_from_sglang_0_5_23():
    guards = {"dflash": {"present": True, "draft_graph_guards": [
        {"condition": "self._target_tp_rank == 0", "conditions": ["target_dp_enabled and capture_decode_cuda_graph",
                                                                   "self._target_tp_rank == 0"],
         "message": "Disable DFLASH draft cuda graph because dp attention is enabled (draft runs eager).",
         "file": "sglang/srt/speculative/dflash_worker_v2.py", "line": 724, "snippet": "\"Disable DFLASH ...\""},
        {"condition": "available_mem < 1.0", "conditions": ["is_cuda() and capture_decode_cuda_graph",
                                                            "available_mem < 1.0"],
         "message": "Disable DFLASH draft cuda graph because only %.2f GB GPU memory is available after target "
                    "backend initialization.", "file": "sglang/srt/speculative/dflash_worker_v2.py", "line": 737},
        {"condition": "capture_decode_cuda_graph and current_platform.is_out_of_tree() and "
                      "(not current_platform.capabilities.graph_capture)",
         "message": "Disable DFLASH draft cuda graph because %s does not support device graph capture.",
         "file": "sglang/srt/speculative/dflash_worker_v2.py", "line": 714}]}}
    cuda_env = dict(env(81000), torch={"available": True, "version": "2.9.1", "cuda": "12.9"})
    h = host(sglang_source=guards, env=cuda_env,
             deployment=server(speculative_algorithm="DFLASH", enable_dp_attention=True))
    [finding] = cuda_graph.dflash_draft_graph_disabled([h])
    assert [e.line for e in finding.evidence] == [724, 737]    # dp attention; 559 MiB free < 1 GB; platform is CUDA
    assert "--enable-dp-attention" in finding.recommendation and "--mem-fraction-static" in finding.recommendation


def test_signature_severity_raises_a_failure_and_log_classification_becomes_findings():
    data = repro(("eagle_draft", 8, 4, "replay_failed"))
    data["cells"][0]["signature"] = {"name": "nccl-hang", "severity": "critical", "recommendation": "r"}
    [finding] = cuda_graph.repro_failures([host(cuda_graph=data)])
    assert finding.severity == "critical"
    extra = {"repro": {"problem": "cuda-graph-crash", "log": "/var/log/sglang.log", "outcome": "failures",
                       "matches": [{"name": "dflash_prefill_capture_assert", "severity": "error",
                                    "meaning": "capture_end assert", "recommendation": "Disable prefill graphs.",
                                    "reference": "sglang #35437",
                                    "lines": [{"line": 120, "text": "INTERNAL ASSERT FAILED num_active_captures_ > 0"}]}]}}
    [logged] = cuda_graph.classified_log(extra)
    assert (logged.id, logged.severity, logged.recommendation) == ("cuda_graph.log_signature", "error",
                                                                    "Disable prefill graphs.")
    assert logged.evidence[0].file == "/var/log/sglang.log" and logged.evidence[0].line == 120
    assert cuda_graph.classified_log({}) == []
