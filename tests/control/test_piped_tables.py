"""Tables read through a pipe keep every row on one line, no word folded: `gpudiag runs | grep finished`
finds every finished run, `gpudiag hosts | grep NAME` the host's whole row."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def gpudiag(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="40")   # even a narrow COLUMNS never folds a pipe
    return subprocess.run([sys.executable, "-m", "gpudiag", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=60)


def write_run(reports, run_id, finished, statuses):
    run = reports / "runs" / run_id
    run.mkdir(parents=True)
    hosts = [{"name": f"gpu-node-{i:03d}.datacenter.example", "status": s} for i, s in enumerate(statuses)]
    doc = {"schema": 1, "run_id": run_id, "kind": "scan", "started_at": f"2026-02-0{len(statuses)}T00:00:00Z",
           "hosts": hosts}
    if finished:
        doc["finished_at"] = "2026-02-09T00:00:00Z"
    (run / "run.json").write_text(json.dumps(doc))


def test_runs_piped_to_grep_finds_every_finished_run(tmp_path):
    reports = tmp_path / "reports"
    write_run(reports, "20260201T000000Z-scan-finished-a", True, ["ok", "unreachable", "timeout", "auth_failed"])
    write_run(reports, "20260202T000000Z-scan-finished-b", True, ["ok"] * 3 + ["probe_error"] * 2)
    write_run(reports, "20260203T000000Z-scan-cut-short", False, ["ok"])
    out = gpudiag("runs", "--reports-dir", str(reports), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    finished = [line for line in out.stdout.splitlines() if re.search(r"│ finished +│$", line)]
    assert len(finished) == 2, out.stdout
    row = next(line for line in finished if "finished-a" in line)
    assert "20260201T000000Z-scan-finished-a" in row and "1 auth_failed, 1 ok, 1 timeout, 1 unreachable" in row


def test_hosts_piped_keep_each_host_on_one_line(tmp_path):
    (tmp_path / "inventory.yaml").write_text(
        "hosts:\n  inference-node-with-a-long-name-01:\n    address: 10.200.100.11\n    user: operations\n"
        "    python: /opt/inference/serving/venvs/sglang-0.5.23/bin/python\n")
    out = gpudiag("hosts", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if "inference-node-with-a-long-name-01" in line)
    assert "operations@10.200.100.11" in row and "/opt/inference/serving/venvs/sglang-0.5.23/bin/python" in row


def test_report_piped_to_grep_finds_whole_words(tmp_path):
    """The report's console tables (answers, hosts, findings) through a pipe: a long host name, address or
    path is never folded mid-word, however narrow COLUMNS is."""
    long_name = "gpu-node-with-a-rather-long-name-c.datacenter.example"
    fleet = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "fleet3"
    run = tmp_path / "fleet3"
    (run / "hosts").mkdir(parents=True)
    (run / "run.json").write_text((fleet / "run.json").read_text().replace('"gpu-c"', f'"{long_name}"'))
    for host in (fleet / "hosts").iterdir():
        target = run / "hosts" / host.name.replace("gpu-c", long_name)
        target.write_text(host.read_text().replace('"gpu-c"', f'"{long_name}"'))
    out = gpudiag("report", str(run), cwd=tmp_path)
    assert out.returncode == 3, out.stderr   # a host not reached
    lines = out.stdout.splitlines()
    for word in (long_name, "gpu-c.lab.internal:22:", "/opt/sglang/.venv/bin/python;", "/srv/sglang-dev/.venv/bin/python;"):
        assert any(word in line for line in lines), (word, out.stdout)
    host_row = next(line for line in lines if line.startswith("│ " + long_name))
    assert "unreachable" in host_row
