"""copy_bench's isolated child: results of devices done before a hang are kept, the hung device is blamed
and the rest run in a new child; a child whose runner is killed does not outlive it."""
import os
import signal
import subprocess
import sys
import time

from probes.boot import local_modules
from probes.copybench import child
from tests.probes.test_cuda_graph_support import wait_group_empty

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Stands in for the devices module inside the child: GPU 2 hangs in a CUDA call, the others are quick.
HANGS_ON_2 = '''
import time
def bench_all(job, emit=None, extra_strategies=None):
    out = []
    for i in job["gpus"]:
        if i == 2:
            time.sleep(3600)
        r = {"index": i, "status": "ok", "note": "measured"}
        emit(r); out.append(r)
    return out
'''

SLEEPS = '''
import os, time
def bench_all(job, emit=None, extra_strategies=None):
    with open(job["pgid_file"], "w") as fh:
        fh.write(str(os.getpgid(0)))
    time.sleep(600)
    return []
'''


def test_a_hung_gpu_keeps_the_results_before_it_and_the_rest_run_in_a_new_child(monkeypatch):
    monkeypatch.setattr(child, "GRACE_S", 1.0)
    modules = local_modules()
    modules["probes.copybench.devices"] = [False, HANGS_ON_2]
    start = time.monotonic()
    found = child.run_isolated({"device": "cuda", "gpus": [0, 1, 2, 3]}, modules, start + 16)
    assert [r["status"] for r in found] == ["ok", "ok", "timeout", "ok"]
    assert found[0] == {"index": 0, "status": "ok", "note": "measured"}
    assert found[2]["index"] == 2 and "no result within" in found[2]["reason"]
    assert time.monotonic() - start < 15


def test_the_child_dies_with_its_killed_runner(tmp_path):
    pgid_file = tmp_path / "pgid"
    code = ("import sys, time; sys.path.insert(0, %r)\n"
            "from probes.boot import local_modules\n"
            "from probes.copybench.child import run_isolated\n"
            "m = local_modules(); m['probes.copybench.devices'] = [False, %r]\n"
            "run_isolated({'device': 'cuda', 'gpus': [0], 'pgid_file': %r}, m, time.monotonic() + 300)\n"
            % (ROOT, SLEEPS, str(pgid_file)))
    runner = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 30
        while not (pgid_file.exists() and pgid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        pgid = int(pgid_file.read_text())
        runner.send_signal(signal.SIGKILL)    # the control side gave up on the runner
        runner.wait()
        assert wait_group_empty(pgid)
    finally:
        if runner.poll() is None:
            runner.kill()
