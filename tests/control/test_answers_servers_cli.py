"""Hosts with several live servers, or a --python other than the server's, through `gpudiag report`: answers and
findings name the server (pid, port, GPUs), say which release or interpreter each fact describes, and say "not
read for server pid N (…)" where a fact was not read; torch_caps' copy paths reach Q1 and the torch section.

Stored runs start from the recorded fleet's gpu-b (sglang 0.5.23 read in /srv/sglang-dev/.venv/bin/python) with the
per-server records deployment writes (`identity`, `sglang`) and the probes' `interpreter` records.
"""
import copy
import json

from tests.control.test_report_verdict_cli import answers_of, host_doc, invoke, only, scan, write_run

SERVING = "/srv/sglang-dev/.venv/bin/python"
OLD = "/opt/old/venv/bin/python"


def _with_identity(server, version, package_dir):
    args = server["args"]
    server["identity"] = {"pid": server["pid"], "port": args.get("port"), "gpus": server.get("cuda_visible_devices"),
                          "tp_size": args.get("tp_size"), "speculative_algorithm": args.get("speculative_algorithm")}
    server["sglang"] = {"found": True, "version": version, "version_from": "literal",
                        "site_packages": package_dir.rsplit("/", 1)[0], "package_dir": package_dir}
    return server


def two_servers():
    """gpu-b with its DFlash server (pid 2211, port 30000, every GPU) and an EAGLE server under an older venv
    (pid 3300, port 31000, GPUs 4,5) running sglang 0.5.11."""
    b = host_doc("gpu-b")
    deployment = b["probes"]["deployment"]["data"]
    first = _with_identity(deployment["servers"][0], "0.5.23",
                           "/srv/sglang-dev/.venv/lib/python3.11/site-packages/sglang")
    first["cuda_visible_devices"] = first["identity"]["gpus"] = "0,1,2,3"
    second = copy.deepcopy(first)
    second.update(pid=3300, python=OLD, cuda_visible_devices="4,5",
                  cmdline=[OLD, "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm",
                           "EAGLE", "--port", "31000", "--tp-size", "2"])
    second["args"] = dict(first["args"], port=31000, tp_size=2, speculative_algorithm="EAGLE",
                          disable_cuda_graph=False, enable_dp_attention=False, dp_size=None)
    _with_identity(second, "0.5.11", "/opt/old/venv/lib/python3.10/site-packages/sglang")
    deployment["servers"].append(second)
    deployment["interpreter"] = {"path": SERVING, "why": "live_server", "pid": 2211,
                                 "reason": "the live sglang server's interpreter", "candidates": [SERVING, OLD],
                                 "note": "2 live servers use different interpreters; torch work runs under pid 2211's"}
    deployment["interpreters"] = [{"path": SERVING, "servers": [first["identity"]], "sglang": first["sglang"]},
                                  {"path": OLD, "servers": [second["identity"]], "sglang": second["sglang"]}]
    b["probes"]["torch_caps"]["data"]["interpreter"] = {"path": SERVING, "why": "live_server", "pid": 2211,
                                                        "ran": "child"}
    return b


NOT_READ = f"not read for server pid 3300 (port 31000, GPUs 4,5), which runs sglang 0.5.11 in {OLD}"


def test_two_servers_with_different_releases_are_each_named(tmp_path):
    write_run(tmp_path, [two_servers()])
    result = invoke("report", "--reports-dir", tmp_path, "--json")
    doc, answers = answers_of(result.output)
    q9 = only(answers, "Q9")
    assert "server pid 2211 (port 30000, GPUs 0,1,2,3): DFLASH" in q9 and f"sglang 0.5.23 in {SERVING}" in q9
    assert "server pid 3300 (port 31000, GPUs 4,5): EAGLE" in q9 and f"sglang 0.5.11 in {OLD}" in q9
    described = f"sglang facts describe {SERVING}, run by server pid 2211 (port 30000, GPUs 0,1,2,3)"
    for qid in ("Q2", "Q3", "Q4", "Q7"):
        assert only(answers, qid).endswith(f"{described}; {NOT_READ}"), qid
    assert only(answers, "Q7").startswith("sglang 0.5.23 ")         # the release the answer describes
    assert "server pid 2211 (port 30000, GPUs 0,1,2,3): draft graph off by --disable-cuda-graph" in only(answers, "Q4")
    q1 = only(answers, "Q1")
    assert f"torch facts describe {SERVING}, run by server pid 2211" in q1 and NOT_READ in q1
    [q8] = answers["Q8"]
    assert q8["status"] == "partial"
    assert "server pid 2211 (port 30000, GPUs 0,1,2,3): all " in q8["answer"]
    assert "server pid 3300 (port 31000, GPUs 4,5): not checked — sglang not read for it (it runs sglang 0.5.11 " \
           f"in {OLD}; rescan with --python {OLD})" in q8["answer"]
    # Another live server's code not read is an info finding naming it, not "not running the code on disk".
    assert not [f for f in doc["findings"] if f["id"] == "sglang.server_not_on_disk"]
    [unread] = [f for f in doc["findings"] if f["id"] == "sglang.server_not_read"]
    assert unread["severity"] == "info"
    assert unread["evidence"][0]["text"] == (f"server pid 3300 (port 31000, GPUs 4,5) runs sglang 0.5.11 in {OLD}; "
                                             f"the source facts describe {SERVING}")
    assert f"gpudiag scan --python {OLD}" in unread["recommendation"] and "gpu-b" not in unread["recommendation"]
    markdown = invoke("report", "--reports-dir", tmp_path, "--markdown").output
    assert NOT_READ in markdown
    assert f"Server pid 3300 ({OLD}; sglang 0.5.11), CUDA_VISIBLE_DEVICES=4,5" in markdown
    assert "2 live servers use different interpreters" in markdown


def test_one_server_keeps_its_short_answers(tmp_path):
    b = host_doc("gpu-b")
    _with_identity(b["probes"]["deployment"]["data"]["servers"][0], "0.5.23", "/srv/x/sglang")
    write_run(tmp_path, [b])
    _, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    assert only(answers, "Q9").startswith("pid 2211: DFLASH")
    for qid in ("Q1", "Q2", "Q7", "Q8"):
        assert "not read for" not in only(answers, qid) and "describe" not in only(answers, qid), qid


def test_an_explicit_python_other_than_the_servers_shows_both(tmp_path):
    b = host_doc("gpu-b")
    explicit = "/home/me/venv/bin/python"
    deployment = b["probes"]["deployment"]["data"]
    _with_identity(deployment["servers"][0], "0.5.23", "/srv/sglang-dev/.venv/lib/python3.11/site-packages/sglang")
    deployment["interpreter"] = {"path": explicit, "why": "explicit", "requested": explicit,
                                 "differs_from_live": [SERVING], "candidates": [SERVING],
                                 "note": f"--python {explicit} is not the live server's interpreter ({SERVING})"}
    b["probes"]["sglang_source"]["data"]["interpreter"] = {"path": explicit, "why": "explicit"}
    b["probes"]["torch_caps"]["data"]["interpreter"] = {"path": explicit, "why": "explicit", "ran": "child"}
    write_run(tmp_path, [b])
    doc, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    not_read = f"not read for server pid 2211 (port 30000, GPUs all), which runs sglang 0.5.23 in {SERVING}"
    q1 = only(answers, "Q1")
    assert f"in {explicit}" in q1
    assert f"torch facts describe {explicit} (given with --python; no live server runs it); {not_read}" in q1
    assert only(answers, "Q2").endswith(f"sglang facts describe {explicit} (given with --python; no live server "
                                        f"runs it); {not_read}")
    q9 = only(answers, "Q9")
    assert f"--python {explicit} differs from a live server's interpreter ({SERVING})" in q9 and SERVING in q9
    q8 = only(answers, "Q8")
    assert f"runs {SERVING}, sglang was read from {explicit}" in q8 and "the facts describe --python" in q8
    [finding] = [f for f in doc["findings"] if f["id"] == "sglang.server_not_on_disk"]
    assert finding["evidence"][0]["text"] == (f"server pid 2211 (port 30000, GPUs all): runs {SERVING}, sglang was "
                                              f"read from {explicit}")


def test_copy_paths_reach_q1_and_the_torch_section(tmp_path):
    b = host_doc("gpu-b")
    checks = b["probes"]["torch_caps"]["data"]["checks"]
    # Two GPUs that ran the checks (the recorded fleet's are a live server's, never touched): the CPU's results
    # with the profiler's verdict on each copy path.
    checks["cuda:0"] = dict(checks["cpu"], paths={
        "contiguous_same_dtype": {"path": "fast", "how": "profiler", "launches": 1},
        "non_contiguous": {"path": "per_tensor", "how": "profiler", "launches": 3},
        "mixed_pairs_one_call": {"path": "per_tensor", "how": "profiler", "launches": 3}})
    checks["cuda:1"] = dict(checks["cpu"], paths={
        k: {"path": "unknown", "how": "profiler", "reason": "not asked (torch_caps.profile=false)"}
        for k in ("contiguous_same_dtype", "non_contiguous", "mixed_pairs_one_call")})
    write_run(tmp_path, [b])
    _, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    q1 = only(answers, "Q1")
    assert "copy path on cuda:0: fast multi_tensor_apply for same-dtype contiguous; per-tensor for " \
           "non-contiguous, mixed dtype pairs" in q1
    assert "copy path on cuda:1: path unknown (not asked (torch_caps.profile=false)) for same-dtype contiguous, " \
           "non-contiguous, mixed dtype pairs" in q1
    markdown = invoke("report", "--reports-dir", tmp_path, "--markdown").output
    torch_section = markdown.split("#### torch capabilities")[1].split("####")[0]
    assert "| copy path |" in torch_section
    assert "| fast multi_tensor_apply for same-dtype contiguous; per-tensor for non-contiguous, mixed dtype pairs |" \
        in torch_section


def test_a_real_scan_reports_the_cpu_copy_path(tmp_path):
    result = scan("localhost", "--reports-dir", tmp_path, tmp=tmp_path)
    assert result.exit_code == 0, result.output
    _, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    assert "copy path on cpu: per-tensor for same-dtype contiguous, non-contiguous, mixed dtype pairs" in \
        only(answers, "Q1")


def test_measured_answers_say_which_server_they_describe(tmp_path):
    b = two_servers()
    b["probes"]["cuda_graph"] = {"status": "ok", "duration_s": 1.0, "data": {
        "mode": "synthetic", "gpu": {"index": 0, "compute_capability": "sm_90"},
        "interpreter": {"path": SERVING, "why": "live_server", "pid": 2211},
        "cells": [{"algorithm": "EAGLE", "path": "eagle_draft", "batch_size": 8, "draft_tokens": 4, "status": "ok"}]}}
    write_run(tmp_path, [b])
    _, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    assert only(answers, "Q6") == ("no break in 1 cells on GPU 0 sm_90 (synthetic mode); graph results describe "
                                   f"{SERVING}, run by server pid 2211 (port 30000, GPUs 0,1,2,3); {NOT_READ}")


def test_env_torch_read_in_the_servers_python_is_not_another_interpreter(tmp_path):
    """env reads torch's build in a child of the chosen interpreter: the report says so, and does not warn that
    torch was read in another Python than sglang's."""
    b = host_doc("gpu-b")
    del b["probes"]["torch_caps"]
    env = b["probes"]["env"]["data"]
    env["python"]["executable"] = "/usr/bin/python3"
    env["torch"]["interpreter"] = {"path": SERVING, "why": "live_server", "ran": "child"}
    write_run(tmp_path, [b])
    doc = json.loads(invoke("report", "--reports-dir", tmp_path, "--json").output)
    [host] = doc["hosts"]
    assert host["torch_interpreter"] == f"{SERVING} (live_server)" and host["torch_elsewhere"] is False
    assert not [f for f in doc["findings"] if f["id"] == "sglang.torch_other_interpreter"]
    env["torch"]["interpreter"] = {"path": "/usr/bin/python3", "why": "default", "ran": "child"}
    write_run(tmp_path / "other", [b])
    doc = json.loads(invoke("report", "--reports-dir", tmp_path / "other", "--json").output)
    assert doc["hosts"][0]["torch_elsewhere"] is True
    assert [f for f in doc["findings"] if f["id"] == "sglang.torch_other_interpreter"]


def test_findings_name_the_server_and_judge_only_servers_whose_code_was_read(tmp_path):
    b = two_servers()
    servers = b["probes"]["deployment"]["data"]["servers"]
    servers[1]["env"] = {"SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH": "1"}     # 0.5.11's code was not read
    write_run(tmp_path, [b])
    doc = json.loads(invoke("report", "--reports-dir", tmp_path, "--json").output)
    [spec] = [f for f in doc["findings"] if f["id"] == "cuda_graph.spec_without_graphs"]
    assert spec["evidence"][0]["text"] == ("server pid 2211 (port 30000, GPUs 0,1,2,3): --speculative-algorithm "
                                           "DFLASH with --disable-cuda-graph")
    assert not [f for f in doc["findings"] if f["id"] == "sglang.fill_fast_path_unread"]
    # The server whose release was read is judged, and named.
    servers[0]["args"].update(speculative_algorithm="EAGLE", disable_cuda_graph=False, enable_dp_attention=False)
    servers[0]["env"] = {"SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH": "1"}
    write_run(tmp_path / "read", [b])
    doc = json.loads(invoke("report", "--reports-dir", tmp_path / "read", "--json").output)
    [unread] = [f for f in doc["findings"] if f["id"] == "sglang.fill_fast_path_unread"]
    assert unread["evidence"][0]["text"].startswith("server pid 2211 (port 30000, GPUs 0,1,2,3) (EAGLE) sets "
                                                    "SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH=1")
