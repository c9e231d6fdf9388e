"""scripts/test.sh's torch install, run for real with a stand-in for $PY (it answers for pip and for the index
check, so nothing is downloaded): an installed 2.13.0 is kept, PyTorch's CPU wheel index is used where it is
reachable, pip's configured sources otherwise but only for the CPU build (`torch==2.13.0+cpu`), and without
either the script stops with one line saying how; it never asks for a plain torch==2.13.0 (PyPI's CUDA build).
Every run has pip's configuration empty (PIP_CONFIG_FILE=/dev/null, no PIP_* variables)."""
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def install_torch_function() -> str:
    text = (ROOT / "scripts" / "test.sh").read_text()
    index = re.search(r"^TORCH_CPU_INDEX=.*$", text, re.M).group(0)
    return index + "\n" + re.search(r"^install_torch\(\) \{.*?^\}", text, re.M | re.S).group(0)


def run(tmp_path, installed: bool, reachable: bool, cpu_index_has_it: bool = True, configured_has_cpu: bool = True,
        expect_rc: int = 0):
    """$PY answers the script's questions: torch installed? index reachable? and logs every pip call."""
    log = tmp_path / "pip.log"
    fake = tmp_path / "python"
    fake.write_text(f"""#!/bin/bash
if [ "$1" = -m ]; then echo "$*" >> {log}
  case "$*" in *--index-url*) exit {0 if cpu_index_has_it else 1};;
    *torch==2.13.0+cpu*) {"exit 0" if configured_has_cpu else
                          'echo "ERROR: No matching distribution found for torch==2.13.0+cpu" >&2; exit 1'};;
    *torch==2.13.0*) echo "CUDA build" >&2; exit 0;; esac; exit 0; fi
case "$2" in
  *sys.exit\\(torch*) exit {0 if installed else 1};;
  *urlopen*) exit {0 if reachable else 1};;
  *print*) echo "2.13.0+cpu (CPU build) at /venv/torch/__init__.py";;
esac
""")
    fake.chmod(0o755)
    script = f'PY={fake}\nPIP=("$PY" -m pip install -q)\n' + install_torch_function() + "\ninstall_torch\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull   # a fresh machine: pip's configuration empty
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == expect_rc, proc.stderr
    pip = log.read_text().splitlines() if log.exists() else []
    # Never the CUDA build: every install asks the CPU index or names the CPU build's local version.
    assert all("--index-url " + CPU_INDEX in call or "torch==2.13.0+cpu" in call for call in pip), pip
    return (proc.stdout if expect_rc == 0 else proc.stderr), pip


def test_an_installed_torch_is_kept(tmp_path):
    out, pip = run(tmp_path, installed=True, reachable=True)
    assert pip == []
    assert out == "test.sh: torch 2.13.0+cpu (CPU build) at /venv/torch/__init__.py, already installed\n"


def test_the_cpu_index_is_used_where_reachable(tmp_path):
    out, pip = run(tmp_path, installed=False, reachable=True)
    assert pip == [f"-m pip install -q --index-url {CPU_INDEX} torch==2.13.0"]
    assert out.endswith(f"(CPU build) at /venv/torch/__init__.py, from PyTorch's CPU wheel index {CPU_INDEX}\n")


@pytest.mark.parametrize("reachable, why", [
    (False, f"{CPU_INDEX} is not reachable from here"),
    (True, f"installing from {CPU_INDEX} failed"),
])
def test_pips_configured_sources_otherwise_and_the_line_says_why(tmp_path, reachable, why):
    out, pip = run(tmp_path, installed=False, reachable=reachable, cpu_index_has_it=False)
    assert pip[-1] == "-m pip install -q torch==2.13.0+cpu"
    assert out.endswith(f", the CPU build from pip's configured sources: {why}\n")


@pytest.mark.parametrize("reachable", [False, True])
def test_without_a_cpu_build_anywhere_it_stops_with_one_line_saying_how(tmp_path, reachable):
    err, pip = run(tmp_path, installed=False, reachable=reachable, cpu_index_has_it=False,
                   configured_has_cpu=False, expect_rc=1)
    assert pip[-1] == "-m pip install -q torch==2.13.0+cpu"
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("test.sh: no CPU build of torch 2.13.0 to install: ")
    assert "No matching distribution found for torch==2.13.0+cpu" in err
    assert f"pip install --index-url {CPU_INDEX} torch==2.13.0" in err and "PIP_FIND_LINKS=" in err
