"""A deep scan under a serving Python that has sglang (a real wheel) and no torch: the GPU checks cannot run, so
the host is incomplete (exit 4) and every sglang answer read from the source is kept, in the scan's summary, its
exit code and the report alike."""
import json
import os
import subprocess
import sys
import venv

from tests.sglang_wheels import require


def _python_without_torch(tmp_path, version):
    site = require(version)
    root = tmp_path / "serving-venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(root)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "serving-venv" / purelib / "sglang-wheel.pth").write_text(str(site) + "\n")
    return str(python)


def _gpudiag(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "gpudiag", *args, "--reports-dir", str(tmp_path / "reports")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=dict(os.environ, GPUDIAG_REPORTS=str(tmp_path / "reports")))


def test_deep_scan_without_torch_is_incomplete_and_keeps_the_sglang_answers(tmp_path):
    python = _python_without_torch(tmp_path, "0.5.23")
    (tmp_path / "proc").mkdir()  # an empty process table: no live server chooses another interpreter
    scan = _gpudiag(tmp_path, "scan", "localhost", "--deep", "--python", python,
                    "--set", f"deployment.proc_root={tmp_path / 'proc'}")
    assert scan.returncode == 4, scan.stdout[-2000:] + scan.stderr[-2000:]
    assert "localhost: incomplete" in scan.stdout
    assert "Traceback" not in scan.stdout + scan.stderr
    report = _gpudiag(tmp_path, "report", "--json")
    assert report.returncode == 4, report.stderr[-2000:]
    out = json.loads(report.stdout)
    assert [(h["name"], h["status"]) for h in out["hosts"]] == [("localhost", "ok")]
    reasons = out["verdict"]["incomplete_hosts"][0]["reasons"]
    assert any(r.startswith("cuda_graph:") for r in reasons) and any(r.startswith("copy_bench:") for r in reasons)
    # No probe's data was refused: the probes emit what their shapes declare.
    assert not any("does not fit its declaration" in r for r in reasons), reasons
    answers = {q["id"]: q["answers"] for q in out["answers"]["questions"]}
    for qid in ("Q2", "Q3", "Q4", "Q7"):
        assert [a["status"] for a in answers[qid]] == ["answered"], (qid, answers[qid])
    assert "0.5.23" in answers["Q7"][0]["answer"]
    assert answers["Q5"][0]["status"] == "not checked" and answers["Q6"][0]["status"] == "not checked"
    # The interpreter was given: the answer does not tell the user to point --python at it again.
    assert "point --python" not in answers["Q1"][0]["answer"] and python in answers["Q1"][0]["answer"]
