"""The probes' own process stays stdlib-only: the light probes read torch (build facts, the torch.cuda GPU
fallback, torch_caps' checks) in children of the chosen interpreter and never import it themselves."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIGHT_RUN = (
    "import json, sys\n"
    "sys.path.insert(0, %r)\n"
    "from probes import runner\n"
    "doc = runner.run_all({'probes': ['deployment', 'env', 'torch_caps', 'sglang_source'],\n"
    "                      'options': {'deployment': {'proc_root': %r}, 'torch_caps': {'cuda': False}}})\n"
    "print(json.dumps({'torch_imported': 'torch' in sys.modules, 'probes': doc['probes']}))\n")


def test_light_probes_never_import_torch_in_the_probe_process(tmp_path):
    (tmp_path / "proc").mkdir()      # an empty process table: no live server to follow
    (tmp_path / "bin").mkdir()       # no nvidia-smi on PATH: env's GPU fallback goes through torch.cuda
    code = LIGHT_RUN % (ROOT, str(tmp_path / "proc"))
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PATH=str(tmp_path / "bin")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    probes = out["probes"]
    assert out["torch_imported"] is False
    env_torch = probes["env"]["data"]["torch"]
    assert env_torch["version"] == torch.__version__, env_torch
    assert env_torch["interpreter"] == {"path": sys.executable, "why": "default", "ran": "child"}
    gpus = probes["env"]["data"]["gpus"]
    assert "nvidia-smi not found on PATH" in gpus["reason"]
    if not torch.cuda.is_available():
        assert "torch sees no CUDA device" in gpus["reason"] and sys.executable in gpus["reason"]
    assert probes["torch_caps"]["status"] == "ok", probes["torch_caps"]
    assert probes["torch_caps"]["data"]["interpreter"]["path"] == sys.executable
