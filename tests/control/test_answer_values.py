"""Q1–Q10 carry a structured value through `gpudiag report --json`: each checked sentence is what its
`qN_text(value)` renders, the value holds the facts the recorded probes gave (Q1, Q2, Q3, Q6, Q7, Q8, Q9 here;
Q5 in test_report_json_values.py), every key is documented, and `--markdown` prints the same sentence. Runs are copies of the recorded fleet (tests/fixtures/runs/fleet3) or its hosts changed where a case
needs it (a wrong dtype pair, differing files, a logged crash, a second server).
"""
import copy
import shutil

import pytest

from gpudiag.findings.answers_dflash import q4_text
from gpudiag.findings.answers_live import q8_text, q9_text
from gpudiag.findings.answers_serving import q10_text
from gpudiag.findings.answers_measured import q5_text, q6_text
from gpudiag.findings.answers_source import q2_text, q3_text, q7_text
from gpudiag.findings.answers_torch import q1_text
from gpudiag.render.safe_text import md
from probes.crashlog.classify import classify
from tests.control.test_answers_servers_cli import NOT_READ, OLD, two_servers
from tests.control.test_report_json_values import _documented, _keys
from tests.control.test_report_verdict_cli import FLEET3, answers_of, host_doc, invoke, write_run

TEXTS = {"Q1": q1_text, "Q2": q2_text, "Q3": q3_text, "Q4": q4_text, "Q5": q5_text, "Q6": q6_text, "Q7": q7_text,
         "Q8": q8_text, "Q9": q9_text, "Q10": q10_text}
LOGS = FLEET3.parents[1] / "logs"


def _fleet_copy(tmp_path):
    root = tmp_path / "reports"
    shutil.copytree(FLEET3, root / "runs" / "fleet3")
    (root / "latest").write_text("fleet3\n")
    return root


def _report(root, *flags):
    result = invoke("report", "--reports-dir", root, *flags)
    assert result.exit_code in (0, 1, 3, 4), result.output
    return result.output


def _by_host(answers, qid):
    return {host: a for a in answers[qid] for host in a["hosts"]}


def _rendered(answers):
    """Every answer with a value is its value's rendering; unchecked ones carry none (Q10's keeps each server's
    reason)."""
    for qid, render in TEXTS.items():
        for answer in answers[qid]:
            if answer["status"] == "not checked" and qid != "Q10":
                assert answer["value"] is None and answer["answer"].startswith("not checked — "), answer
                continue
            assert answer["value"] is not None, (qid, answer)
            assert render(answer["value"]) == answer["answer"], qid
            missing = _keys(answer["value"]) - _documented(qid)
            assert not missing, (qid, missing)          # docs/report-json.md names every key


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = _fleet_copy(tmp_path_factory.mktemp("fleet"))
    _, answers = answers_of(_report(root, "--json"))
    return root, answers


def test_the_recorded_fleet_s_sentences_render_from_their_values_and_markdown_prints_them(fleet):
    root, answers = fleet
    _rendered(answers)
    markdown = _report(root, "--markdown", "--no-charts")
    for qid in TEXTS:
        for answer in answers[qid]:
            assert md(answer["answer"], 1200) in markdown, qid


def test_q1_value_holds_each_device_s_pairs_and_paths_as_torch_caps_recorded_them(fleet):
    _, answers = fleet
    caps = host_doc("gpu-a")["probes"]["torch_caps"]["data"]
    value = _by_host(answers, "Q1")["gpu-a"]["value"]
    assert value["torch_version"] == caps["torch_version"] and value["interpreter"] == caps["interpreter"]["path"]
    devices = {d["device"]: d for d in value["devices"]}
    assert sorted(devices) == sorted(caps["checks"])
    for name, check in caps["checks"].items():
        if check["status"] == "ok":
            assert devices[name]["pairs_total"] == len(check["pairs"]) == devices[name]["pairs_ok"]
            assert devices[name]["pairs_wrong"] == []
        else:
            assert devices[name] == {"device": name, "checked": False, "reason": check["reason"]}
    assert {k: p["path"] for k, p in devices["cpu"]["paths"].items()} == {
        k: p["path"] for k, p in caps["checks"]["cpu"]["paths"].items()}
    assert value["no_gpu"] is None and value["unrecorded"] == [] and value["serving_interpreter"] is None


def test_q1_names_a_wrong_pair_an_absent_foreach_copy_and_a_gpu_with_no_check(tmp_path):
    a = host_doc("gpu-a")
    checks = a["probes"]["torch_caps"]["data"]["checks"]
    checks["cuda:4"]["pairs"]["int64->int64"] = "mismatch: max abs diff 3"
    del checks["cuda:7"]
    b = host_doc("gpu-b")
    b["probes"]["torch_caps"]["data"]["has_foreach_copy"] = False
    write_run(tmp_path, [a, b])
    _, answers = answers_of(_report(tmp_path, "--json"))
    _rendered(answers)
    q1 = _by_host(answers, "Q1")
    [cuda4] = [d for d in q1["gpu-a"]["value"]["devices"] if d["device"] == "cuda:4"]
    assert cuda4["pairs_wrong"] == ["int64->int64"] and (cuda4["pairs_ok"], cuda4["pairs_total"]) == (3, 4)
    assert "cuda:4: 3 of 4 dtype pairs correct (wrong: int64->int64)" in q1["gpu-a"]["answer"]
    assert q1["gpu-a"]["value"]["unrecorded"] == ["cuda:7"] and q1["gpu-a"]["status"] == "partial"
    assert q1["gpu-b"]["value"]["has_foreach_copy"] is False and "devices" not in q1["gpu-b"]["value"]
    assert q1["gpu-b"]["answer"].startswith("absent in torch 2.9.1+cu129 in /srv/sglang-dev/.venv/bin/python")


def test_q2_and_q3_values_hold_the_definitions_callers_and_runners_as_file_line(fleet):
    _, answers = fleet
    source = host_doc("gpu-b")["probes"]["sglang_source"]["data"]
    q2 = _by_host(answers, "Q2")["gpu-b"]["value"]
    assert [d["at"] for d in q2["definitions"]] == [
        f"{d['file']}:{d['line']}" for d in source["grouped_foreach_copy"]["definitions"]]
    assert [p["kind"] for p in q2["definitions"][0]["fast_paths"]] == ["env_gated", "small_copy_kernel"]
    callers = {c["caller"]: c for c in q2["callers"]}
    assert callers["EAGLE draft"]["uses"] == "sglang/srt/model_executor/runner_utils/buffers.py:40"
    assert callers["EAGLE draft"]["call_site"] == "sglang/srt/speculative/eagle_draft_cuda_graph_runner.py:658"
    assert "DFlash" not in callers                                   # no DFlash call site in 0.5.23's facts
    assert _by_host(answers, "Q2")["gpu-a"]["value"]["definitions"][0]["fast_paths"] == []

    eagle = host_doc("gpu-a")["probes"]["sglang_source"]["data"]["eagle"]
    runners = {r["runner"]: r for r in _by_host(answers, "Q3")["gpu-a"]["value"]["runners"]}
    for key in ("draft", "draft_extend"):
        assert runners[key]["at"] == f"{eagle[key]['file']}:{eagle[key]['replay_line']}"
        assert runners[key]["per_tensor_copies"] == eagle[key]["per_tensor_copies"]
        assert runners[key]["per_tensor_fields"] == eagle[key]["per_tensor_fields"]
        assert runners[key]["batched"] is False and runners[key]["hidden_states_separate"] is False
    assert all(r["batched"] and r["hidden_states_separate"]
               for r in _by_host(answers, "Q3")["gpu-b"]["value"]["runners"])


def test_q6_value_holds_the_breaks_and_the_probe_s_own_boundaries(fleet):
    _, answers = fleet
    data = host_doc("gpu-a")["probes"]["cuda_graph"]["data"]
    q6 = _by_host(answers, "Q6")
    value = q6["gpu-a"]["value"]
    assert value["log"] is None and value["repro"]["gpu"] == data["gpu"]["index"]
    assert value["repro"]["cells_run"] == len([c for c in data["cells"] if c["status"] != "skipped"])
    assert [(b["label"], b["failing_from_batch_size"], b["safe_up_to"]) for b in value["repro"]["boundaries"]] == [
        (b["label"], b["failing_from_batch_size"], b["safe_up_to"]) for b in data["boundaries"]]
    assert [(b["path"], b["signature"], b["batch_sizes"], b["draft_tokens"]) for b in value["repro"]["breaks"]] == [
        ("eagle_draft", "eagle-capture-oom", [64], [16]),
        ("eagle_draft_extend", "eagle-draft-extend-garbage-topk", [64], [16])]
    assert q6["gpu-b"]["value"] is None and q6["gpu-b"]["status"] == "not checked"


def test_q6_keeps_a_logged_crash_beside_the_repro_and_without_it(tmp_path):
    record = classify((LOGS / "eagle_capture_failed_oom.log").read_text())
    logs = {"4087": dict(record, source={"kind": "file", "where": "/var/log/sglang.log", "path": "/var/log/sglang.log"})}
    a = host_doc("gpu-a")
    a["probes"]["deployment"]["data"]["server_logs"] = logs
    b = copy.deepcopy(a)
    b["name"] = "gpu-b"
    del b["probes"]["cuda_graph"]
    a["probes"]["cuda_graph"]["data"]["cells"] = [
        dict(c, status="skipped") for c in a["probes"]["cuda_graph"]["data"]["cells"]]
    a["probes"]["cuda_graph"]["data"]["skip_reason"] = "no idle GPU"
    write_run(tmp_path, [a, b])
    _, answers = answers_of(_report(tmp_path, "--json"))
    _rendered(answers)
    q6 = _by_host(answers, "Q6")
    summary = record["crashes"][0]["summary"]   # the classifier's own one-line summary
    assert q6["gpu-a"]["value"]["log"] == summary == q6["gpu-b"]["value"]["log"]
    assert q6["gpu-a"]["value"]["repro"]["cells_run"] == 0
    assert q6["gpu-a"]["answer"] == f"server log: {summary}; repro not checked — no idle GPU"
    assert q6["gpu-b"]["value"]["repro"] is None and q6["gpu-b"]["answer"] == f"server log: {summary}"


def test_q7_value_counts_what_differs_and_names_the_first_files(tmp_path, fleet):
    _, recorded = fleet
    integrity = host_doc("gpu-a")["probes"]["sglang_source"]["data"]["integrity"]
    assert _by_host(recorded, "Q7")["gpu-a"]["value"] == {
        "release": "0.5.11", "version_mismatch": False, "method": "record", "record": integrity["record"],
        "files_hashed": integrity["checked"], "cited_only": True, "modified": 0, "missing": 0, "first_files": []}
    a = host_doc("gpu-a")
    files = [f"sglang/srt/f{i}.py" for i in range(7)]
    a["probes"]["sglang_source"]["data"]["integrity"].update(modified=files[:6], missing=files[6:])
    b = host_doc("gpu-b")
    b["probes"]["sglang_source"]["data"]["integrity"] = {
        "method": "editable", "editable": {"path": "/src/sglang", "commit": "abc1234", "dirty": True,
                                           "changed": ["python/sglang/srt/x.py"]}}
    write_run(tmp_path, [a, b])
    _, answers = answers_of(_report(tmp_path, "--json"))
    _rendered(answers)
    q7 = _by_host(answers, "Q7")
    assert (q7["gpu-a"]["value"]["modified"], q7["gpu-a"]["value"]["missing"]) == (6, 1)
    assert q7["gpu-a"]["value"]["first_files"] == files[:5]
    assert f"7 differ: {', '.join(files[:5])}" in q7["gpu-a"]["answer"]
    assert q7["gpu-b"]["value"]["method"] == "editable" and q7["gpu-b"]["value"]["changed"] == 1
    assert "git checkout /src/sglang at abc1234, dirty, 1 changed: python/sglang/srt/x.py" in q7["gpu-b"]["answer"]


def test_q9_value_holds_each_server_s_flags(fleet):
    _, answers = fleet
    for host in ("gpu-a", "gpu-b"):
        [server] = host_doc(host)["probes"]["deployment"]["data"]["servers"]
        [value] = _by_host(answers, "Q9")[host]["value"]["servers"]
        args = server["args"]
        assert (value["pid"], value["port"], value["algorithm"], value["draft_tokens"], value["tp_size"]) == (
            server["pid"], args["port"], args["speculative_algorithm"], args["speculative_num_draft_tokens"],
            args["tp_size"])
        assert value["python"] == server["python"] and value["server"] == f"pid {server['pid']}"
    [a] = _by_host(answers, "Q9")["gpu-a"]["value"]["servers"]
    [b] = _by_host(answers, "Q9")["gpu-b"]["value"]["servers"]
    assert (a["cuda_graphs"], a["graph_max_bs"], a["max_bs_from"]) == ("on", 64, "--cuda-graph-max-bs")
    assert (b["cuda_graphs"], b["graphs_off_by"], b["gpus"]) == ("off", "--disable-cuda-graph", None)


def test_two_servers_their_values_carry_the_scope_the_sentences_end_with(tmp_path):
    write_run(tmp_path, [two_servers()])
    _, answers = answers_of(_report(tmp_path, "--json"))
    _rendered(answers)
    for qid in ("Q1", "Q2", "Q3", "Q7"):
        [answer] = answers[qid]
        assert NOT_READ in answer["value"]["scope"] and answer["answer"].endswith(answer["value"]["scope"]), qid
    [q4] = answers["Q4"]
    assert NOT_READ in q4["value"]["scope"]                          # the scope no longer drops Q4's value
    [q8] = answers["Q8"]
    assert q8["status"] == "partial" and q8["value"]["not_read"] == [3300]
    assert q8["value"]["unread"] == [{"server": "server pid 3300 (port 31000, GPUs 4,5)", "python": OLD,
                                      "sglang": {"found": True, "version": "0.5.11", "reason": None}}]
    assert [s["pid"] for s in q8["value"]["servers"]] == [2211]
    [q9] = answers["Q9"]
    assert q9["value"]["several"] is True
    assert [(s["pid"], s["port"], s["gpus"]) for s in q9["value"]["servers"]] == [
        (2211, 30000, "0,1,2,3"), (3300, 31000, "4,5")]
    assert [s["sglang"]["version"] for s in q9["value"]["servers"]] == ["0.5.23", "0.5.11"]


def test_q4_from_a_server_log_alone_renders_from_its_value(tmp_path):
    record = classify((LOGS / "dflash_draft_graph_disabled.log").read_text())
    b = host_doc("gpu-b")
    b["probes"]["deployment"]["data"]["server_logs"] = {
        "2211": dict(record, source={"kind": "file", "where": "/var/log/sglang.log", "path": "/var/log/sglang.log"})}
    del b["probes"]["sglang_source"]
    write_run(tmp_path, [b])
    _, answers = answers_of(_report(tmp_path, "--json"))
    [q4] = answers["Q4"]
    assert q4["value"]["present"] is None and q4["value"]["source_gap"] == "probe sglang_source not selected " \
        "(run it with --probes sglang_source)"
    assert q4["answer"] == q4_text(q4["value"]) and "(server log; source not read: probe sglang_source" in q4["answer"]
    assert not _keys(q4["value"]) - _documented("Q4")


def test_q9_value_says_when_python_is_not_a_live_server_s(tmp_path):
    b = host_doc("gpu-b")
    b["probes"]["deployment"]["data"]["interpreter"] = {
        "path": "/usr/bin/python3", "why": "explicit", "differs_from_live": ["/srv/sglang-dev/.venv/bin/python"]}
    write_run(tmp_path, [b])
    _, answers = answers_of(_report(tmp_path, "--json"))
    _rendered(answers)
    [q9] = answers["Q9"]
    assert q9["value"]["python_given"] == {"path": "/usr/bin/python3",
                                           "differs_from_live": ["/srv/sglang-dev/.venv/bin/python"]}
    assert q9["answer"].endswith("--python /usr/bin/python3 differs from a live server's interpreter "
                                 "(/srv/sglang-dev/.venv/bin/python): torch and sglang facts describe --python, "
                                 "each server's own is named here")


def test_a_second_server_under_another_python_closes_the_measured_answers_with_their_scope(tmp_path):
    a = host_doc("gpu-a")
    servers = a["probes"]["deployment"]["data"]["servers"]
    other = copy.deepcopy(servers[0])
    other.update(pid=3300, python="/opt/old/venv/bin/python", cuda_visible_devices="4,5")
    other["args"] = dict(other["args"], port=31000)
    if "identity" in other:
        other["identity"] = dict(other["identity"], pid=3300, port=31000, gpus="4,5")
    servers.append(other)
    write_run(tmp_path, [a])
    _, answers = answers_of(_report(tmp_path, "--json"))
    _rendered(answers)
    for qid in ("Q1", "Q5"):
        [answer] = answers[qid]
        assert "not read for server pid 3300 (port 31000, GPUs 4,5)" in answer["value"]["scope"], qid
        assert answer["answer"].endswith(answer["value"]["scope"]), qid
    [q6] = answers["Q6"]                       # the recorded repro names no interpreter: no scope is claimed
    assert q6["value"]["scope"] is None and "not read for" not in q6["answer"]
    [q9] = answers["Q9"]
    assert [s["server"] for s in q9["value"]["servers"]] == [
        "server pid 3300 (port 31000, GPUs 4,5)", "server pid 4087 (port 30000, GPUs 0,1,2,3)"]


def test_hosts_whose_sentences_agree_share_a_line_but_json_entries_only_with_equal_values(tmp_path):
    a = host_doc("gpu-a")
    d = copy.deepcopy(a)
    d["name"] = "gpu-d"
    [server] = d["probes"]["deployment"]["data"]["servers"]
    server["args"]["port"] = 31000                  # Q9's sentence for one server does not say its port
    if "identity" in server:
        server["identity"]["port"] = 31000
    write_run(tmp_path, [a, d])
    _, answers = answers_of(_report(tmp_path, "--json"))
    assert [(e["hosts"], e["value"]["servers"][0]["port"]) for e in answers["Q9"]] == [
        (["gpu-a"], 30000), (["gpu-d"], 31000)]
    assert answers["Q9"][0]["answer"] == answers["Q9"][1]["answer"]
    assert [e["hosts"] for e in answers["Q3"]] == [["gpu-a", "gpu-d"]]     # equal values stay one entry
    markdown = _report(tmp_path, "--markdown", "--no-charts")
    assert f"- **Q9** What is serving now? — {md(answers['Q9'][0]['answer'], 1200)} (2 hosts: gpu-a, gpu-d)" \
        in markdown
