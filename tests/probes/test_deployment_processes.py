"""The deployment probe against REAL processes started with sglang-like command lines (stand-in servers)."""
import json
import os
import stat
import subprocess
import sys
import time

import pytest

from probes import deployment
from probes.context import ProbeContext
from tests.process_groups import end_groups

HF_TOKEN = "hf_StandInSecretToken0123456789abcdefXYZ"
API_KEY = "sk-standin-api-key-5150"
STANDIN = """\
import os, sys, time
if "--fork-worker" in sys.argv:
    os.fork()  # a worker with the very same command line, as multiprocessing's fork start method makes
time.sleep(120)
"""


@pytest.fixture
def standin(tmp_path):
    """Starts stand-in servers; kills every one of them (and their process groups) afterwards."""
    package = tmp_path / "sglang"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "launch_server.py").write_text(STANDIN)
    console = tmp_path / "bin" / "sglang"
    console.parent.mkdir()
    console.write_text("#!%s\n%s" % (sys.executable, STANDIN))
    console.chmod(console.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PYTHONPATH=str(tmp_path), HF_TOKEN=HF_TOKEN, SGLANG_API_KEY=API_KEY,
               NCCL_DEBUG="INFO", CUDA_VISIBLE_DEVICES="2,3", SGLANG_ENABLE_TORCH_COMPILE="0")
    started = []

    def start(argv):
        proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        started.append(proc)
        return proc

    start.console = str(console)
    yield start
    end_groups(started)


def servers_in_group(pgid, want=1, timeout=10.0):
    """Our servers (by process group: other stand-ins may run on this machine), once `want` are visible."""
    deadline = time.monotonic() + timeout
    while True:
        data = deployment.collect(ProbeContext())
        ours = [s for s in data["servers"] if _pgid(s["pid"]) == pgid]
        if len(ours) >= want or time.monotonic() > deadline:
            return ours, data
        time.sleep(0.1)


def _pgid(pid):
    try:
        return os.getpgid(pid)
    except OSError:
        return None


LAUNCH_ARGS = ["--model-path", "/models/Llama-3.1-8B-Instruct", "--speculative-algorithm", "EAGLE",
               "--speculative-draft-model-path=/models/EAGLE-LLaMA3.1-8B", "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--tp", "2",
               "--cuda-graph-bs", "1", "2", "4", "--mem_fraction_static", "0.7", "--disable-cuda-graph",
               "--port=31999", "--api-key", API_KEY, "--log-level", "info"]


def test_launch_server_process_is_found_and_parsed(standin):
    proc = standin([sys.executable, "-m", "sglang.launch_server"] + LAUNCH_ARGS)
    ours, data = servers_in_group(proc.pid)
    assert len(ours) == 1
    server = ours[0]
    assert server["pid"] == proc.pid
    assert server["entry"] == "python -m sglang.launch_server"
    assert server["python"] == sys.executable and server["python_source"] == "cmdline"
    assert server["python_exists"] is True and server["same_root"] is True
    assert os.path.realpath(server["exe"]) == os.path.realpath(sys.executable)
    args = server["args"]
    assert args["model_path"] == "/models/Llama-3.1-8B-Instruct"
    assert args["speculative_algorithm"] == "EAGLE"
    assert args["speculative_draft_model_path"] == "/models/EAGLE-LLaMA3.1-8B"
    assert (args["speculative_num_steps"], args["speculative_eagle_topk"], args["speculative_num_draft_tokens"]) \
        == (3, 1, 4)
    assert args["tp_size"] == 2 and args["cuda_graph_bs"] == [1, 2, 4]
    assert args["mem_fraction_static"] == 0.7 and args["disable_cuda_graph"] is True
    assert args["port"] == 31999 and args["log_level"] == "info"
    assert server["cuda_visible_devices"] == "2,3"
    assert server["env"]["NCCL_DEBUG"] == "INFO" and server["env"]["SGLANG_ENABLE_TORCH_COMPILE"] == "0"
    assert "HF_TOKEN" not in server["env"] and "SGLANG_API_KEY" not in server["env"]
    text = json.dumps(data)
    assert HF_TOKEN not in text and API_KEY not in text


def test_interpreter_choice(standin):
    proc = standin([sys.executable, "-m", "sglang.launch_server", "--model-path", "/m"])
    servers_in_group(proc.pid)
    live = deployment.collect(ProbeContext(options={"python": "python3", "python_explicit": False}))
    assert live["interpreter"]["why"] == "live_server"
    assert sys.executable in live["interpreter"]["candidates"]
    explicit = deployment.collect(ProbeContext(options={"python": "/opt/other/python", "python_explicit": True}))
    assert explicit["interpreter"]["path"] == "/opt/other/python" and explicit["interpreter"]["why"] == "explicit"
    assert sys.executable in explicit["interpreter"]["differs_from_live"]


def test_sglang_serve_console_script(standin):
    proc = standin([standin.console, "serve", "--model-path", "/models/qwen", "--tp-size=4", "--enable-dp-attention",
                    "--dp", "4"])
    ours, _ = servers_in_group(proc.pid)
    assert len(ours) == 1 and ours[0]["entry"] == "sglang serve"
    assert ours[0]["python"] == sys.executable
    args = ours[0]["args"]
    assert (args["tp_size"], args["dp_size"], args["enable_dp_attention"]) == (4, 4, True)


def test_shell_wrapper_reports_the_python_child_once(standin):
    command = "%s -m sglang.launch_server --model-path /models/w --port 30123; true" % sys.executable
    shell = standin(["/bin/sh", "-c", command])
    ours, _ = servers_in_group(shell.pid, timeout=10)
    deadline = time.monotonic() + 10
    while (not ours or ours[0]["pid"] == shell.pid) and time.monotonic() < deadline:
        ours, _ = servers_in_group(shell.pid)
    assert len(ours) == 1
    assert ours[0]["pid"] != shell.pid and ours[0]["ppid"] == shell.pid
    assert ours[0]["launched_via"] == {"pid": shell.pid, "command": "sh"}
    assert ours[0]["args"]["port"] == 30123


def test_forked_worker_is_not_a_second_server(standin):
    proc = standin([sys.executable, "-m", "sglang.launch_server", "--model-path", "/m", "--fork-worker"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(_group_members(proc.pid)) < 2:
        time.sleep(0.1)
    assert len(_group_members(proc.pid)) == 2, "the stand-in did not fork"
    ours, _ = servers_in_group(proc.pid)
    assert [s["pid"] for s in ours] == [proc.pid]


def _group_members(pgid):
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == pgid]


def test_unreadable_and_vanished_entries_are_skipped(tmp_path):
    proc = tmp_path / "proc"
    argv = b"/usr/bin/python3\0-m\0sglang.launch_server\0--port\x0030000\0"
    good = proc / "100"
    good.mkdir(parents=True)
    (good / "cmdline").write_bytes(argv)
    (good / "environ").mkdir()          # unreadable as a file
    (proc / "101").mkdir()              # no cmdline at all (a kernel thread, or gone)
    (proc / "102").write_text("")       # vanished between listdir and open
    half = proc / "103"
    half.mkdir()
    (half / "cmdline").write_bytes(argv)  # a server whose stat/exe/cwd are gone
    data = deployment.collect(ProbeContext(options={"deployment": {"proc_root": str(proc)}}))
    assert [s["pid"] for s in data["servers"]] == [100, 103]
    assert data["servers"][0]["env"] == {} and data["servers"][0]["args"]["port"] == 30000
    assert data["servers"][1]["ppid"] is None and data["servers"][1]["exe"] is None
    missing = deployment.collect(ProbeContext(options={"deployment": {"proc_root": str(tmp_path / "none")}}))
    assert missing["servers"] == [] and missing["interpreter"]["why"] == "default"


def test_choose_interpreter_rules():
    usable = {"pid": 5, "python": "/venv/bin/python3", "python_exists": True, "same_root": True}
    other_root = {"pid": 6, "python": "/usr/bin/python3", "python_exists": True, "same_root": False}
    assert deployment.choose_interpreter({}, [usable])["path"] == "/venv/bin/python3"
    assert deployment.choose_interpreter({}, [usable])["why"] == "live_server"
    contained = deployment.choose_interpreter({"python": "python3"}, [other_root])
    assert contained["why"] == "default" and contained["path"] == sys.executable and contained["note"]
    assert deployment.choose_interpreter({"python": "python3"}, []).get("note") is None
    assert deployment.choose_interpreter({"python_explicit": True, "python": "/x"}, [usable])["why"] == "explicit"
