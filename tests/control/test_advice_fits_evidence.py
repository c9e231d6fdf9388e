"""Advice its own evidence allows, through `gpudiag report`: each case builds the evidence that rules a
recommendation out, asserts that recommendation is absent and the one that fits is there."""
import json

from pathlib import Path

from tests.control.test_report_verdict_cli import answers_of, host_doc, invoke, write_run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"


def log_lines(name):
    return [ln for ln in (FIXTURES / "corpus" / name).read_text().splitlines() if not ln.startswith("#fixture ")]


def _report(tmp_path, hosts, argv=("gpudiag", "scan", "all")):
    write_run(tmp_path, hosts, argv=argv)
    return answers_of(invoke("report", "--reports-dir", tmp_path, "--json").output)


def _markdown(tmp_path):
    return invoke("report", "--reports-dir", tmp_path, "--markdown").output


def test_no_force_and_no_gpu_work_offered_where_every_gpu_serves(tmp_path):
    """gpu-b: one server on all 8 GPUs. Its GPUs are never touched, not even with --force: no --force, no --deep,
    no repro here; what would make it possible is said instead."""
    doc, answers = _report(tmp_path, [host_doc("gpu-b")])
    [q1] = answers["Q1"]
    assert "never touched, not even with --force" in q1["answer"]
    assert "--force" not in q1["command"] and q1["command"].endswith("--probes torch_caps")
    for qid in ("Q5", "Q6"):
        [a] = answers[qid]
        assert a["command"] == "" and "--deep" not in a["answer"], a
        assert "all 8 GPUs serve server pid 2211" in a["answer"] and "maintenance window" in a["answer"]
    [spec] = [f for f in doc["findings"] if f["id"] == "cuda_graph.spec_without_graphs"]
    assert "The repro cannot run here (all 8 GPUs serve server pid 2211" in spec["recommendation"]
    assert spec["action"].startswith("On a drained host,")
    markdown = _markdown(tmp_path)
    assert "--force" not in markdown.split("## Next steps")[1].split("## Appendix")[0]


def test_force_is_offered_where_a_gpu_is_only_busy_with_something_else(tmp_path):
    b = host_doc("gpu-b")
    checks = b["probes"]["torch_caps"]["data"]["checks"]
    checks["cuda:0"] = {"status": "skipped", "reason": "busy: 3 compute processes; pass --force to use busy GPUs"}
    _, answers = _report(tmp_path, [b])
    assert answers["Q1"][0]["command"].endswith("--probes torch_caps --force")


def _dflash_with_graphs_on(log_read):
    """gpu-b's DFlash server with graphs on and without DP attention: only the free-memory guard is left, and a
    running server cannot show whether it held."""
    b = host_doc("gpu-b")
    deployment = b["probes"]["deployment"]["data"]
    [server] = deployment["servers"]
    for flag in ("--disable-cuda-graph", "--enable-dp-attention"):
        server["cmdline"].remove(flag)
    server["args"].update(disable_cuda_graph=False, enable_dp_attention=False)
    if log_read:
        deployment["server_logs"]["2211"] = {
            "outcome": "clean", "source": {"kind": "file", "where": "/var/log/sglang.log", "path": "/var/log/sglang.log"},
            "crashes": [], "dflash_draft_graph": {"state": "not_logged", "line": None, "text": None,
                                                  "reason": "the log mentions DFlash but no draft-graph decision"}}
    return b


def test_no_log_search_is_advised_for_a_log_the_scan_read(tmp_path):
    doc, answers = _report(tmp_path, [_dflash_with_graphs_on(log_read=True)])
    texts = json.dumps(doc["findings"])
    assert "Search the server's start-up log" not in texts and "search its start-up output" not in texts
    assert not [f for f in doc["findings"] if f["id"] == "cuda_graph.dflash_draft_graph_disabled"]
    assert "pid 2211: draft graph on (no guard holds; its log has no 'Disable DFLASH draft cuda graph' line)" \
        in answers["Q4"][0]["answer"]


def test_without_a_log_the_scan_says_it_cannot_tell_in_the_answer_and_the_finding_alike(tmp_path):
    doc, answers = _report(tmp_path / "nolog", [_dflash_with_graphs_on(log_read=False)])
    [unknown] = [f for f in doc["findings"] if f["id"] == "cuda_graph.dflash_draft_graph_disabled"]
    assert unknown["severity"] == "info" and "The scan found no log for this server" in unknown["recommendation"]
    q4 = answers["Q4"][0]["answer"]
    assert "draft graph on unless a guard the scan cannot judge holds" in q4 and "no log was found" in q4


def test_point_python_is_not_advised_at_the_interpreter_given(tmp_path):
    b = host_doc("gpu-b")
    b["probes"]["torch_caps"] = {"status": "skipped", "duration_s": 0.1,
                                 "reason": "under /x/bin/python (given with --python): torch is not importable"}
    b["probes"]["env"]["data"]["torch"]["interpreter"] = {"path": "/x/bin/python", "why": "explicit", "ran": "child"}
    _, answers = _report(tmp_path, [b], argv=("gpudiag", "scan", "gpu-b", "--python", "/x/bin/python"))
    [q1] = answers["Q1"]
    assert "point --python" not in q1["answer"] and "torch not importable in" in q1["answer"]
    assert q1["command"] == "gpudiag scan gpu-b --probes torch_caps --python /x/bin/python"


def test_a_rescan_is_not_advised_where_it_repeats_the_cause(tmp_path):
    """Flags the installed release lacks, from the interpreter that was read: a rescan reads the same files."""
    b = host_doc("gpu-b")
    [server] = b["probes"]["deployment"]["data"]["servers"]
    server["cmdline"].append("--enable-piecewise-cuda-graph")
    doc, _ = _report(tmp_path, [b])
    [finding] = [f for f in doc["findings"] if f["id"] == "sglang.server_not_on_disk"]
    assert "rescan" not in finding["recommendation"].lower().replace("a rescan reads the same files", "")
    assert finding["action"] == "Restart the server from the installed sglang release"
    internal = {"schema": 1, "name": "h9", "status": "internal_error", "reason": "KeyError: 'x'", "probes": {}}
    doc, _ = _report(tmp_path / "bug", [internal])
    [bug] = [f for f in doc["findings"] if f["id"] == "hosts.unscanned"]
    assert "GPUDIAG_DEBUG=1" in bug["action"] and "a plain rescan repeats it" in bug["action"]


# The recorded EAGLE3 replay crash (tests/fixtures/logs/eagle3_replay_none_copy.log) with its frames on the DFlash
# verify path instead: the classifier on the host stores the same record shape for either.
DFLASH_REPLAY_CRASH = """\
[2026-03-20 09:12:55 TP0] Decode batch, #running-req: 3, #token: 2310, token usage: 0.00, accept len: 3.87, cuda graph: True, gen throughput (token/s): 388.10, #queue-req: 0
[2026-03-20 09:12:56 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/srv/sglang-dev/.venv/lib/python3.11/site-packages/sglang/srt/speculative/dflash_worker_v2.py", line 402, in forward_batch_generation
    self.target_worker.model_runner.graph_runner.replay(forward_batch)
  File "/srv/sglang-dev/.venv/lib/python3.11/site-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 905, in replay
    _grouped_foreach_copy_(dsts, srcs)
  File "/srv/sglang-dev/.venv/lib/python3.11/site-packages/sglang/srt/model_executor/cuda_graph_buffer_registry.py", line 52, in _grouped_foreach_copy_
    key = (dst.dtype, src.dtype)
AttributeError: 'NoneType' object has no attribute 'dtype'
[2026-03-20 09:12:56] Received sigquit from a child process. It usually means the child failed.
"""


def _with_crash_log(text, graphs_on=False):
    """gpu-b with its DFlash server's log holding `text`, classified as the host would; `graphs_on` drops the
    server's --disable-cuda-graph."""
    from probes.crashlog.classify import classify
    b = host_doc("gpu-b")
    deployment = b["probes"]["deployment"]["data"]
    if graphs_on:
        [server] = deployment["servers"]
        server["cmdline"].remove("--disable-cuda-graph")
        server["args"]["disable_cuda_graph"] = False
    deployment["server_logs"] = {"2211": dict(classify(text), source={
        "kind": "stdout", "where": "/var/log/sglang.log", "path": "/var/log/sglang.log"})}
    return b


def _crash_finding(tmp_path, host):
    doc, _ = _report(tmp_path, [host])
    [crash] = [f for f in doc["findings"] if f["id"] == "cuda_graph.log_crash"]
    return crash


def test_a_dflash_replay_crash_is_advised_on_its_own_path_with_the_fields_it_copies(tmp_path):
    crash = _crash_finding(tmp_path, _with_crash_log(DFLASH_REPLAY_CRASH, graphs_on=True))
    assert crash["title"].startswith("server log: ") and ")" not in crash["title"].split(":")[0]
    assert "#28465" not in crash["recommendation"].replace("does not touch this path", "").replace(
        "The EAGLE-draft change (sglang PR #28465)", "")
    assert "DFlash verify replay" in crash["recommendation"]
    assert "--disable-decode-cuda-graph keeps the replay out of the way" in crash["recommendation"]   # 0.5.23
    joined = next(e for e in crash["evidence"] if "the frames are on the DFlash verify replay" in e["text"])
    # The log's cuda_graph_runner.py is not in the installed 0.5.23 (split into runner/): the release's table.
    assert "in sglang 0.5.23 the DFlash verify replay" in joined["text"] and "input_ids" in joined["text"]
    assert "guards mamba_track_indices (mamba track)" in crash["recommendation"]
    assert "rids_int (SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE)" in crash["recommendation"]
    assert crash["action"].startswith("Find the None field on the DFlash verify replay")
    assert "the traceback's list of fields" not in json.dumps(crash)


def test_no_flag_is_proposed_that_the_server_already_runs_with(tmp_path):
    """gpu-b's DFlash server runs with --disable-cuda-graph: its replay crash came from a run with graphs on."""
    crash = _crash_finding(tmp_path, _with_crash_log(DFLASH_REPLAY_CRASH))
    assert "--disable-decode-cuda-graph" not in crash["recommendation"] + crash["action"]
    assert "already runs with --disable-cuda-graph, so this crash comes from a run with graphs on" \
        in crash["recommendation"]
    assert "run with --disable-cuda-graph" not in crash["recommendation"].lower().replace("runs with", "")
    # A signature's generic advice loses the clause that proposes the flag, and says why.
    fault = _crash_finding(tmp_path / "fault", _with_crash_log("\n".join(log_lines(
        "sglang_4584_rank_watchdog_illegal_memory_access.log"))))
    assert "retry with --disable-cuda-graph" not in fault["recommendation"] + fault["action"]
    assert "CUDA_LAUNCH_BLOCKING=1" in fault["recommendation"]
    assert fault["recommendation"].endswith("(the server already runs with --disable-cuda-graph).")
    assert "to find the kernel; try another attention backend; lower concurrency" in fault["recommendation"]


EAGLE3_REPLAY_CRASH = (FIXTURES / "eagle3_replay_none_copy.log").read_text()


def test_an_eagle_replay_crash_names_the_fields_of_the_call_site_the_installed_source_has(tmp_path):
    """The frames call _grouped_foreach_copy_ from eagle_draft_extend_cuda_graph_runner.py: the installed 0.5.23's
    AST has that call (EAGLEDraftExtendCudaGraphRunner.execute) and its fields; two of them are conditional."""
    crash = _crash_finding(tmp_path, _with_crash_log(EAGLE3_REPLAY_CRASH, graphs_on=True))
    joined = next(e for e in crash["evidence"] if "the frames are on the EAGLE draft-extend replay" in e["text"])
    assert "the copy at sglang/srt/speculative/eagle_draft_extend_cuda_graph_runner.py:593 " \
           "(EAGLEDraftExtendCudaGraphRunner.execute) copies input_ids, seq_lens" in joined["text"]
    assert "select_index" in joined["text"]
    assert "sglang 0.5.23 guards mrope_positions (mrope models), mamba_track_indices (mamba extra buffer)" \
        in crash["recommendation"]
    assert "--disable-decode-cuda-graph keeps the replay out of the way" in crash["recommendation"]


def _eagle_finding(tmp_path, host, argv=("gpudiag", "scan", "all")):
    doc, _ = _report(tmp_path, [host], argv=argv)
    [eagle] = [f for f in doc["findings"] if f["id"] == "sglang.eagle_per_tensor_copies"]
    return eagle, _markdown(tmp_path)


def test_deep_is_suggested_only_where_a_gpu_is_free_and_never_after_a_deep_run(tmp_path):
    """gpu-a serves EAGLE3 from 0.5.11 on GPUs 0-3: without its copy bench the finding cites upstream's figure."""
    a = host_doc("gpu-a")
    del a["probes"]["copy_bench"]
    eagle, _ = _eagle_finding(tmp_path / "free", a)
    assert "run `gpudiag scan --deep` to measure it here" in eagle["recommendation"]
    # Every GPU serves: no --deep here, and the way to measure it elsewhere instead.
    [server] = a["probes"]["deployment"]["data"]["servers"]
    server["cuda_visible_devices"] = "0,1,2,3,4,5,6,7"
    eagle, markdown = _eagle_finding(tmp_path / "busy", a)
    assert "--deep" not in eagle["recommendation"] and "--deep" not in markdown.split("## Next steps")[1]
    assert "no GPU here is free to measure it (all 8 GPUs serve server pid 4087" in eagle["recommendation"]
    # A --deep run whose copy bench measured nothing says why, and does not ask for itself again.
    a["probes"]["copy_bench"] = {"status": "skipped", "duration_s": 0.1,
                                 "reason": "every GPU serves a live server; never touched, not even with --force"}
    eagle, markdown = _eagle_finding(tmp_path / "deep", a, argv=("gpudiag", "scan", "all", "--deep"))
    assert "run `gpudiag scan --deep`" not in eagle["recommendation"]
    assert "this run's copy bench measured nothing here (skipped: every GPU serves" in eagle["recommendation"]


def test_next_steps_put_a_crash_first_and_drift_last_and_never_act_on_a_title(tmp_path):
    """gpu-a and gpu-b differ (drift) and gpu-b's server log holds a crash: the crash is step 1, drift the last
    warning step, and every step is an action (none reads 'Act on:')."""
    b = _with_crash_log("\n".join(log_lines("sglang_4584_rank_watchdog_illegal_memory_access.log")))
    write_run(tmp_path, [host_doc("gpu-a"), b])
    steps = _markdown(tmp_path).split("## Next steps")[1].split("\n## ")[0]
    numbered = [ln for ln in steps.splitlines() if ln[:1].isdigit()]
    assert numbered[0].startswith("1. Rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel")
    assert "Act on:" not in steps
    # Drift is a warning like the outlier link and the graphs-off finding, and comes after both.
    assert "Align sglang, torch, driver and flags" in numbered[-1]
    assert any("Check the outlier GPU's link" in ln for ln in numbered[:-1])


def test_the_note_names_the_switch_the_server_turned_graphs_off_with():
    """0.5.14+ spells decode graphs off several ways: the note quotes the server's own, not the one advised."""
    from gpudiag.findings.crash_context import fitted
    server = {"cmdline": ["python", "-m", "sglang.launch_server", "--cuda-graph-backend-decode", "disabled"],
              "args": {"cuda_graph_backend_decode": "disabled"}}
    advice = ("Reproduce with CUDA_LAUNCH_BLOCKING=1; retry with --disable-cuda-graph to confirm it is graph-specific; "
              "try another attention backend.")
    assert fitted(advice, server) == ("Reproduce with CUDA_LAUNCH_BLOCKING=1; try another attention backend (the "
                                      "server already runs with --cuda-graph-backend-decode disabled).")
    assert fitted(advice, {"cmdline": ["python"], "args": {}}) == advice


def test_an_unclassified_crash_points_at_graph_flags_only_with_a_capture_or_replay(tmp_path):
    plain = _crash_finding(tmp_path / "plain", _with_crash_log("\n".join(log_lines(
        "sglang_24843_reasoning_parser_startup_valueerror.log")), graphs_on=True))
    assert "graph flags" in plain["recommendation"] and "graph flags are not the first thing" in plain["recommendation"]
    captured = _crash_finding(tmp_path / "capture", _with_crash_log("\n".join(log_lines(
        "sglang_4968_torch_compile_capture_compose.log")), graphs_on=True))
    assert "check whether it recurs with the graph flags" in captured["recommendation"]
