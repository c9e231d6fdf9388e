"""End to end, as an operator runs it: `gpudiag scan localhost`, then `gpudiag report --markdown`, both as
subprocesses over a temporary reports directory; the report must name this host's real facts."""
import importlib.metadata
import json
import platform
import socket
import subprocess
import sys

import pytest


def gpudiag(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gpudiag", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def torch_version():
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    work = tmp_path_factory.mktemp("e2e")
    reports = work / "reports"
    scan = gpudiag("scan", "localhost", "--python", sys.executable, "--reports-dir", reports, cwd=work)
    assert scan.returncode in (0, 3), scan.stderr      # 3: a probe could not run here (e.g. no GPU tools)
    return work, reports


def test_markdown_report_names_this_hosts_real_facts(scanned):
    work, reports = scanned
    out = work / "FINDINGS.md"
    report = gpudiag("report", "--markdown", "-o", out, "--reports-dir", reports, cwd=work)
    assert report.returncode in (0, 1), report.stderr
    assert out.read_text(encoding="utf-8").startswith("# gpudiag report — run ")
    text = out.read_text(encoding="utf-8") + (work / "FINDINGS.appendix.md").read_text(encoding="utf-8")
    assert socket.gethostname() in text
    assert platform.python_version() in text
    # The appendix says which Python sglang was looked for in, and why that one.
    assert f"Read from `{sys.executable}` (chosen: explicit)" in text
    version = torch_version()
    if version is None:
        pytest.skip("torch is not installed in this interpreter, so there is no torch version to find")
    assert version.split("+")[0] in text
    assert "#### torch capabilities" in text and "| cpu | ok |" in text     # torch_caps' CPU check, as a table


def test_json_report_exit_status_matches_its_findings(scanned):
    work, reports = scanned
    report = gpudiag("report", "--json", "--reports-dir", reports, cwd=work)
    doc = json.loads(report.stdout)
    assert report.returncode == (1 if doc["summary"]["has_errors"] else 0)
    [host] = doc["hosts"]
    assert host["name"] == "localhost" and host["hostname"] == socket.gethostname()
