"""Shell completion of inventory hosts and groups, as the shell asks for it (click's bash_complete
protocol through the `gpudiag` entry point): TARGETS, the last term of a pattern, --limit, -i or the
default inventory; nothing is resolved and a broken inventory completes nothing, silently."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INV = ROOT / "tests" / "fixtures" / "inventory" / "ini" / "patterns.ini"
SCRIPT = "import sys; sys.argv[0] = 'gpudiag'; from gpudiag.cli import main; main()"


def complete(words: str, cwd: Path) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), _GPUDIAG_COMPLETE="bash_complete", COMP_WORDS=words,
               COMP_CWORD=str(len(words.split()) - (0 if words.endswith(" ") else 1)),
               GPUDIAG_SSH_CONFIG=str(cwd / "no_ssh_config"))
    env.pop("ANSIBLE_INVENTORY", None)
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60,
                          cwd=cwd)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if line]


@pytest.mark.parametrize("command", ["hosts", "scan", "repro cuda-graph-crash"])
def test_targets_complete_groups_then_hosts(tmp_path, command):
    assert complete(f"gpudiag {command} -i {INV} gp", tmp_path) == [
        "gpus", "gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-05", "gpu-06"]


def test_the_last_term_of_a_pattern_completes(tmp_path):
    assert complete(f"gpudiag hosts -i {INV} fleet:!ed", tmp_path) == ["fleet:!edge", "fleet:!edge-a", "fleet:!edge-b"]
    assert complete(f"gpudiag scan -i {INV} --limit h", tmp_path) == ["h100", "head-1"]


def test_the_default_inventory_completes_and_a_broken_one_completes_nothing(tmp_path):
    (tmp_path / "inventory.yaml").write_text("hosts:\n  gpu-01:\n  gpu-02:\ngroups:\n  gpus: [gpu-01, gpu-02]\n")
    assert complete("gpudiag hosts gpu", tmp_path) == ["gpus", "gpu-01", "gpu-02"]
    (tmp_path / "inventory.yaml").write_text("hosts: [unclosed\n")
    assert complete("gpudiag hosts gpu", tmp_path) == []
