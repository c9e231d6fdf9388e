"""Child isolation: a worker child that segfaults, aborts, hangs or raises becomes a result, never a crash."""
import os
import signal
import subprocess
import sys

import pytest

from probes.boot import local_modules
from probes.graphrepro.worker import Worker
from tests.probes.test_cuda_graph_support import wait_group_empty

CRASHY = '''
import os, signal, time
def segfault(args):
    os.kill(os.getpid(), signal.SIGSEGV)
def abort(args):
    os.abort()
def hang(args):
    time.sleep(600)
def explode(args):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")
def noisy(args):
    import sys
    print("a library print that must not corrupt the result channel")
    sys.stderr.write("Capture cuda graph failed: stand-in\\n")
    sys.stderr.flush()
    return {"status": "ok", "value": args["x"] * 2}
'''


@pytest.fixture
def worker():
    modules = local_modules()
    modules["crashy"] = [False, CRASHY]
    w = Worker(modules=modules)
    yield w
    w.close()
    w.remove_logs()


def test_answer_survives_prints_and_the_child_is_reused(worker):
    first = worker.call("crashy:noisy", {"x": 21}, timeout=30)
    second = worker.call("crashy:noisy", {"x": 2}, timeout=30)
    assert first == {"status": "ok", "value": 42}
    assert second["value"] == 4
    assert worker.starts == 1
    assert "Capture cuda graph failed: stand-in" in worker.log_tail()


@pytest.mark.parametrize("handler, signal_name", [("crashy:segfault", "SIGSEGV"), ("crashy:abort", "SIGABRT")])
def test_native_crash_is_reported_with_its_signal(worker, handler, signal_name):
    result = worker.call(handler, {}, timeout=30)
    assert result["status"] == "died"
    assert result["signal"] == signal_name
    assert signal_name in result["detail"]
    # The next call gets a fresh child.
    assert worker.call("crashy:noisy", {"x": 1}, timeout=30)["value"] == 2
    assert worker.starts == 2


def test_hang_is_killed_at_the_timeout_with_its_group(worker):
    result = worker.call("crashy:hang", {}, timeout=1.5)
    assert result["status"] == "timeout"
    assert "1 s" in result["detail"] or "2 s" in result["detail"]
    assert worker.proc is None


def test_hang_leaves_no_process(worker):
    worker.call("crashy:noisy", {"x": 1}, timeout=30)
    pgid = worker.proc.pid
    worker.call("crashy:hang", {}, timeout=1.0)
    assert wait_group_empty(pgid)


def test_exception_becomes_error_data(worker):
    result = worker.call("crashy:explode", {}, timeout=30)
    assert result["status"] == "error"
    assert "illegal memory access" in result["detail"]
    assert any("explode" in line for line in result["traceback"])


def test_synthetic_cell_without_cuda_is_skipped_with_reason(worker):
    result = worker.call("probes.graphrepro.synthetic:run_cell",
                         {"path": "dflash_verify", "batch_size": 4, "draft_tokens": 8}, timeout=120)
    import torch
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA: the cell runs for real (tests/gpu covers it)")
    assert result["status"] == "skipped"
    assert "CUDA is not available" in result["detail"]


def test_a_hung_child_dies_with_its_killed_parent():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys, threading; sys.path.insert(0, %r)\n"
            "from probes.boot import local_modules\n"
            "from probes.graphrepro.worker import Worker\n"
            "m = local_modules(); m['crashy'] = [False, %r]\n"
            "w = Worker(modules=m)\n"
            "w.call('crashy:noisy', {'x': 1}, timeout=60)\n"
            "print(w.proc.pid, flush=True)\n"
            "w.call('crashy:hang', {}, timeout=600)\n" % (root, CRASHY))
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    pgid = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)   # the runner killed by the control side's Ctrl-C
    parent.wait()
    assert wait_group_empty(pgid)


def test_a_child_that_cannot_start_is_a_result():
    worker = Worker(python="/bin/false")
    try:
        result = worker.call("crashy:noisy", {"x": 1}, timeout=30)
    finally:
        worker.close()
        worker.remove_logs()
    assert result["status"] == "died" and result["exit_code"] == 1
    assert result["detail"] == "child exited with code 1"
