"""No probe touches a live sglang server's GPU, not even with --force (marked gpu: skipped without CUDA).

A stand-in `python -m sglang.launch_server` holds memory on GPU 0 (CUDA_VISIBLE_DEVICES=0); the probes run through
`python -m probes --force` with deployment's /proc view holding only that stand-in.
"""
import json
import os
import subprocess
import sys

import pytest

from probes import gpu_layer

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOLDER = ("import sys, time, torch\n"
          "x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda:0')\n"
          "torch.cuda.synchronize()\nprint('ready', flush=True)\ntime.sleep(600)\n")


def test_torch_caps_copy_bench_and_cuda_graph_leave_a_live_servers_gpu_alone(tmp_path):
    (tmp_path / "stand_in" / "sglang").mkdir(parents=True)
    (tmp_path / "stand_in" / "sglang" / "__init__.py").write_text("")
    (tmp_path / "stand_in" / "sglang" / "launch_server.py").write_text(HOLDER)
    server = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", "--model-path", "/m", "--port", "30999"],
                              cwd=str(tmp_path / "stand_in"), env=dict(os.environ, CUDA_VISIBLE_DEVICES="0"),
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        proc_view = tmp_path / "proc"
        proc_view.mkdir()
        os.symlink("/proc/%d" % server.pid, str(proc_view / str(server.pid)))
        os.symlink("/proc/uptime", str(proc_view / "uptime"))
        argv = [sys.executable, "-m", "probes", "--probes", "torch_caps,copy_bench,cuda_graph", "--force",
                "--nonce", "T", "--set", "deployment.proc_root=%s" % proc_view,
                "--set", "copy_bench.gpus=[0]", "--set", "copy_bench.batch_sizes=[1]",
                "--set", "copy_bench.hidden_sizes=[64]", "--set", "copy_bench.sweep_max_bytes=65536",
                "--set", "cuda_graph.mode=synthetic", "--set", "cuda_graph.batch_sizes=[1]",
                "--set", "cuda_graph.draft_tokens=[2,2]", "--set", "cuda_graph.algorithms=[\"EAGLE\"]"]
        out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    finally:
        os.killpg(server.pid, 9)
        server.wait(timeout=30)
    text = out.stdout.split("GPUDIAG-BEGIN T\n", 1)[1].split("\nGPUDIAG-END T", 1)[0]
    probes = json.loads(text.replace("\n", ""))["probes"]
    assert [s["pid"] for s in probes["deployment"]["data"]["servers"]] == [server.pid]
    caps = probes["torch_caps"]["data"]["checks"]["cuda:0"]
    assert caps["status"] == "skipped" and gpu_layer.NEVER in caps["reason"], caps
    bench = probes["copy_bench"]
    assert bench["status"] == "skipped" and gpu_layer.NEVER in bench["reason"], bench
    graph = probes["cuda_graph"]["data"]
    # A one-GPU host has nothing left to use; on a larger one the repro may take another GPU, never GPU 0.
    if graph["gpu"] is None:
        assert "never used" in graph["skip_reason"], graph["skip_reason"]
    else:
        assert graph["gpu"]["index"] != 0
