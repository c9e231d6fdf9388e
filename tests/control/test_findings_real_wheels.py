"""The rules against source facts read from real sglang wheels (0.4.10, 0.5.11, 0.5.14, 0.5.23, unpacked from
PyPI, never imported), with hand-written live servers: guard order, flag names and EAGLE copies as released."""
import functools

from gpudiag.findings import dflash, graphs_off, sglang
from gpudiag.findings.facts import host_facts
from gpudiag.models import HostResult, ProbeResult
from probes.sglang_facts import locate
from probes.sglang_source import facts_from_location
from tests.sglang_wheels import require

H100 = {"gpus": {"source": "nvidia-smi", "devices": [
    {"index": i, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "memory_used_mib": 79000}
    for i in range(2)]}}


@functools.lru_cache(maxsize=None)
def _facts(version, site):
    return facts_from_location(locate.find_package([site]))


def host(version, **args):
    facts = _facts(version, str(require(version)))
    probes = {"sglang_source": facts, "env": H100,
              "deployment": {"servers": [{"pid": 7, "cmdline": ["python", "-m", "sglang.launch_server"],
                                          "args": args}]}}
    return HostResult(name=f"v{version}", status="ok",
                      probes={k: ProbeResult(status="ok", data=v) for k, v in probes.items()})


def test_0_5_23_dflash_with_dp_attention_names_the_dp_guard_not_the_later_memory_guard():
    h = host("0.5.23", speculative_algorithm="DFLASH", enable_dp_attention=True, mem_fraction_static=0.999)
    [finding] = dflash.dflash_draft_graph_disabled([h])
    [evidence] = finding.evidence
    assert evidence.file == "sglang/srt/speculative/dflash_worker_v2.py" and "dp attention" in evidence.snippet


def test_0_5_23_dflash_without_decode_graphs_is_left_to_rule_5_in_the_releases_flag_names():
    h = host("0.5.23", speculative_algorithm="DFLASH", disable_decode_cuda_graph=True, enable_dp_attention=True)
    assert dflash.dflash_draft_graph_disabled([h]) == []
    [finding] = graphs_off.spec_without_graphs([h])
    assert "with --disable-decode-cuda-graph" in finding.evidence[0].text
    assert "--cuda-graph-max-bs-decode at that boundary" in finding.recommendation   # 0.5.23 has no --cuda-graph-max-bs
    assert "dflash_worker_v2.py" in finding.recommendation                         # the dp guard still holds
    assert host_facts(h).cuda_graphs == "off"


def test_0_5_14_memory_guard_cannot_be_told_from_a_running_server():
    [finding] = dflash.dflash_draft_graph_disabled([host("0.5.14", speculative_algorithm="DFLASH")])
    assert finding.severity == "info" and "Disable DFLASH draft cuda graph" in finding.recommendation


def test_0_5_11_advises_its_own_max_bs_flag():
    h = host("0.5.11", speculative_algorithm="EAGLE3", disable_cuda_graph=True, speculative_num_steps=3)
    [finding] = graphs_off.spec_without_graphs([h])
    assert "drop --disable-cuda-graph and set --cuda-graph-max-bs at that boundary" in finding.recommendation
    assert "(2 draft steps, the target's verify and the draft-extend)" in finding.recommendation


def test_0_4_10_nextn_pays_the_per_tensor_replay_and_the_count_is_what_0_5_14_groups():
    [finding] = sglang.eagle_per_tensor_copies([host("0.4.10", speculative_algorithm="NEXTN")])
    assert finding.severity == "warning"
    draft = finding.evidence[0].text
    batched = _facts("0.5.14", str(require("0.5.14")))["eagle"]["draft"]["grouped_fields"]
    assert "copies 6 small inputs" in draft
    # Every input 0.4.10 copies on its own that 0.5.14 groups is counted; 0.5.14 adds request-id fields.
    assert {"req_pool_indices", "seq_lens", "out_cache_loc", "positions", "topk_p", "topk_index"} <= set(batched)
    assert "copied on its own" not in " ".join(e.text for e in finding.evidence)
