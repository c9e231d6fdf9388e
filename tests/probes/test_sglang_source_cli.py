"""sglang_source through the CLI: `gpudiag scan localhost --probes sglang_source`, stored JSON checked."""
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.sglang_wheels import require

ROOT = Path(__file__).resolve().parents[2]


def run_scan(tmp_path, *args):
    reports = tmp_path / "reports"
    argv = [sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "sglang_source",
            "--reports-dir", str(reports), "--json", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=str(tmp_path),
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_id = json.loads(proc.stdout)["run_id"]
    [host_file] = (reports / "runs" / run_id / "hosts").glob("*.json")
    host = json.loads(host_file.read_text())
    probe = host["probes"]["sglang_source"]
    assert probe["status"] == "ok", probe
    return probe["data"]


def test_scan_with_site_packages_setting(tmp_path):
    site = require("0.5.23")
    data = run_scan(tmp_path, "--set", "sglang_source.site_packages=%s" % site)
    assert data["found"] and data["version"] == "0.5.23" and data["site_packages"] == str(site)
    assert len(data["grouped_foreach_copy"]["definitions"]) == 2
    assert data["eagle"]["draft"]["batched"] is True and data["eagle"]["draft"]["hidden_states_separate"] is True
    assert data["dflash"]["worker_file"].endswith("dflash_worker_v2.py")
    assert data["integrity"]["method"] == "record" and data["integrity"]["modified"] == []
    assert data["eagle"]["draft_extend"]["grouped_fields"][-1] == "mamba_track_indices"
    sites = {s["qualname"]: s for s in data["grouped_foreach_copy"]["call_sites"]}
    assert sites["CudaGraphBufferRegistry.fill_from"]["fields"] == []
    assert sites["CudaGraphBufferRegistry.fill_from"]["dynamic_fields"][0].startswith("slot.buffer for each slot")
    assert all(s["reachable"] for s in sites.values())
    flags = {f["name"]: f for f in data["server_flags"]}
    assert "dummy" in flags["--load-format"]["choices"] and flags["--model-path"]["via"] == "field"


def test_scan_marks_0_5_14_dead_populate_call_site_unreachable(tmp_path):
    data = run_scan(tmp_path, "--set", "sglang_source.site_packages=%s" % require("0.5.14"))
    [dead] = [s for s in data["grouped_foreach_copy"]["call_sites"] if not s["reachable"]]
    assert dead["qualname"] == "DecodeInputBuffers.populate_from_forward_batch"
    assert "nothing in the package refers to populate_from_forward_batch" in dead["unreachable"]


def test_scan_with_python_pointing_at_a_venv(tmp_path):
    site = require("0.5.11")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # The venv sees the unpacked wheel through a .pth file, as it would an installed one.
    Path(purelib, "sglang-wheel.pth").write_text(str(site) + "\n")
    data = run_scan(tmp_path, "--python", str(python))
    assert data["interpreter"] == {"path": str(python), "why": "explicit"}
    assert data["found"] and data["version"] == "0.5.11" and data["site_packages"] == str(site)
    [definition] = data["grouped_foreach_copy"]["definitions"]
    assert definition["file"] == "sglang/srt/model_executor/cuda_graph_runner.py"
    assert data["eagle"]["draft"]["batched"] is False
