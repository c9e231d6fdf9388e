"""`gpudiag scan` reads each live server's log on the host and classifies it there: stand-in sglang servers
whose stdout or stderr is a file (or whose log the inventory names), scanned locally and over real sshd.

The logs they write are real: the DFlash capture failure quoted in sglang #35437, and the line sglang
0.5.23's dflash_worker_v2.py logs when it keeps the draft eager under DP attention.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "corpus"
SECRET = "sk-live-ServerLogSecret0123456789"
# sglang 0.5.23 sglang/srt/speculative/dflash_worker_v2.py, logged through sglang's "[time TPn] " format.
DFLASH_EAGER = ("[2026-09-01 10:00:05 TP0] Disable DFLASH draft cuda graph because dp attention is enabled "
                "(draft runs eager).")


def corpus_text(name):
    return "\n".join(l for l in (CORPUS / name).read_text().splitlines() if not l.startswith("#fixture ")) + "\n"


class StandIn:
    """`python -m sglang.launch_server ...` that writes a log, then idles until killed (by its group)."""

    def __init__(self, root, log_text, stdout=None, stderr=None, extra_args=()):
        package = root / "sglang"
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text("")
        (root / "log.txt").write_text(log_text)
        (package / "launch_server.py").write_text(
            "import sys, time\n"
            "text = open(%r).read()\n"
            "(sys.stderr if '--to-stderr' in sys.argv else sys.stdout).write(text)\n"
            "sys.stdout.flush(); sys.stderr.flush()\n"
            "print('ready', file=open(%r, 'w'), flush=True)\n"
            "time.sleep(300)\n" % (str(root / "log.txt"), str(root / "written")))
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/Qwen3-8B",
                "--speculative-algorithm", "DFLASH", "--api-key", SECRET, *extra_args]
        self.proc = subprocess.Popen(argv, env=dict(os.environ, PYTHONPATH=str(root)), start_new_session=True,
                                     stdout=stdout or subprocess.DEVNULL, stderr=stderr or subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while not (root / "written").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (root / "written").exists(), "stand-in server did not start"

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)


@pytest.fixture
def standins(tmp_path):
    started = []

    def start(name, log_text, **kwargs):
        server = StandIn(tmp_path / name, log_text, **kwargs)
        started.append(server)
        return server
    yield start
    for server in started:
        server.stop()


def proc_view(tmp_path, servers):
    """A /proc of the stand-ins alone (links to their real entries): servers that other work runs on this
    machine are not the test's."""
    view = tmp_path / "proc"
    view.mkdir()
    for server in servers:
        (view / str(server.proc.pid)).symlink_to("/proc/%d" % server.proc.pid)
    return view


def scan_local(tmp_path, servers, *args):
    reports = tmp_path / "reports"
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "scan", "localhost", "--probes", "deployment",
                           "--reports-dir", str(reports), "--json", *args], capture_output=True, text=True,
                          timeout=240, env=dict(os.environ, GPUDIAG_REPORTS=str(reports),
                                                GPUDIAG_PROC_ROOT=str(proc_view(tmp_path, servers))))
    run = json.loads(proc.stdout)
    text = (reports / "runs" / run["run_id"] / "hosts" / "localhost.json").read_text()
    return proc, reports, run, text


def test_a_scan_answers_the_dflash_question_from_the_live_servers_log(tmp_path, standins):
    log_file = tmp_path / "server.log"
    with open(log_file, "w") as out:
        failed = standins("failed", corpus_text("sglang_35437_dflash_breakable_capture_end.log")
                          .replace("DFLASH \\", "DFLASH --api-key %s \\" % SECRET), stdout=out)
    eager_file = tmp_path / "eager.log"
    with open(eager_file, "w") as err:
        eager = standins("eager", DFLASH_EAGER + "\n", stderr=err, extra_args=("--to-stderr",))
    piped = standins("piped", "nothing\n", stdout=subprocess.PIPE)

    proc, reports, run, text = scan_local(tmp_path, [failed, eager, piped])
    assert proc.returncode == 1, proc.stderr[-2000:]     # an error finding: the logged crash
    assert SECRET not in text and "--mamba-radix-cache-strategy" not in text   # only matched lines travel
    logs = json.loads(text)["probes"]["deployment"]["data"]["server_logs"]

    mine = logs[str(failed.proc.pid)]
    assert mine["source"] == {"kind": "stdout", "where": "/proc/%d/fd/1" % failed.proc.pid, "path": str(log_file)}
    assert mine["outcome"] == "known_signature" and mine["advice_assumes"] == "sglang 0.5.14+"
    crash = mine["crashes"][0]
    assert crash["signature"]["name"] == "capture_end_no_active_capture"
    assert "--disable-prefill-cuda-graph" in crash["signature"]["recommendation"]
    assert mine["dflash_draft_graph"]["state"] == "capture_failed"
    assert any("--api-key <redacted>" in q["text"] for q in crash["quoted"])

    disabled = logs[str(eager.proc.pid)]["dflash_draft_graph"]
    assert logs[str(eager.proc.pid)]["source"]["kind"] == "stderr"
    assert disabled["state"] == "disabled" and disabled["line"] == 1
    assert disabled["reason"] == "dp attention is enabled (draft runs eager)."

    assert logs[str(piped.proc.pid)]["source"] is None
    assert "stdout is pipe" in logs[str(piped.proc.pid)]["reason"]

    report = subprocess.run([sys.executable, "-m", "gpudiag", "report", run["run_id"], "--reports-dir",
                             str(reports), "--json"], capture_output=True, text=True, timeout=120)
    findings = json.loads(report.stdout)["findings"]
    titles = [f["title"] for f in findings]
    assert "DFlash draft graph disabled at startup: dp attention is enabled (draft runs eager)." in titles
    assert any(f["id"] == "cuda_graph.log_crash" and "capture_end_no_active_capture" in f["title"]
               and f["hosts"] == ["localhost"] for f in findings)
    # The answers use the logs: sglang's source was not read here (no sglang installed), the logs still say.
    answers = {q["id"]: [a["answer"] for a in q["answers"]] for q in json.loads(report.stdout)["answers"]["questions"]}
    [q4] = answers["Q4"]
    assert q4.startswith("DFlash draft graph ") and "at startup: " in q4 and "(server log; source not read" in q4
    [q6] = answers["Q6"]
    assert q6.startswith("server log: ") and "capture" in q6.lower()


def test_over_ssh_the_inventory_names_the_log(sshd_fleet, tmp_path, standins):
    log_file = tmp_path / "named.log"
    log_file.write_text(corpus_text("sglang_35437_dflash_breakable_capture_end.log"))
    os.chmod(tmp_path, 0o755)
    server = standins("named", "not the log\n", stdout=subprocess.PIPE)
    inventory = sshd_fleet.write_inventory(tmp_path / "inventory.yaml", ["h0"],
                                           extra={"h0": {"server_log": str(log_file)}})
    proc = sshd_fleet.run_gpudiag("scan", "-i", str(inventory), "h0", "--probes", "deployment", "--json",
                                  timeout=120)
    run, hosts = sshd_fleet.load_run(proc)
    assert hosts["h0"]["status"] == "ok", proc.stderr[-2000:]
    logs = hosts["h0"]["probes"]["deployment"]["data"]["server_logs"]
    mine = logs[str(server.proc.pid)]
    assert mine["source"] == {"kind": "inventory", "where": "server_log", "path": str(log_file)}
    assert mine["crashes"][0]["family"] == "capture_failure"
    assert mine["crashes"][0]["signature"]["name"] == "capture_end_no_active_capture"
    assert mine["dflash_draft_graph"]["state"] == "capture_failed"
    assert "--disable-prefill-cuda-graph" in mine["crashes"][0]["signature"]["recommendation"]
