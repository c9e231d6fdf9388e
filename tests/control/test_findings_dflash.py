"""Rule 4 (DFlash draft-graph guards) on the guard shapes sglang 0.5.14 and 0.5.23 really have."""
from gpudiag.findings import dflash
from gpudiag.models import HostResult, ProbeResult

WORKER = "sglang/srt/speculative/dflash_worker_v2.py"
# As the sglang_source probe reads sglang 0.5.23's DFlashWorkerV2.init_cuda_graphs (listed out of order on purpose).
GUARDS_0_5_23 = [
    {"condition": "available_mem < 1.0", "conditions": ["is_cuda() and capture_decode_cuda_graph", "available_mem < 1.0"],
     "message": "Disable DFLASH draft cuda graph because only %.2f GB GPU memory is available after target backend "
                "initialization.", "file": WORKER, "line": 737},
    {"condition": "self._target_tp_rank == 0", "conditions": ["target_dp_enabled and capture_decode_cuda_graph",
                                                               "self._target_tp_rank == 0"],
     "message": "Disable DFLASH draft cuda graph because dp attention is enabled (draft runs eager).",
     "file": WORKER, "line": 724},
    {"condition": "capture_decode_cuda_graph and current_platform.is_out_of_tree() and "
                  "(not current_platform.capabilities.graph_capture)",
     "conditions": ["capture_decode_cuda_graph and current_platform.is_out_of_tree() and "
                    "(not current_platform.capabilities.graph_capture)"],
     "message": "Disable DFLASH draft cuda graph because %s does not support device graph capture.",
     "file": WORKER, "line": 714}]


def host(args, guards=GUARDS_0_5_23, used_mib=79000, torch_cuda="12.9", visible=None, name="h1"):
    devices = [{"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771, "memory_used_mib": used_mib},
               {"index": 1, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "memory_used_mib": used_mib}]
    probes = {"sglang_source": {"dflash": {"present": True, "draft_graph_guards": guards}},
              "env": {"torch": {"available": True, "version": "2.9.1", "cuda": torch_cuda},
                      "gpus": {"source": "nvidia-smi", "devices": devices}},
              "deployment": {"servers": [{"pid": 42, "args": args, "cuda_visible_devices": visible}]}}
    return HostResult(name=name, status="ok", probes={k: ProbeResult(status="ok", data=v) for k, v in probes.items()})


def test_guards_run_in_source_order_and_stop_at_the_first_that_holds():
    # dp attention holds (line 724); the memory guard (737) would hold too but never runs.
    h = host({"speculative_algorithm": "DFLASH", "enable_dp_attention": True, "mem_fraction_static": 0.999})
    [finding] = dflash.dflash_draft_graph_disabled([h])
    assert [e.line for e in finding.evidence] == [724]
    assert finding.severity == "warning" and "without --enable-dp-attention" in finding.recommendation
    assert "first guard in source order" in finding.evidence[0].text


def test_attn_dp_size_is_dp_attention_too():
    [finding] = dflash.dflash_draft_graph_disabled([host({"speculative_algorithm": "DFLASH", "attn_dp_size": "8"})])
    assert finding.evidence[0].line == 724 and "--attn-dp-size 8" in finding.evidence[0].text


def test_silent_when_the_server_disabled_decode_graphs_itself():
    for off in ({"disable_cuda_graph": True}, {"disable_decode_cuda_graph": True},
                {"cuda_graph_backend_decode": "disabled"}, {"cuda_graph_config": '{"decode": {"backend": "disabled"}}'}):
        args = dict(speculative_algorithm="DFLASH", enable_dp_attention=True, **off)
        assert dflash.dflash_draft_graph_disabled([host(args)]) == [], off


def test_todays_free_memory_is_not_the_start_up_guard():
    # The running server holds most of its GPUs' memory now; that says nothing about start-up.
    [finding] = dflash.dflash_draft_graph_disabled([host({"speculative_algorithm": "DFLASH"}, used_mib=81000)])
    assert finding.severity == "info" and "may be" in finding.title
    assert "Disable DFLASH draft cuda graph" in finding.recommendation
    assert "free GPU memory now" not in finding.evidence[0].text


def test_memory_guard_estimated_from_mem_fraction_static_on_the_servers_own_gpus():
    args = {"speculative_algorithm": "DFLASH", "mem_fraction_static": 0.99}
    # GPU 1 (80 GB): 1% is 816 MiB < 1 GiB → holds. GPU 0 alone (141 GB): 1438 MiB → cannot tell.
    [holds] = dflash.dflash_draft_graph_disabled([host(args, visible="1")])
    assert holds.severity == "warning" and holds.evidence[0].line == 737
    assert "816 MiB" in holds.evidence[0].text and "--mem-fraction-static" in holds.recommendation
    [unknown] = dflash.dflash_draft_graph_disabled([host(args, visible="0")])
    assert unknown.severity == "info"


def test_out_of_tree_guard_is_about_platform_plugins_not_the_torch_build():
    guards = [g for g in GUARDS_0_5_23 if g["line"] == 714]
    h = host({"speculative_algorithm": "DFLASH"}, guards=guards, torch_cuda=None)
    assert dflash.dflash_draft_graph_disabled([h]) == []     # NVIDIA GPUs: sglang's own CUDA platform


def test_guards_are_silent_without_a_dflash_deployment():
    eagle = host({"speculative_algorithm": "EAGLE3", "enable_dp_attention": True})
    assert dflash.dflash_draft_graph_disabled([eagle]) == []
