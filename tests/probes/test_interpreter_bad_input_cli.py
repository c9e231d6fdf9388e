"""`python -m probes --python X`: an interpreter that is missing, crashes or hangs becomes each torch probe's
skip reason, naming it; the other probes' data is kept and the run still answers."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCH_PROBES = ("torch_caps", "copy_bench", "cuda_graph")


def run_probes(python, tmp_path):
    proc_view = tmp_path / "proc"
    proc_view.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "probes", "--probes", ",".join(TORCH_PROBES), "--python", python,
            "--nonce", "T", "--probe-timeout", "15", "--set", "deployment.proc_root=%s" % proc_view,
            "--set", "env.torch=false", "--set", "torch_caps.child_timeout=4", "--set", "env.command_timeout=3",
            "--set", "copy_bench.device=cpu"]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    text = out.stdout.split("GPUDIAG-BEGIN T\n", 1)[1].split("\nGPUDIAG-END T", 1)[0]
    return json.loads(text.replace("\n", ""))["probes"]


def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("kind", ["missing", "crashing", "hanging"])
def test_a_bad_interpreter_is_each_torch_probes_reason_and_the_rest_is_kept(tmp_path, kind):
    python = {"missing": lambda: str(tmp_path / "gone" / "python3"),
              "crashing": lambda: script(tmp_path, "python3", "echo 'Fatal Python error: init_fs_encoding' >&2\n"
                                                              "kill -SEGV $$\n"),
              "hanging": lambda: script(tmp_path, "python3", "exec sleep 60\n")}[kind]()
    probes = run_probes(python, tmp_path)
    chosen = probes["deployment"]["data"]["interpreter"]
    assert chosen["path"] == python and chosen["why"] == "explicit"
    assert probes["env"]["status"] == "ok"          # the other probes' data is kept
    for name in ("torch_caps", "copy_bench"):
        result = probes[name]
        assert result["status"] == "skipped", (name, result)
        assert result["reason"].startswith("under %s (given with --python): " % python), result["reason"]
        expected = {"missing": "cannot start", "crashing": "killed by SIGSEGV without an answer",
                    "hanging": "no answer within"}[kind]
        assert expected in result["reason"], result["reason"]
    graph = probes["cuda_graph"]
    assert graph["status"] == "ok", graph
    assert python in graph["data"]["skip_reason"] and graph["data"]["interpreter"]["path"] == python
    assert all(cell["status"] == "skipped" for cell in graph["data"]["cells"])
