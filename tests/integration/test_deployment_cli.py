"""End to end through the CLI: `gpudiag scan localhost --probes deployment,env,torch_caps` with a stand-in
sglang server running; the stored host document shows the server, its parsed flags and never its secrets."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HF_TOKEN = "hf_EndToEndSecret9876543210zyxwvutsrqpo"


@pytest.fixture
def standin_server(tmp_path):
    package = tmp_path / "standin" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "launch_server.py").write_text("import time\ntime.sleep(180)\n")
    env = dict(os.environ, PYTHONPATH=str(package.parent), HF_TOKEN=HF_TOKEN, NCCL_DEBUG="WARN",
               CUDA_VISIBLE_DEVICES="0,1")
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/Qwen3-8B",
            "--speculative-algorithm", "EAGLE3", "--speculative-num-draft-tokens", "6", "--tp-size", "2",
            "--cuda-graph-max-bs=16", "--enable-dp-attention", "--port", "30777"]
    proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while b"sglang.launch_server" not in _cmdline(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    # This test's own /proc view: the stand-in alone, whatever else runs on the machine.
    proc.view = tmp_path / "proc"
    proc.view.mkdir()
    os.symlink("/proc/%d" % proc.pid, str(proc.view / str(proc.pid)))
    os.symlink("/proc/uptime", str(proc.view / "uptime"))
    yield proc
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _cmdline(pid):
    try:
        return Path("/proc/%d/cmdline" % pid).read_bytes()
    except OSError:
        return b""


def scan(tmp_path, *args):
    reports = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--reports-dir", str(reports),
                           "--json", *args], capture_output=True, text=True, timeout=240,
                          env=dict(os.environ, GPUDIAG_REPORTS=str(reports)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = json.loads(proc.stdout)
    host_file = reports / "runs" / run["run_id"] / "hosts" / "localhost.json"
    return host_file.read_text(encoding="utf-8")


def test_scan_stores_the_running_server(tmp_path, standin_server):
    text = scan(tmp_path, "--probes", "deployment,env,torch_caps", "--set",
                f"deployment.proc_root={standin_server.view}")
    assert HF_TOKEN not in text
    doc = json.loads(text)
    assert doc["status"] == "ok"
    deployment = doc["probes"]["deployment"]["data"]
    ours = [s for s in deployment["servers"] if s["pid"] == standin_server.pid]
    assert len(ours) == 1, deployment["servers"]
    server = ours[0]
    assert server["python"] == sys.executable
    args = server["args"]
    assert args["model_path"] == "/models/Qwen3-8B" and args["speculative_algorithm"] == "EAGLE3"
    assert args["speculative_num_draft_tokens"] == 6 and args["tp_size"] == 2
    assert args["cuda_graph_max_bs"] == 16 and args["enable_dp_attention"] is True and args["port"] == 30777
    assert server["cuda_visible_devices"] == "0,1" and server["env"]["NCCL_DEBUG"] == "WARN"
    assert deployment["interpreter"]["why"] == "live_server"
    assert sys.executable in deployment["interpreter"]["candidates"]
    env = doc["probes"]["env"]["data"]
    assert env["gpus"]["status"] in ("ok", "skipped") and env["memory_total_mib"] > 0
    caps = doc["probes"]["torch_caps"]
    if env["torch"]["available"]:
        assert caps["status"] == "ok"
        assert caps["data"]["checks"]["cpu"]["pairs"]["int32->int64"] == "ok"
    else:
        assert caps["status"] == "skipped" and "torch is not importable" in caps["reason"]


def test_explicit_python_wins_over_the_live_server(tmp_path, standin_server):
    doc = json.loads(scan(tmp_path, "--probes", "deployment", "--python", sys.executable))
    interpreter = doc["probes"]["deployment"]["data"]["interpreter"]
    assert interpreter["why"] == "explicit" and interpreter["requested"] == sys.executable
