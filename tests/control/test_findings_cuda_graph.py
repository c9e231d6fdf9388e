"""CUDA-graph rules (5, 6) on minimal hand-written results."""
from pathlib import Path

from gpudiag.findings import cuda_graph, graphs_off, server_logs
from gpudiag.models import HostResult, ProbeResult


def host(name="h1", **probes):
    return HostResult(name=name, status="ok", probes={k: ProbeResult(status="ok", data=v) for k, v in probes.items()})


def server(**args):
    return {"servers": [{"pid": 42, "cmdline": "python -m sglang.launch_server ...", "args": args}]}


def repro(*cells_):
    return {"mode": "sglang", "gpu": {"index": 0, "name": "NVIDIA H200", "compute_capability": "sm_90"},
            "cells": [dict(zip(("path", "batch_size", "draft_tokens", "status"), c)) for c in cells_],
            "boundary": {"text": "clean up to bs 16"}}


def test_spec_without_graphs_uses_the_repro_boundary_when_known():
    cells_ = repro(("eagle_draft", 1, 4, "ok"), ("eagle_draft", 16, 4, "ok"), ("eagle_draft", 32, 4, "capture_failed"),
                   ("eagle_draft", 64, 4, "ok"))
    h = host(deployment=server(speculative_algorithm="EAGLE", disable_cuda_graph=True, speculative_num_steps=3),
             cuda_graph=cells_)
    [finding] = graphs_off.spec_without_graphs([h])
    assert "--cuda-graph-max-bs 16" in finding.recommendation   # below the first failure, not the clean 64
    assert "drop --disable-cuda-graph" in finding.recommendation
    assert "4 forward passes" in finding.recommendation
    assert finding.evidence[0].kind == "flag"


def test_spec_without_graphs_without_repro_points_at_repro_and_graphs_on_is_silent():
    off = host(deployment=server(speculative_algorithm="DFLASH", disable_cuda_graph="true"))
    on = host("h2", deployment=server(speculative_algorithm="DFLASH", disable_cuda_graph=False))
    plain = host("h3", deployment=server(speculative_algorithm=None, disable_cuda_graph=True))
    [finding] = graphs_off.spec_without_graphs([off, on, plain])
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
    # Advice comes from the measured cells (never the signature's generic text, which may contradict them).
    assert oom.severity == "error" and oom.recommendation.startswith(
        "Measured: eagle_draft fails from batch size 64 with 4 draft tokens. To stay clear: set "
        "--cuda-graph-max-bs 1 (the largest batch size that passed).")
    assert "(known report: sglang #3395)" in oom.recommendation
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


def test_signature_severity_raises_a_failure_and_log_classification_becomes_findings():
    data = repro(("eagle_draft", 8, 4, "replay_failed"))
    data["cells"][0]["signature"] = {"name": "nccl-hang", "severity": "critical", "recommendation": "r"}
    [finding] = cuda_graph.repro_failures([host(cuda_graph=data)])
    assert finding.severity == "critical"
    crash = {"line": 120, "family": "capture_failure", "detail": "capture", "when": "during start-up",
             "summary": "capture_end_no_active_capture at line 120: RuntimeError: num_active_captures_ > 0",
             "quoted": [{"line": 120, "text": "RuntimeError: num_active_captures_ > 0 INTERNAL ASSERT FAILED"}],
             "last_frames": [], "signature": {"name": "capture_end_no_active_capture", "severity": "error",
                                              "meaning": "capture_end assert.", "reference": "sglang #35437",
                                              "recommendation": "Disable prefill graphs."}}
    extra = {"log": {"source": "/var/log/sglang.log", "outcome": "known_signature", "crashes": [crash],
                     "advice_assumes": "sglang 0.5.14+", "release": {"basis": "dflash_worker_v2.py"}}}
    [logged] = server_logs.classified_log(extra)
    assert (logged.id, logged.severity) == ("cuda_graph.log_crash", "error")
    assert logged.recommendation == "capture_end assert. Disable prefill graphs. (sglang #35437)"
    assert logged.evidence[0].file == "/var/log/sglang.log" and logged.evidence[0].line == 120
    assert server_logs.classified_log({}) == []


def flags(*names, deprecated=()):
    return {"server_flags": [{"name": n, "deprecated": n in deprecated} for n in names]}


def test_spec_without_graphs_cites_the_switch_the_server_used_in_every_spelling():
    spellings = {"disable_decode_cuda_graph": (True, "--disable-decode-cuda-graph"),
                 "cuda_graph_backend_decode": ("disabled", "--cuda-graph-backend-decode disabled"),
                 "cuda_graph_config": ('{"decode": {"backend": "disabled"}}', "--cuda-graph-config")}
    for key, (value, cited) in spellings.items():
        h = host(deployment=server(speculative_algorithm="EAGLE3", **{key: value}))
        [finding] = graphs_off.spec_without_graphs([h])
        assert cited in finding.evidence[0].text and "--disable-cuda-graph" not in finding.evidence[0].text, key
    # The JSON config wins over the legacy switch: decode graphs are on.
    on = host(deployment=server(speculative_algorithm="EAGLE3", disable_cuda_graph=True,
                                cuda_graph_config='{"decode": {"backend": "full"}}'))
    assert graphs_off.spec_without_graphs([on]) == []


def test_spec_without_graphs_advises_flags_that_exist_in_the_hosts_release():
    cells_ = repro(("eagle_draft", 1, 4, "ok"), ("eagle_draft", 16, 4, "ok"), ("eagle_draft", 32, 4, "capture_failed"))
    release_0_5_23 = flags("--cuda-graph-max-bs-decode", "--disable-decode-cuda-graph", "--disable-cuda-graph",
                           deprecated=("--disable-cuda-graph",))
    h = host(deployment=server(speculative_algorithm="EAGLE", disable_decode_cuda_graph=True), cuda_graph=cells_,
             sglang_source=release_0_5_23)
    [finding] = graphs_off.spec_without_graphs([h])
    assert "drop --disable-decode-cuda-graph and set --cuda-graph-max-bs-decode 16" in finding.recommendation
    old = host(deployment=server(speculative_algorithm="EAGLE", disable_cuda_graph=True),
               sglang_source=flags("--cuda-graph-max-bs", "--disable-cuda-graph"))
    [finding] = graphs_off.spec_without_graphs([old])
    assert "drop --disable-cuda-graph and set --cuda-graph-max-bs at that boundary" in finding.recommendation


def test_spec_without_graphs_counts_draft_verify_and_draft_extend_passes():
    h = host(deployment=server(speculative_algorithm="NEXTN", disable_cuda_graph=True, speculative_num_steps=3))
    [finding] = graphs_off.spec_without_graphs([h])
    assert "4 forward passes of a decode step (2 draft steps, the target's verify and the draft-extend)" \
        in finding.recommendation
    one = host(deployment=server(speculative_algorithm="EAGLE", disable_cuda_graph=True, speculative_num_steps="1"))
    [finding] = graphs_off.spec_without_graphs([one])
    assert "2 forward passes of a decode step (the target's verify and the draft-extend)" in finding.recommendation


def test_spec_without_graphs_for_dflash_names_the_guard_that_would_still_hold():
    guards = {"dflash": {"draft_graph_guards": [
        {"conditions": ["target_dp_enabled and capture_decode_cuda_graph", "self._target_tp_rank == 0"],
         "message": "Disable DFLASH draft cuda graph because dp attention is enabled (draft runs eager).",
         "file": "sglang/srt/speculative/dflash_worker_v2.py", "line": 724}]}}
    h = host(deployment=server(speculative_algorithm="DFLASH", disable_cuda_graph=True, enable_dp_attention=True),
             sglang_source=guards)
    [finding] = graphs_off.spec_without_graphs([h])
    assert "dflash_worker_v2.py:724" in finding.recommendation and "data-parallel attention" in finding.recommendation


def test_live_server_range_reads_the_decode_max_bs_spellings():
    data = repro(("eagle_draft", 16, 4, "ok"), ("eagle_draft", 64, 4, "capture_failed"))
    h = host(cuda_graph=data, deployment=server(speculative_algorithm="STANDALONE", cuda_graph_max_bs_decode="64",
                                                speculative_num_draft_tokens="4"))
    [finding] = cuda_graph.repro_failures([h])
    assert "--cuda-graph-max-bs-decode 64" in finding.evidence[-1].text
    assert "inside the failing range" in finding.evidence[-1].text
    assert "The live server is inside that range: change it now." in finding.recommendation


def test_repro_failure_without_a_signature_advises_the_releases_max_bs_flag():
    data = repro(("eagle_draft", 1, 4, "ok"), ("eagle_draft", 64, 4, "replay_failed"))
    new = host(cuda_graph=data, sglang_source=flags("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs",
                                                    deprecated=("--cuda-graph-max-bs",)))
    [finding] = cuda_graph.repro_failures([new])
    assert "set --cuda-graph-max-bs-decode 1 " in finding.recommendation


def test_several_matched_log_lines_keep_their_own_numbers():
    from gpudiag.findings.server_logs import classified_log
    crash = {"line": 12, "family": "device_fault", "detail": "replay", "summary": "illegal_memory_access_replay",
             "quoted": [{"line": 12, "text": "CUDA error: an illegal memory access was encountered"},
                        {"line": 40, "text": "RuntimeError: CUDA error: an illegal memory access"}],
             "signature": {"name": "illegal_memory_access_replay", "severity": "critical"}}
    extra = {"log": {"source": "/var/log/sglang.log", "outcome": "known_signature", "crashes": [crash]}}
    (finding,) = classified_log(extra)
    assert finding.evidence[0].line == 12
    assert finding.evidence[0].snippet.splitlines() == [
        "12: CUDA error: an illegal memory access was encountered",
        "40: RuntimeError: CUDA error: an illegal memory access"]


def test_a_live_servers_logged_crash_is_an_error_unless_the_server_came_up_again_after_it():
    from probes.crashlog.classify import classify
    corpus = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"
    text = "\n".join(l for l in (corpus / "sglang_5285_capture_oom_deepep.log").read_text().splitlines()
                     if not l.startswith("#fixture "))
    ready = "[2026-01-01 00:00:00] The server is fired up and ready to roll!"
    for log_text, severity in ((text, "error"), (text + "\n" + ready, "warning")):
        block = dict(classify(log_text), source={"kind": "stdout", "where": "/proc/7/fd/1", "path": "/var/log/s.log"})
        h = host(deployment={"servers": [], "server_logs": {"7": block}})
        [finding] = server_logs.server_log_findings([h])
        assert finding.severity == severity and "oom_during_capture" in finding.title
        assert finding.hosts == (h.name,)
        assert "server pid 7 log (/proc/7/fd/1 → /var/log/s.log)" in finding.evidence[0].file
