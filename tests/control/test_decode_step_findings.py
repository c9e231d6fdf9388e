"""Q11-Q14 and the decode_step findings on host data built as the probes store it: a speculative server at
sglang's default running-request cap, a server whose config.json was not read, a GPU the datasheet table lacks,
and an H200 with NVLink whose copy_bench measured DRAM bandwidth."""
import json
from pathlib import Path

from gpudiag.findings import decode_step
from gpudiag.findings.answers_decode import q11_step_time, q12_bandwidth, q13_speculation_cost, q14_collectives
from gpudiag.models import HostResult, ProbeResult

SNAPSHOTS = Path(__file__).resolve().parents[1] / "fixtures" / "hf_cache" / "models--meta-llama--Llama-3.1-8B-Instruct"
CONFIG = json.loads(next((SNAPSHOTS / "snapshots").iterdir()).joinpath("config.json").read_text())


def _host(gpu="NVIDIA H200", summary="nvlink", args=None, buckets=None, record=True, sweep=None):
    args = dict({"model_path": "/m/llama", "tp_size": 2, "port": 30000}, **(args or {}))
    buckets = buckets or {"1": {"count": 9, "steady": 8, "median_gen_throughput": 160.0, "median_accept_len": 2.5},
                          "32-63": {"count": 9, "steady": 8, "median_gen_throughput": 2400.0,
                                    "median_accept_len": 2.2}}
    deployment = {
        "servers": [{"pid": 7, "python": "/usr/bin/python3", "cmdline": ["python3", "-m", "sglang.launch_server"],
                     "args": args, "cuda_visible_devices": None, "env": {}}],
        "server_logs": {"7": {"source": {"where": "/var/log/sglang.log"},
                              "serving": {"decode_lines": 18, "buckets": buckets, "graph": {"true": 18, "false": 0,
                                                                                             "absent": 0}}}},
        "model_configs": {"7": {"model": {"where": "/m/llama", "how": "the live server's --model-path directory",
                                          "config": CONFIG, "index_total_size": 16060522496}}} if record else {},
    }
    env = {"gpus": {"devices": [{"index": i, "name": gpu} for i in range(2)]}, "topology": {"summary": summary}}
    probes = {"deployment": ProbeResult("ok", data=deployment), "env": ProbeResult("ok", data=env)}
    if sweep:
        probes["copy_bench"] = ProbeResult("ok", data={"gpus": [{"index": 0, "sweep": sweep}]})
    return HostResult(name="h", status="ok", probes=probes)


def test_a_speculative_server_at_the_default_cap_is_found_and_answered_on_nvlink():
    host = _host(args={"speculative_algorithm": "EAGLE3", "speculative_num_draft_tokens": 4},
                 sweep=[{"bytes": 4 << 30, "copy_us": 2_000_000.0}])
    [capped] = [f for f in decode_step.speculation_costs([host]) if f.id == "decode_step.running_capped"]
    assert "default of 48" in capped.title and "highest #running-req in its decode lines 32" in capped.evidence[0].text
    q12 = q12_bandwidth(host)
    [server] = q12.value["servers"]
    assert server["gpu"]["bw_copy_gbps"] == {"v": 4.3, "src": "measured"}          # 2 × 4 GiB / 2 s
    assert [b["running_req"] for b in server["buckets"]] == [
        {"v": 1, "src": "measured"},
        {"v": 32, "src": "assumed", "note": "lower bound of bucket 32-63: the stored decode figures keep no median"}]
    q14 = q14_collectives(host)
    assert q14.value["servers"][0]["parallel"]["link"] == {"v": "nvlink", "src": "measured",
                                                           "note": "nvidia-smi topo -m"}
    assert q13_speculation_cost(host).value["servers"][0]["speculation"]["fit"]["f_base_ms"]["src"] == "assumed"
    # an explicit cap turns the finding off
    host = _host(args={"speculative_algorithm": "EAGLE3", "max_running_requests": "48"})
    assert not [f for f in decode_step.speculation_costs([host]) if f.id == "decode_step.running_capped"]


def test_missing_inputs_are_not_checked_with_the_reason():
    unread = q11_step_time(_host(record=False))
    assert unread.status == "not checked" and "read no config.json" in unread.text
    unknown = q12_bandwidth(_host(gpu="Tesla T4"))
    assert unknown.status == "not checked" and "no datasheet row for GPU Tesla T4" in unknown.text
    assert q13_speculation_cost(_host()).text == "not checked — no live sglang server with speculative decoding"
    small = q12_bandwidth(_host(sweep=[{"bytes": 4 << 20, "copy_us": 5.6}]))
    assert "fits in L2" in small.value["servers"][0]["gpu"]["bw_copy_gbps"]["note"]
    # the index was read: the prediction is checked against it
    model = q11_step_time(_host()).value["servers"][0]["model"]
    assert model["ckpt_pred_over_index"] == 1.0 and model["kv_replicated_tp"] is False
