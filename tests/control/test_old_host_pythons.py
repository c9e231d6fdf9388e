"""A host Python too old for the probes is named in one line: Python 2 (which stops at the bootstrap's -I
flag) and 3.6 or 3.8 (which run the bootstrap and say their version), through `gpudiag scan localhost`."""
import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def interpreter(pattern):
    found = sorted(glob.glob(os.path.expanduser(pattern)))
    if not found:
        pytest.skip(f"no interpreter matching {pattern} on this machine")
    return found[0]


def scan_with(python, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--python", python, "--probes", "env",
                           "--json", "--reports-dir", str(tmp_path)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    run_dir = next((tmp_path / "runs").iterdir())
    return proc, json.loads(next((run_dir / "hosts").glob("*.json")).read_text())


@pytest.mark.parametrize("pattern, status, said", [
    ("~/.pyenv/versions/2.7*/bin/python2.7", "python_missing", "Python 2 (it has no -I option); the probes need Python 3.9"),
    ("~/.pyenv/versions/3.6*/bin/python3.6", "probe_error", "is older than 3.9"),
])
def test_an_old_host_python_is_named_in_one_line(tmp_path, pattern, status, said):
    python = interpreter(pattern)
    proc, host = scan_with(python, tmp_path)
    assert proc.returncode == 3, proc.stderr[-1000:]
    assert host["status"] == status and said in host["reason"] and "\n" not in host["reason"], host["reason"]
