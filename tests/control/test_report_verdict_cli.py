"""Honest verdicts through the CLI: the answers block with every `not checked` reason, coverage, findings grouped
across hosts, and the exit codes 0, 1 and 4 of scan, report and repro with and without --fail-on.

Scans run the real probes on this machine (no GPU here); stored runs stand for what other hosts would send.
"""
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.probe_data import fitted_host
from probes.crashlog.classify import classify
from tests.sglang_wheels import require

FLEET3 = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3"


def invoke(*args, env=None):
    return CliRunner().invoke(cli, [str(a) for a in args], env=env or {"COLUMNS": "250"})


def scan(*args, tmp):
    """`gpudiag scan` with the deployment probe reading an empty /proc: other processes on this machine (sglang
    servers other tests start) must not change what these tests see."""
    proc = Path(tmp) / "no-proc"
    proc.mkdir(exist_ok=True)
    return invoke("scan", *args, "--set", f"deployment.proc_root={proc}")


def host_doc(name):
    return json.loads((FLEET3 / "hosts" / f"{name}.json").read_text())


def write_run(root, hosts, argv=("gpudiag", "scan", "all"), kind="scan", extra=None):
    run = root / "runs" / "r1"
    (run / "hosts").mkdir(parents=True)
    manifest = {"schema": 1, "run_id": "r1", "kind": kind, "started_at": "2026-03-01T00:00:00Z",
                "finished_at": "2026-03-01T00:01:00Z", "argv": list(argv),
                "hosts": [{"name": h["name"], "status": h["status"], "reason": h.get("reason", "")} for h in hosts]}
    manifest.update(extra or {})
    (run / "run.json").write_text(json.dumps(manifest))
    for h in hosts:
        (run / "hosts" / f"{h['name']}.json").write_text(json.dumps(fitted_host(h)))
    (root / "latest").write_text("r1\n")
    return run


def answers_of(output):
    doc = json.loads(output)
    return doc, {q["id"]: q["answers"] for q in doc["answers"]["questions"]}


def only(answers, qid):
    [answer] = answers[qid]
    return answer["answer"]


# ---- real scans of this GPU-less machine -------------------------------------------------------------------

@pytest.fixture(scope="module")
def light_scan(tmp_path_factory):
    reports = tmp_path_factory.mktemp("light")
    result = scan("localhost", "--reports-dir", reports, tmp=reports.parent)
    return reports, result


def test_light_scan_of_a_gpu_less_machine_exits_0_and_its_answers_say_what_was_not_checked(light_scan):
    reports, scan = light_scan
    assert scan.exit_code == 0, scan.output
    report = invoke("report", "--reports-dir", reports, "--json")
    assert report.exit_code == 0, report.output
    doc, answers = answers_of(report.output)
    assert answers["Q1"][0]["status"] == "partial"
    assert "GPUs not checked — no GPU visible" in only(answers, "Q1")
    assert "cpu:" in only(answers, "Q1")                              # the CPU check itself ran
    # No GPU: the GPU checks are not offered again (no --deep), and the reason says why.
    assert only(answers, "Q5") == "not checked — probe copy_bench not selected; the host has no GPU"
    assert only(answers, "Q6") == "not checked — probe cuda_graph not selected; the host has no GPU"
    assert not any(a["command"] for q in ("Q5", "Q6") for a in answers[q])
    assert doc["summary"]["all_checked"] is False
    assert doc["summary"]["coverage"].endswith("questions answered on 1 host") or "in part" in \
        doc["summary"]["coverage"]
    markdown = invoke("report", "--reports-dir", reports, "--markdown").output
    assert markdown.index("## Answers") < markdown.index("## Verdict") < markdown.index("## Fleet")
    assert "No findings:" not in markdown                             # never while a question went unchecked
    assert "not everything was checked" in markdown


def test_sglang_not_found_names_the_interpreter(light_scan):
    reports, _ = light_scan
    _, answers = answers_of(invoke("report", "--reports-dir", reports, "--json").output)
    text = only(answers, "Q2")
    assert text.startswith("not checked — sglang not found in /") and "--python" in text
    assert only(answers, "Q7") == text


def test_deep_scan_without_a_gpu_exits_4_with_the_reason_and_fail_on_cannot_hide_it(tmp_path):
    settings = ("--set", "copy_bench.batch_sizes=[8]", "--set", "copy_bench.samples=3")
    result = scan("localhost", "--deep", "--reports-dir", tmp_path, *settings, tmp=tmp_path)
    assert result.exit_code == 4, result.output
    assert "localhost: incomplete — cuda_graph: every cell skipped — no CUDA device" in result.output
    for level in ("info", "critical", "incomplete"):
        assert invoke("report", "--reports-dir", tmp_path, "--fail-on", level).exit_code == 4
    doc = json.loads(invoke("report", "--reports-dir", tmp_path, "--json").output)
    [incomplete] = doc["verdict"]["incomplete_hosts"]
    assert incomplete["name"] == "localhost" and doc["verdict"]["requested_checks"] == ["copy_bench", "cuda_graph"]
    [reason] = incomplete["reasons"]   # names the torch build and the interpreter it ran under
    assert reason.startswith("cuda_graph: every cell skipped — no CUDA device visible to torch "
                             f"{doc['hosts'][0]['torch']} under /"), reason
    _, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    assert only(answers, "Q5").startswith("not checked — no GPU visible")   # copy_bench measured the CPU only
    assert doc["hosts"][0]["verdict"]["status"] == "incomplete"
    markdown = invoke("report", "--reports-dir", tmp_path, "--markdown").output
    assert "| localhost | incomplete |" in markdown
    assert "Exit code 4: a check asked for" in markdown
    assert "gpudiag scan --deep`" not in markdown.split("## Next steps")[1]   # never suggests what just ran


def test_probes_asked_by_name_that_skip_make_the_host_incomplete(tmp_path):
    result = scan("localhost", "--probes", "cuda_graph", "--reports-dir", tmp_path, tmp=tmp_path)
    assert result.exit_code == 4, result.output
    assert "cuda_graph: every cell skipped" in result.output


def test_repro_exits_4_without_cuda_whatever_fail_on_says(tmp_path):
    for extra in ((), ("--fail-on", "info")):
        result = invoke("repro", "cuda-graph-crash", "localhost", "--batch-sizes", "1", "--draft-tokens", "2",
                        "--algorithm", "EAGLE", "--mode", "synthetic", "--reports-dir", tmp_path / str(len(extra)),
                        *extra)
        assert result.exit_code == 4, result.output


def test_repro_log_exit_follows_fail_on(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("booting\nRuntimeError: num_active_captures_ > 0 INTERNAL ASSERT FAILED\n")
    assert invoke("repro", "cuda-graph-crash", "--log", log, "--reports-dir", tmp_path).exit_code == 1
    assert invoke("repro", "cuda-graph-crash", "--log", log, "--reports-dir", tmp_path,
                  "--fail-on", "incomplete").exit_code == 0


def _venv_without_torch(tmp_path, site=None):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    if site is not None:
        lib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
        Path(lib, "gpudiag-test-sglang.pth").write_text(f"{site}\n")
    return python


def test_torch_not_importable_names_the_interpreter_and_a_real_release_gives_findings_for_fail_on(tmp_path):
    site = require("0.5.11")
    python = _venv_without_torch(tmp_path, site)
    reports = tmp_path / "reports"
    first = scan("localhost", "--python", python, "--reports-dir", reports, tmp=tmp_path)
    assert first.exit_code == 0, first.output          # only info findings: below the default threshold
    _, answers = answers_of(invoke("report", "--reports-dir", reports, "--json").output)
    assert only(answers, "Q1").startswith(f"not checked — torch not importable in {python} (")
    assert only(answers, "Q3").startswith("draft per tensor")          # 0.5.11 read from the wheel
    assert only(answers, "Q4").startswith("present (sglang/srt/speculative/dflash_worker.py")   # 0.5.11 has it
    assert invoke("report", "--reports-dir", reports, "--fail-on", "info").exit_code == 1
    assert invoke("report", "--reports-dir", reports, "--fail-on", "warning").exit_code == 0
    rescan = scan("localhost", "--python", python, "--reports-dir", reports, "--fail-on", "info", tmp=tmp_path)
    assert rescan.exit_code == 1, rescan.output


# ---- stored runs: reasons a GPU-less machine cannot produce --------------------------------------------------

def test_timeout_busy_gpu_and_unreached_host_reasons(tmp_path):
    a = host_doc("gpu-a")
    a["probes"]["cuda_graph"] = {"status": "timeout", "duration_s": 1200.0, "reason": "ran past 1200 s"}
    a["probes"]["copy_bench"] = {"status": "skipped", "duration_s": 0.1,
                                 "reason": "GPU 0: GPU busy: 1 process(es); --force to benchmark anyway"}
    c = host_doc("gpu-c")
    run = write_run(tmp_path, [a, c], argv=("gpudiag", "scan", "all", "--deep"))
    result = invoke("report", run, "--json")
    assert result.exit_code == 3                          # gpu-c was not reached: the worst code wins
    doc, answers = answers_of(result.output)
    assert only(answers, "Q6") == "not checked — probe cuda_graph timed out after 1200 s"
    assert "--force" in only(answers, "Q5")
    assert "cuda:0, cuda:1, cuda:2, cuda:3 not checked — serving sglang (pid 4087, port 30000)" in only(answers, "Q1")
    assert doc["answers"]["unreached_hosts"] == [
        {"name": "gpu-c", "reason": "not checked — the host was not reached (unreachable: gpu-c.lab.internal:22: "
                                    "connection timed out after 10 s)"}]
    [incomplete] = doc["verdict"]["incomplete_hosts"]
    assert incomplete["reasons"] == ["copy_bench: skipped — GPU 0: GPU busy: 1 process(es); --force to benchmark "
                                     "anyway", "cuda_graph: timed out after 1200 s"]


def test_torch_read_in_another_python_is_said_in_the_answer_not_dropped(tmp_path):
    split = {"schema": 1, "name": "split", "status": "ok", "probes": {
        "env": {"status": "ok", "data": {"python": {"executable": "/usr/bin/python3"},
                                         "torch": {"available": True, "version": "2.1.0"}}},
        "torch_caps": {"status": "ok", "data": {"has_foreach_copy": True, "torch_version": "2.1.0",
                                                "checks": {"cpu": {"status": "ok", "ok": True,
                                                                   "pairs": {"int64->int32": "ok"}}}}},
        "sglang_source": {"status": "ok", "data": {"found": True, "version": "0.5.14", "interpreter": {
            "path": "/opt/venv/bin/python", "why": "live_server"}}}}}
    nameless = copy.deepcopy(split)
    nameless["name"] = "nameless"
    del nameless["probes"]["env"]["data"]["torch"]
    del nameless["probes"]["torch_caps"]
    write_run(tmp_path, [split, nameless])
    doc, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    by_host = {tuple(a["hosts"]): a for a in answers["Q1"]}
    assert "read in /usr/bin/python3, not in the serving /opt/venv/bin/python" in by_host[("split",)]["answer"]
    assert by_host[("split",)]["status"] == "partial"
    titles = [f["title"] for f in doc["findings"]]
    assert any(t.startswith("torch 2.1.0 was read in /usr/bin/python3") for t in titles)
    assert not any(t.startswith("torch ? was read") or t.startswith("torch None") for t in titles)


# ---- fleet view -------------------------------------------------------------------------------------------

def _copies(names, template="gpu-a"):
    hosts = []
    for name in names:
        doc = host_doc(template)
        doc["name"] = name
        hosts.append(doc)
    return hosts


def test_four_identical_hosts_give_each_finding_once_with_all_four(tmp_path):
    names = ["h1", "h2", "h3", "h4"]
    write_run(tmp_path / "four", _copies(names), argv=("gpudiag", "scan", "all", "--deep"))
    write_run(tmp_path / "one", _copies(["h1"]), argv=("gpudiag", "scan", "all", "--deep"))
    four = json.loads(invoke("report", "--reports-dir", tmp_path / "four", "--json").output)
    one = json.loads(invoke("report", "--reports-dir", tmp_path / "one", "--json").output)
    assert len(four["findings"]) == len(one["findings"]) > 3
    assert all(f["hosts"] == names for f in four["findings"])
    for question in four["answers"]["questions"]:
        [group] = question["answers"]                     # identical answers: one line for the four hosts
        assert group["hosts"] == names
    markdown = invoke("report", "--reports-dir", tmp_path / "four", "--markdown").output
    assert "(4 hosts: h1, h2, h3, h4)" in markdown
    assert "Where the hosts differ" not in markdown
    assert markdown.count("#### 1. ") == 1


def test_host_lists_collapse_past_ten_names(tmp_path):
    names = [f"n{i:02d}" for i in range(12)]
    write_run(tmp_path, _copies(names, "gpu-b"))
    markdown = invoke("report", "--reports-dir", tmp_path, "--markdown").output
    assert "(12 hosts: n00, n01, n02, n03, n04, n05, n06, n07, n08, n09 and 2 more)" in markdown


def test_differing_answers_are_a_per_host_table(tmp_path):
    write_run(tmp_path, [host_doc("gpu-a"), host_doc("gpu-b")])
    markdown = invoke("report", "--reports-dir", tmp_path, "--markdown").output
    table = markdown.split("Where the hosts differ:")[1].split("## Verdict")[0]
    assert "| Q9 What is serving now? | 1 host: gpu-a | pid 4087: EAGLE3, draft tokens 4" in table
    assert "|   | 1 host: gpu-b | pid 2211: DFLASH, draft tokens 16, CUDA graphs off" in table


# ---- exit codes of report ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fail_on, code", [("error", 1), ("critical", 1), ("warning", 1), ("info", 1),
                                           ("incomplete", 0)])
def test_report_exit_codes_follow_fail_on(tmp_path, fail_on, code):
    write_run(tmp_path, [host_doc("gpu-a")], argv=("gpudiag", "scan", "gpu-a", "--deep"))
    assert invoke("report", "--reports-dir", tmp_path, "--fail-on", fail_on).exit_code == code


def test_report_exit_4_only_after_findings_below_the_threshold(tmp_path):
    b = host_doc("gpu-b")      # warnings only; --deep asked and gpu-b has no GPU probe results
    write_run(tmp_path, [b], argv=("gpudiag", "scan", "gpu-b", "--deep"))
    assert invoke("report", "--reports-dir", tmp_path).exit_code == 4
    assert invoke("report", "--reports-dir", tmp_path, "--fail-on", "warning").exit_code == 1
    assert invoke("report", "--reports-dir", tmp_path, "--fail-on", "incomplete").exit_code == 4
    light = tmp_path / "light"
    write_run(light, [host_doc("gpu-b")], argv=("gpudiag", "scan", "gpu-b"))
    assert invoke("report", "--reports-dir", light).exit_code == 0      # nothing asked beyond the light set


def test_unknown_fail_on_is_a_usage_error(tmp_path):
    result = invoke("report", FLEET3, "--fail-on", "severe")
    assert result.exit_code == 2 and "severe" in result.output


# ---- ranking and flag names -------------------------------------------------------------------------------

def test_next_steps_rank_by_severity_then_measured_saving_and_each_action_once(tmp_path):
    write_run(tmp_path, _copies(["h1", "h2"]), argv=("gpudiag", "scan", "all", "--deep"))
    steps = invoke("report", "--reports-dir", tmp_path, "--markdown").output.split("## Next steps")[1]
    numbered = [line for line in steps.splitlines() if line[:1].isdigit()]
    assert numbered[0].startswith("1. Keep CUDA graphs clear of the repro") and "finding 1" in numbered[0]  # critical
    assert len(numbered) == len(set(numbered))
    assert not any(line.split(". ", 1)[1].startswith("Q") for line in numbered)     # questions stay in coverage
    upgrade = next(i for i, line in enumerate(numbered) if "Upgrade sglang" in line)
    outlier = next(i for i, line in enumerate(numbered) if "nvidia-smi topo" in line)
    # The saving Next steps names is the finding's number, and Q5 states the same number for a GPU.
    doc = json.loads(invoke("report", "--reports-dir", tmp_path, "--json").output)
    [eagle] = [f for f in doc["findings"] if f["id"] == "sglang.eagle_per_tensor_copies"]
    saving = eagle["saving_us_per_step"]
    assert isinstance(saving, float) and f"saves {saving} µs per decode step" in numbered[upgrade]
    [q5] = [q for q in doc["answers"]["questions"] if q["id"] == "Q5"]
    assert any(g["saving_us_per_step"] == saving for a in q5["answers"] for g in a["value"]["gpus"])
    assert upgrade < outlier or "µs" not in numbered[outlier]


def test_repro_advice_agrees_with_its_boundary_and_uses_the_releases_flag(tmp_path):
    write_run(tmp_path, [host_doc("gpu-a")], argv=("gpudiag", "scan", "gpu-a", "--deep"))
    doc = json.loads(invoke("report", "--reports-dir", tmp_path, "--json").output)
    repro = [f for f in doc["findings"] if f["id"] == "cuda_graph.repro_failure"]
    assert repro
    for finding in repro:
        advice = finding["recommendation"]
        assert "keep --speculative-num-draft-tokens at 8 or less" in advice    # the boundary: > 8 draft tokens
        assert "below 64" not in advice                                    # the old advice contradicted it
        assert "--cuda-graph-max-bs 16" in advice                          # 0.5.11 spells it so
        assert "outside that range" in advice                              # the live server runs 4 draft tokens
    b = host_doc("gpu-b")
    write_run(tmp_path / "b", [b])
    doc = json.loads(invoke("report", "--reports-dir", tmp_path / "b", "--json").output)
    [spec] = [f for f in doc["findings"] if f["id"] == "cuda_graph.spec_without_graphs"]
    assert "--cuda-graph-max-bs-decode" in spec["recommendation"]           # 0.5.23's spelling


def test_every_finding_names_the_command_that_reproduces_it():
    markdown = invoke("report", FLEET3, "--markdown").output
    findings = markdown.split("## Findings")[1].split("## Appendix")[0]
    assert findings.count("Reproduce: `gpudiag ") == findings.count("#### ")
    # The run's own inventory rides on the command (the recorded run was `scan all -i inventory.yaml --deep`).
    assert "Reproduce: `gpudiag repro cuda-graph-crash gpu-a -i inventory.yaml`" in findings


# ---- facts the report used to miss ------------------------------------------------------------------------

def _eagle_server_on_gpu_b(**changes):
    b = host_doc("gpu-b")
    server = b["probes"]["deployment"]["data"]["servers"][0]
    server["args"].update(speculative_algorithm="EAGLE", disable_cuda_graph=False, enable_dp_attention=False)
    server["cmdline"] = [server["python"], "-m", "sglang.launch_server", "--model-path", "m",
                         "--speculative-algorithm", "EAGLE", "--speculative-num-draft-tokens", "4"]
    server.update(changes)
    return b, server


def test_eagle_server_setting_the_fill_fast_path_gets_told_it_does_not_reach_its_replays(tmp_path):
    b, server = _eagle_server_on_gpu_b()
    server["env"] = {"SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH": "1"}
    write_run(tmp_path, [b])
    doc, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    [finding] = [f for f in doc["findings"] if f["id"] == "sglang.fill_fast_path_unread"]
    assert finding["evidence"][0]["file"] == "sglang/srt/model_executor/runner_utils/buffers.py"
    assert "runner_utils/buffers.py" in finding["recommendation"]
    q2 = only(answers, "Q2")
    assert "target decode fill → sglang/srt/model_executor/cuda_graph_buffer_registry.py:48 (dense-int path gated " \
           "by SGLANG_OPT_CUDA_GRAPH_FILL_FAST_PATH=1, small-copy kernel)" in q2
    assert "EAGLE draft → sglang/srt/model_executor/runner_utils/buffers.py:40 (small-copy kernel)" in q2


def test_a_server_whose_flags_or_interpreter_differ_from_disk_gets_a_finding_with_both_values(tmp_path):
    b, server = _eagle_server_on_gpu_b(python="/old/venv/bin/python")
    server["cmdline"] = ["/old/venv/bin/python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE",
                         "--enable-piecewise-cuda-graph"]
    write_run(tmp_path, [b])
    doc, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    [finding] = [f for f in doc["findings"] if f["id"] == "sglang.server_not_on_disk"]
    texts = " ".join(e["text"] for e in finding["evidence"])
    assert "flags not in the installed release: --enable-piecewise-cuda-graph" in texts
    assert "runs /old/venv/bin/python, sglang was read from /srv/sglang-dev/.venv/bin/python" in texts
    assert "--python /old/venv/bin/python" in finding["action"]
    assert "--enable-piecewise-cuda-graph" in only(answers, "Q8")


def test_dflash_presence_and_guards_are_stated_on_every_release(tmp_path):
    a, b = host_doc("gpu-a"), host_doc("gpu-b")
    a["probes"]["sglang_source"]["data"]["dflash"] = {"present": False, "draft_graph_guards": []}
    write_run(tmp_path, [a, b])
    _, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    by_host = {tuple(g["hosts"]): g["answer"] for g in answers["Q4"]}
    assert by_host[("gpu-a",)] == "DFlash absent in sglang 0.5.11"
    assert "3 draft-graph guard(s) at sglang/srt/speculative/dflash_worker_v2.py:714" in by_host[("gpu-b",)]
    assert "draft graph off by --disable-cuda-graph; with graphs on, guard " \
           "sglang/srt/speculative/dflash_worker_v2.py:724 would still hold" in by_host[("gpu-b",)]


def test_integrity_answer_shows_version_mismatch_and_why_it_is_unknown(tmp_path):
    a = host_doc("gpu-a")
    a["probes"]["sglang_source"]["data"]["version_mismatch"] = True
    a["probes"]["sglang_source"]["data"]["integrity"] = {"method": "none", "reason": "no RECORD matches the imported "
                                                                                     "files"}
    write_run(tmp_path, [a])
    _, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    assert only(answers, "Q7") == "sglang 0.5.11 (version_mismatch: true): integrity unknown — no RECORD matches the " \
                                  "imported files"


def test_drift_shows_copy_timings_that_moved_beyond_noise(tmp_path):
    slow = _copies(["h1", "h2"])
    for gpu in slow[1]["probes"]["copy_bench"]["data"]["gpus"]:
        for w in gpu["workloads"]:
            installed = w["strategies"]["installed"]
            for key in ("median_us", "p10_us", "p90_us"):
                installed[key] = installed[key] * 2
    write_run(tmp_path, slow)
    doc = json.loads(invoke("report", "--reports-dir", tmp_path, "--json").output)
    [drift] = [f for f in doc["findings"] if f["id"] == "fleet.drift"]
    rows = {row[0]: row[1:] for row in drift["evidence"][0]["table"][1:]}
    assert rows["copy eagle_draft/bs8/h7168, installed (median)"] == ["9.8 µs", "19.7 µs"]   # 9.84 µs doubled
    write_run(tmp_path / "same", _copies(["h1", "h2"]))
    same = json.loads(invoke("report", "--reports-dir", tmp_path / "same", "--json").output)
    assert not [f for f in same["findings"] if f["id"] == "fleet.drift"]     # identical hosts: no drift


def test_dflash_answer_uses_a_server_log_classification_when_the_scan_has_one(tmp_path):
    b = host_doc("gpu-b")
    line = "Disable DFLASH draft cuda graph because dp attention is enabled (draft runs eager)."
    # The record as the deployment probe stores it: the host-side classifier's own output for that log.
    record = classify("[2026-09-01 10:00:05 TP0] %s\n" % line)
    b["probes"]["deployment"]["data"]["server_logs"] = {"2211": dict(record, source={"kind": "stdout", "path": "/var/log/sglang.log"})}
    write_run(tmp_path, [b])
    _, answers = answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)
    assert only(answers, "Q4").endswith(f"DFlash draft graph disabled at startup: [2026-09-01 10:00:05 TP0] {line}")
    assert only(answers, "Q6").startswith("not checked — probe cuda_graph not selected")   # not a graph break
    del b["probes"]["deployment"]["data"]["server_logs"]          # without one, the flags and guards answer
    write_run(tmp_path / "plain", [b])
    _, answers = answers_of(invoke("report", "--reports-dir", tmp_path / "plain", "--json").output)
    assert "draft graph off by --disable-cuda-graph" in only(answers, "Q4")
