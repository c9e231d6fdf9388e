"""A 1,000-host run over a fake transport that replays a recorded host's frame: killed with SIGKILL mid-run, its
stored run lists all 1,000 hosts (every finished one readable, the rest never finished) from the journal;
stopped with SIGINT, run.json itself is compacted with every host and the journal is gone."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiag.run_loader import load_run

ROOT = Path(__file__).resolve().parent.parent.parent
RECORDED = ROOT / "tests" / "fixtures" / "runs" / "fleet3" / "hosts" / "gpu-a.json"
HOSTS = 1000
SCRIPT = r'''
import json, os, signal, sys
sys.path.insert(0, ROOT)
from rich.console import Console
from gpudiag.cli.runs import StoredRun, run_hosts
from gpudiag.models import CommandResult, Host
from gpudiag.orchestrator import ScanRequest

recorded = json.loads(open(RECORDED).read())
frame_doc = {"schema": 1, "python": {"executable": recorded["python"]},
             "probes": recorded["probes"]}
body = json.dumps(frame_doc)

class Replay:
    """The recorded host's frame under each run's nonce, at once."""
    def __init__(self, host):
        self.host = host
    def run(self, argv, stdin, timeout, output_limit=None, events=None):
        nonce = json.loads(stdin)["nonce"]
        return CommandResult(0, ("GPUDIAG-BEGIN %s\n%s\nGPUDIAG-END %s\n" % (nonce, body, nonce)).encode(), b"", 0.01)
    def close(self):
        pass

names = ["h%04d" % i for i in range(HOSTS)]
hosts = [Host(name=n, address=n, transport="local") for n in names]
console = Console(file=open(os.devnull, "w"))
from pathlib import Path
run = StoredRun(Path(REPORTS), "scan", console, planned=names)
stored = []
original = run.store
def store(result):
    original(result)
    stored.append(result.name)
    if len(stored) == STOP_AFTER:
        os.kill(os.getpid(), getattr(signal, SIGNAL))
run.store = store
run_hosts(run, hosts, ScanRequest(forks=16), Replay, console)
print(run.writer.dir)
'''


def run_fleet(tmp_path, signal_name, stop_after):
    code = SCRIPT.replace("ROOT", repr(str(ROOT)), 1).replace("RECORDED", repr(str(RECORDED)))
    code = code.replace("HOSTS)", f"{HOSTS})").replace("REPORTS", repr(str(tmp_path / "reports")))
    code = code.replace("STOP_AFTER", str(stop_after)).replace("SIGNAL)", f"{signal_name!r})")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    (run_dir,) = (tmp_path / "reports" / "runs").iterdir()
    return proc, run_dir


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGINT"])
def test_an_interrupted_thousand_host_run_lists_every_host(tmp_path, signal_name):
    proc, run_dir = run_fleet(tmp_path, signal_name, stop_after=400)
    assert proc.returncode == (-9 if signal_name == "SIGKILL" else 0), proc.stderr[-2000:]
    loaded = load_run(run_dir)
    statuses = {}
    for host in loaded.hosts:
        statuses.setdefault(host.status, []).append(host)
    assert len(loaded.hosts) == HOSTS and not loaded.unreadable
    finished = statuses.get("ok", [])
    assert len(finished) >= 400
    assert all(h.probes["env"].status == "ok" and h.probe_data("env") for h in finished)
    unfinished = "never_finished" if signal_name == "SIGKILL" else "interrupted"
    assert set(statuses) == {"ok", unfinished}, {k: len(v) for k, v in statuses.items()}
    manifest = json.loads((run_dir / "run.json").read_text())
    if signal_name == "SIGKILL":     # never compacted: the journal holds each finished host, one line each
        assert manifest["finished_at"] is None and manifest["hosts"] == []
        lines = (run_dir / "hosts.journal").read_text().splitlines()
        assert len(lines) == len(finished) and len(lines) < HOSTS
        # `gpudiag runs` reads the journal too: the killed run lists the hosts it finished
        from gpudiag.cli.run_list import run_rows
        [row] = run_rows(tmp_path / "reports")
        assert row["state"] == "unfinished" and row["statuses"].get("ok") == len(finished)
    else:                            # compacted at the end: run.json lists every host, the journal is gone
        assert manifest["interrupted"] is True and len(manifest["hosts"]) == HOSTS
        assert not (run_dir / "hosts.journal").exists()
        assert "\n" not in (run_dir / "run.json").read_text().rstrip("\n")   # compact JSON


def test_host_files_are_compact_json(tmp_path):
    proc, run_dir = run_fleet(tmp_path, "SIGINT", stop_after=5)
    stored = sorted((run_dir / "hosts").glob("*.json"))[0]
    text = stored.read_text()
    assert text.count("\n") == 1 and ": " not in text[:200] and json.loads(text)["name"].startswith("h")
