"""The GPUs a live server holds, counted as sglang counts them, through `gpudiag repro cuda-graph-crash --plan`:
a server started `--tp 4 --pp-size 2` holds eight GPUs (sglang gives pp rank p, tp rank t the GPU
base + p * tp + t), and a container given GPUs 2,3 (NVIDIA_VISIBLE_DEVICES) holds the host's 2 and 3, so even
`--force` plans on none of them. The server is a /proc entry as the deployment probe reads it
(GPUDIAG_PROC_ROOT) and nvidia-smi a stand-in listing eight idle H200s: nothing of this machine takes part."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NVIDIA_SMI = r'''#!%s
import sys
args = sys.argv[1:]
if any(a.startswith("--query-gpu") for a in args):
    for i in range(8):
        print("%%d, NVIDIA H200, GPU-%%08d-0000-0000-0000-000000000000, 00000000:%%02X:00.0, 143771, 0, 0, "
              "580.159.04, 9.0" %% (i, i, 0x18 + 16 * i))
elif args == ["--version"]:
    print("NVIDIA-SMI version  : 580.159.04\nCUDA Version        : 13.0")
''' % sys.executable


def plan(tmp_path, server_args, environ=b""):
    proc_root = tmp_path / "proc"
    pid = proc_root / "4242"
    pid.mkdir(parents=True)
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/none", *server_args,
            "--port", "30077"]
    (pid / "cmdline").write_bytes(b"\0".join(word.encode() for word in argv) + b"\0")
    (pid / "environ").write_bytes(b"PATH=/usr/bin\0" + environ)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = dict(os.environ, GPUDIAG_PROC_ROOT=str(proc_root), PATH="%s:%s" % (bin_dir, os.environ["PATH"]))
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "repro", "cuda-graph-crash", "localhost", "--plan",
                           "--json", "--mode", "synthetic", "--force", "--timeout", "120"],
                          capture_output=True, text=True, timeout=200, env=env, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)["gpus"]


def test_a_server_with_tp_4_and_pp_size_2_holds_eight_gpus(tmp_path):
    gpus = plan(tmp_path, ["--tp", "4", "--pp-size", "2"])
    # Counted as tp x dp it held 0-3 and --force planned on 4-7, which its second pipeline stage serves.
    assert gpus["gpus"] == [], gpus
    assert "GPU7" in gpus["why"] and "never" in gpus["why"]


def test_a_container_on_gpus_2_and_3_holds_the_hosts_gpus_2_and_3(tmp_path):
    gpus = plan(tmp_path, ["--tp", "2"], b"NVIDIA_VISIBLE_DEVICES=2,3\0")
    # Counted from --base-gpu-id alone it held 0 and 1, and --force planned on 2 and 3: the container's own.
    assert gpus["gpus"] == [0, 1], gpus
