"""Launch commands per sglang release, readiness / crash / hang detection and process-group cleanup.

Flags come from the real 0.4.10, 0.5.11 and 0.5.23 wheels through sglang_source's flag reader; the
servers are stand-in scripts (tests/probes/test_cuda_graph_support.py) that start, crash or hang.
"""
import json
import os
import signal
import subprocess
import sys
import time

from probes.graphrepro import launch_plan, launcher, sglang_repro, traffic
from tests.probes.test_cuda_graph_support import STANDIN_SERVER, group_members, wait_group_empty

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def release_flags(version):
    from probes.sglang_facts.flags import find_server_flags
    from probes.sglang_facts.sources import SourceTree
    from tests.sglang_wheels import require
    return find_server_flags(SourceTree(str(require(version))))["server_flags"]


def cell(algorithm="DFLASH", **changes):
    base = {"model_dir": "/tmp/t", "draft_dir": "/tmp/d", "algorithm": algorithm, "batch_sizes": [1, 4],
            "draft_tokens": 8, "layers": 2, "steps": 7, "topk": 1, "tp": 1, "port": 31234}
    base.update(changes)
    return base


def value_of(argv, flag):
    return argv[argv.index(flag) + 1]


def test_launch_command_for_0_4_10_lacks_the_draft_load_format():
    argv, omitted = launch_plan.build_argv("/venv/bin/python", cell("EAGLE"), release_flags("0.4.10"))
    assert argv[:3] == ["/venv/bin/python", "-m", "sglang.launch_server"]
    assert omitted == ["--speculative-draft-load-format"]
    assert value_of(argv, "--load-format") == "dummy"
    assert value_of(argv, "--cuda-graph-max-bs") == "4" and value_of(argv, "--speculative-num-steps") == "7"
    assert argv[argv.index("--cuda-graph-bs") + 1:argv.index("--cuda-graph-bs") + 3] == ["1", "4"]
    assert value_of(argv, "--host") == "127.0.0.1" and "--skip-tokenizer-init" in argv


def test_launch_command_for_0_5_11_dflash():
    argv, omitted = launch_plan.build_argv("python3", cell("DFLASH"), release_flags("0.5.11"))
    assert omitted == []
    assert value_of(argv, "--speculative-draft-load-format") == "dummy"
    assert value_of(argv, "--speculative-algorithm") == "DFLASH"
    assert value_of(argv, "--speculative-num-draft-tokens") == "8"
    assert "--speculative-num-steps" not in argv   # DFlash drafts a whole block at once


def test_launch_command_for_0_5_23_uses_the_per_phase_graph_flags():
    argv, omitted = launch_plan.build_argv("python3", cell("EAGLE3"), release_flags("0.5.23"))
    assert omitted == []
    assert value_of(argv, "--cuda-graph-max-bs-decode") == "4"
    assert value_of(argv, "--cuda-graph-bs-decode") == "1"
    assert "--cuda-graph-max-bs" not in argv
    assert value_of(argv, "--speculative-draft-model-path") == "/tmp/d"


def test_unknown_flags_fall_back_to_canonical_spellings_and_override_is_opt_in_except_for_dflash():
    argv, omitted = launch_plan.build_argv("python3", cell("EAGLE", model_override={"max_position_embeddings": 4096}),
                                           None)
    assert omitted == [] and "--cuda-graph-max-bs" in argv
    assert json.loads(value_of(argv, "--json-model-override-args")) == {"max_position_embeddings": 4096}
    assert "--json-model-override-args" not in launch_plan.build_argv("python3", cell("EAGLE"), None)[0]
    # DFlash: target plus DFlash draft, the layer cut as an override, dummy weights for both.
    argv, _ = launch_plan.build_argv("python3", cell("DFLASH", model_override={"rope_theta": 1e6}), None)
    assert json.loads(value_of(argv, "--json-model-override-args")) == {"num_hidden_layers": 2, "rope_theta": 1e6}
    assert value_of(argv, "--load-format") == "dummy" and value_of(argv, "--speculative-draft-load-format") == "dummy"
    assert value_of(argv, "--speculative-draft-model-path") == "/tmp/d"


def test_a_narrower_flag_table_judges_only_graph_and_speculative_flags():
    """Flags read with an older pattern lack --model-path: the base flags are then passed as spelled."""
    narrow = [f for f in release_flags("0.5.23") if "speculative" in f["name"] or "cuda-graph" in f["name"]]
    argv, omitted = launch_plan.build_argv("python3", cell("EAGLE"), narrow)
    assert omitted == [] and value_of(argv, "--model-path") == "/tmp/t" and "--skip-tokenizer-init" in argv
    assert value_of(argv, "--cuda-graph-max-bs-decode") == "4"


def start_standin(tmp_path, mode):
    script = tmp_path / "standin.py"
    script.write_text(STANDIN_SERVER)
    port = launcher.free_port()
    server = launcher.ServerProcess([sys.executable, str(script), mode, str(port)], port,
                                    str(tmp_path / ("%s.log" % mode)))
    return server.start()


def test_ready_server_answers_and_its_whole_group_is_killed(tmp_path):
    server = start_standin(tmp_path, "ok")
    pgid = server.proc.pid
    try:
        assert server.wait_ready(30, poll=0.1) == "ready"
        results = traffic.send_concurrent(server.port, 4, timeout=20)
        assert all(r["ok"] for r in results) and traffic.acceptance_length(results) == 3.2
        assert len(group_members(pgid)) >= 3   # supervisor, server, grandchild
    finally:
        server.stop()
    assert wait_group_empty(pgid)


def test_crash_at_start_is_died_with_a_capture_signature(tmp_path):
    with start_standin(tmp_path, "crash") as server:
        state = server.wait_ready(30, poll=0.1)
        assert server.exit_description() == "exit 1"
    status, detail, verdict = sglang_repro.classify(state, [], False, None, False, server.log_text())
    assert (state, status) == ("died", "capture_failed")
    assert verdict["signature"]["name"] == "oom_during_capture" and verdict["family"] == "oom_in_capture"
    assert wait_group_empty(server.proc.pid)


def test_hang_at_start_is_hang_and_nothing_is_left(tmp_path):
    server = start_standin(tmp_path, "hang")
    pgid = server.proc.pid
    with server:
        assert server.wait_ready(1.5, poll=0.1) == "hang"
    assert wait_group_empty(pgid)


def test_crash_on_request_is_classified_with_the_log_signature(tmp_path):
    with start_standin(tmp_path, "crash_on_request") as server:
        assert server.wait_ready(30, poll=0.1) == "ready"
        results = traffic.send_concurrent(server.port, 2, timeout=20)
        time.sleep(0.5)
        alive = server.alive() and server.health()
    status, detail, verdict = sglang_repro.classify("ready", results, alive, None, False, server.log_text())
    assert status == "crashed_on_request" and "server died" in detail
    assert verdict["signature"]["name"] == "illegal_memory_access" and verdict["family"] == "device_fault"


def test_request_hang_while_alive_is_hang(tmp_path):
    with start_standin(tmp_path, "hang_on_request") as server:
        assert server.wait_ready(30, poll=0.1) == "ready"
        results = traffic.send_concurrent(server.port, 2, timeout=1.0)
        alive = server.alive()
    status, _, _ = sglang_repro.classify("ready", results, alive, None, False, server.log_text())
    assert status == "hang"


def test_acceptance_of_one_is_silent_failure_only_with_real_weights():
    answered = [{"ok": True, "completion_tokens": 32, "spec_verify_ct": 32}]
    assert sglang_repro.classify("ready", answered, True, 1.0, True, "")[0] == "silent_failure"
    assert sglang_repro.classify("ready", answered, True, 1.0, False, "")[0] == "ok"


def test_killing_the_probe_kills_the_server_group(tmp_path):
    script = tmp_path / "standin.py"
    script.write_text(STANDIN_SERVER)
    parent_code = (
        "import sys, time; sys.path.insert(0, %r)\n"
        "from probes.graphrepro.launcher import ServerProcess, free_port\n"
        "port = free_port()\n"
        "s = ServerProcess([sys.executable, %r, 'hang', str(port)], port, %r).start()\n"
        "print(s.proc.pid, flush=True)\n"
        "time.sleep(600)\n" % (ROOT, str(script), str(tmp_path / "p.log")))
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE)
    pgid = int(parent.stdout.readline())
    deadline = time.monotonic() + 10
    while len(group_members(pgid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(group_members(pgid)) >= 3
    parent.send_signal(signal.SIGKILL)   # as the runner dies when the control side is interrupted
    parent.wait()
    assert wait_group_empty(pgid)
