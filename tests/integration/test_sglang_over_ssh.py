"""sglang_source over real ssh: a real venv with a real sglang wheel installed, scanned with --python."""
import subprocess
import sys

import pytest

from tests.sglang_wheels import SkipWheel, wheel_path

VERSION = "0.5.11"


@pytest.fixture(scope="module")
def sglang_venv(tmp_path_factory):
    try:
        wheel = wheel_path(VERSION)
    except SkipWheel as exc:
        pytest.skip(str(exc))
    venv = tmp_path_factory.mktemp("sglang-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                              "--no-compile", "--disable-pip-version-check", str(wheel)],
                             capture_output=True, text=True, timeout=300)
    if install.returncode != 0:
        pytest.skip("pip could not install %s into a venv: %s" % (wheel.name, install.stderr.strip()[-200:]))
    return python


def test_scan_over_ssh_reads_the_venv_sglang(sshd_fleet, sglang_venv, tmp_path):
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"])
    proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "h0", "--probes", "sglang_source",
                                  "--python", str(sglang_venv), "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _, hosts = sshd_fleet.load_run(proc)
    host = hosts["h0"]
    assert host["status"] == "ok" and host["transport"] == "ssh"
    probe = host["probes"]["sglang_source"]
    assert probe["status"] == "ok", probe
    data = probe["data"]
    assert data["interpreter"]["path"] == str(sglang_venv)
    assert data["version"] == VERSION and data["site_packages"].startswith(str(sglang_venv.parent.parent))
    [definition] = data["grouped_foreach_copy"]["definitions"]
    assert definition["file"] == "sglang/srt/model_executor/cuda_graph_runner.py"
    assert data["grouped_foreach_copy"]["call_sites"][0]["resolves_to"]["line"] == definition["line"]
    assert data["dflash"]["present"] is True
    # pip wrote a RECORD with hashes; the files the facts come from match it.
    assert data["integrity"]["method"] == "record" and data["integrity"]["modified"] == []
    assert data["integrity"]["checked"] > 0
