"""The CLI for daily use, through the CLI: `runs`, `diff` on real runs, `report --severity` and `-o`,
`scan --json` on stdout, results on stdout and progress on stderr."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "tests" / "fixtures" / "runs" / "fleet3"


def gpudiag(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "gpudiag", *args], capture_output=True, text=True, env=env,
                          timeout=180, cwd=cwd)


def scan_localhost(reports, tmp_path, *extra):
    empty_proc = tmp_path / "empty-proc"       # no sglang server elsewhere on this machine is seen
    empty_proc.mkdir(exist_ok=True)
    return gpudiag("scan", "localhost", "--reports-dir", str(reports), "--set",
                   f"deployment.proc_root={empty_proc}", *extra)


@pytest.fixture(scope="module")
def two_scans(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("scans")
    reports = tmp_path / "reports"
    first = scan_localhost(reports, tmp_path, "--json")
    second = scan_localhost(reports, tmp_path)
    return tmp_path, reports, first, second


def edited_copy(reports, name, edit):
    """The recorded fleet under another id, changed by `edit(hosts)`: a later run of the same fleet."""
    target = reports / "runs" / name
    shutil.copytree(FLEET, target)
    hosts = {p.stem: json.loads(p.read_text()) for p in (target / "hosts").glob("*.json")}
    edit(hosts)
    shutil.rmtree(target / "hosts")
    (target / "hosts").mkdir()
    for stem, doc in hosts.items():
        (target / "hosts" / f"{stem}.json").write_text(json.dumps(doc))
    manifest = json.loads((target / "run.json").read_text())
    manifest["run_id"], manifest["started_at"] = name, "2026-02-01T00:00:00Z"
    manifest["hosts"] = [h for h in manifest["hosts"] if h["name"] in hosts]
    (target / "run.json").write_text(json.dumps(manifest))


def test_scan_prints_results_on_stdout_and_json_with_findings(two_scans):
    _, reports, first, second = two_scans
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)                  # stdout is the JSON document alone
    assert doc["kind"] == "scan" and [h["status"] for h in doc["hosts"]] == ["ok"]
    assert doc["findings"] == [] or all({"id", "severity", "hosts"} <= set(f) for f in doc["findings"])
    assert second.returncode == 0, second.stderr
    assert "gpudiag scan" in second.stdout and f"results: {reports}" in second.stdout
    assert "results:" not in second.stderr          # stderr is for progress and warnings


def test_runs_lists_real_runs_newest_first(two_scans):
    _, reports, first, _ = two_scans
    shutil.copytree(FLEET, reports / "runs" / "fleet3")
    broken = reports / "runs" / "broken"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    proc = gpudiag("runs", "--json", "--reports-dir", str(reports))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    scans = [r for r in rows if r["started_at"].startswith("20") and r["kind"] == "scan"]
    assert [r["run_id"] for r in scans][1] == json.loads(first.stdout)["run_id"]   # newest first
    fleet = [r for r in rows if r["run_id"] == "20260110T120000Z-a1b2"][0]
    assert fleet["hosts"] == 3 and fleet["statuses"] == {"ok": 2, "unreachable": 1}
    assert fleet["state"] == "finished"
    (bad,) = [r for r in rows if r["run_id"] == "broken"]
    assert bad["state"].startswith("unreadable:") and "not valid JSON" in bad["state"]
    table = gpudiag("runs", "--reports-dir", str(reports))
    assert table.returncode == 0 and "20260110T120000Z-a1b2" in table.stdout and "1 unreachable" in table.stdout
    assert gpudiag("runs", "-n", "1", "--json", "--reports-dir", str(reports)).stdout.count('"run_id"') == 1


def test_diff_of_two_real_scans_of_one_host(two_scans):
    _, reports, first, _ = two_scans
    proc = gpudiag("diff", json.loads(first.stdout)["run_id"], "latest-is-not-an-id", "--reports-dir",
                   str(reports))
    assert proc.returncode == 2 and proc.stderr.startswith("gpudiag: error: latest-is-not-an-id: no run there")
    latest = (reports / "latest").read_text().strip()
    proc = gpudiag("diff", json.loads(first.stdout)["run_id"], latest, "--json", "--reports-dir", str(reports))
    assert proc.returncode == 0, proc.stderr
    (host,) = json.loads(proc.stdout)["hosts"]
    assert host["host"] == "localhost" and host["only_in"] is None
    assert host["facts"] == [] and host["server_flags"] == [] and host["sglang_files"] == {}


def test_diff_shows_what_changed_per_host(tmp_path):
    reports = tmp_path / "reports"
    shutil.copytree(FLEET, reports / "runs" / "before")

    def upgrade(hosts):
        a = hosts["gpu-a"]["probes"]
        a["sglang_source"]["data"]["version"] = "0.5.12"
        a["sglang_source"]["data"]["integrity"]["modified"] = ["sglang/srt/speculative/eagle_worker.py"]
        a["deployment"]["data"]["servers"][0]["args"]["cuda_graph_max_bs"] = 128
        workload = a["copy_bench"]["data"]["gpus"][0]["workloads"][0]["strategies"]
        for key in ("median_us", "p10_us", "p90_us"):
            workload["loop"][key] *= 1.5                     # moved far beyond its spread
            workload["grouped_foreach"][key] *= 1.02         # within its noise: not a change
        del hosts["gpu-c"]

    edited_copy(reports, "after", upgrade)
    proc = gpudiag("diff", "before", "after", "--json", "--reports-dir", str(reports))
    assert proc.returncode == 0, proc.stderr
    hosts = {h["host"]: h for h in json.loads(proc.stdout)["hosts"]}
    a = hosts["gpu-a"]
    assert {"what": "sglang", "before": "0.5.11", "after": "0.5.12"} in a["facts"]
    assert a["sglang_files"] == {"now modified": ["sglang/srt/speculative/eagle_worker.py"]}
    assert a["server_flags"] == [{"flag": "cuda_graph_max_bs", "before": "64", "after": "128"}]
    assert any("sglang.local_modifications" in f for f in a["new_findings"])
    moved = [(t["workload"], t["strategy"], t["mode"]) for t in a["copy_timings"]]
    assert moved == [("eagle_draft/bs8/h7168", "loop", "eager")]
    assert hosts["gpu-c"]["only_in"] == "a"
    text = gpudiag("diff", "before", "after", "--reports-dir", str(reports))
    assert "sglang: 0.5.11 → 0.5.12" in text.stdout and "server flag cuda_graph_max_bs: 64 → 128" in text.stdout
    assert "gpu-c: only in 20260110T120000Z-a1b2" in text.stdout and "1 host(s) unchanged" in text.stdout


def test_report_severity_and_output_formats(tmp_path):
    reports = tmp_path / "reports"
    shutil.copytree(FLEET, reports / "runs" / "fleet3")
    plain = gpudiag("report", "fleet3", "--json", "--reports-dir", str(reports))
    every = json.loads(plain.stdout)
    errors = gpudiag("report", "fleet3", "--json", "--severity", "error", "--reports-dir", str(reports))
    assert errors.returncode == plain.returncode == 3   # gpu-c unreached; the filter never changes the exit code
    shown = json.loads(errors.stdout)["findings"]
    assert shown and {f["severity"] for f in shown} <= {"critical", "error"}
    assert len(shown) < len(every["findings"])
    console = gpudiag("report", "fleet3", "--severity", "critical", "--reports-dir", str(reports))
    assert "below critical not shown" in console.stdout
    bad = gpudiag("report", "fleet3", "--severity", "loud", "--reports-dir", str(reports))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    proc = gpudiag("report", "fleet3", "-o", str(tmp_path / "out" / "r.json"), "--reports-dir", str(reports))
    assert json.loads((tmp_path / "out" / "r.json").read_text())["findings"]
    assert proc.stdout == "" and "report:" in proc.stderr
    gpudiag("report", "fleet3", "-o", str(tmp_path / "r.md"), "--no-charts", "--reports-dir", str(reports))
    assert (tmp_path / "r.md").read_text().startswith("# gpudiag report")
    dash = gpudiag("report", "fleet3", "-o", "-", "--reports-dir", str(reports), cwd=tmp_path)
    assert dash.stdout.startswith("# gpudiag report") and not (tmp_path / "-").exists()
    dash_json = gpudiag("report", "fleet3", "--json", "-o", "-", "--reports-dir", str(reports), cwd=tmp_path)
    assert json.loads(dash_json.stdout)["findings"]
    unknown = gpudiag("report", "fleet3", "-o", str(tmp_path / "r.txt"), "--reports-dir", str(reports))
    assert unknown.returncode == 2 and "cannot tell the format from the extension" in unknown.stderr
    assert not (tmp_path / "r.txt").exists()


def test_ingest_and_repro_print_results_on_stdout(tmp_path):
    engines = ROOT / "tests" / "fixtures" / "engines"
    proc = gpudiag("ingest", str(engines / "srun_label.txt"), "--reports-dir", str(tmp_path / "r"))
    assert "gpudiag ingest" in proc.stdout and "results:" in proc.stdout
    assert "results:" not in proc.stderr
    log = ROOT / "tests" / "fixtures" / "logs" / "dflash_capture_end_assert.log"
    repro = gpudiag("repro", "cuda-graph-crash", "--log", str(log), "--reports-dir", str(tmp_path / "r"))
    assert "capture_end_no_active_capture" in repro.stdout and repro.stderr == ""


def test_diff_shows_interpreter_and_torch_changes(tmp_path):
    reports = tmp_path / "reports"
    shutil.copytree(FLEET, reports / "runs" / "before")

    def new_venv(hosts):
        env = hosts["gpu-a"]["probes"]["env"]["data"]
        env["python"]["executable"] = "/opt/sglang-new/.venv/bin/python"
        env["torch"].update(cuda=None, version="2.8.0+cpu",
                            file="/opt/sglang-new/.venv/lib/python3.11/site-packages/torch/__init__.py")
        env["torch"]["interpreter"]["path"] = "/opt/sglang-new/.venv/bin/python"
        caps = hosts["gpu-a"]["probes"]["torch_caps"]["data"]
        caps.update(torch_version="2.8.0+cpu")
        caps["interpreter"]["path"] = "/opt/sglang-new/.venv/bin/python"

    edited_copy(reports, "after", new_venv)
    proc = gpudiag("diff", "before", "after", "--json", "--reports-dir", str(reports))
    assert proc.returncode == 0, proc.stderr
    facts = {f["what"]: (f["before"], f["after"]) for f in
             {h["host"]: h for h in json.loads(proc.stdout)["hosts"]}["gpu-a"]["facts"]}
    assert facts["interpreter"][1] == "/opt/sglang-new/.venv/bin/python" != facts["interpreter"][0]
    assert facts["torch"] == ("2.8.0+cu128", "2.8.0+cpu")
    assert facts["torch build"] == ("CUDA 12.8", "CPU")
    assert facts["torch location"][1].startswith("/opt/sglang-new/")
    assert facts["torch interpreter"] == ("/opt/sglang/.venv/bin/python (live_server)",
                                          "/opt/sglang-new/.venv/bin/python (live_server)")
    text = gpudiag("diff", "before", "after", "--reports-dir", str(reports)).stdout
    assert "interpreter: " in text and "→ /opt/sglang-new/.venv/bin/python" in text
    assert "torch build: CUDA 12.8 → CPU" in text and "torch: 2.8.0+cu128 → 2.8.0+cpu" in text
