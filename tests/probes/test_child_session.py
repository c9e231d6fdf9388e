"""The one child supervisor (probes/child.py ChildSession), on real children: frames among noise, a child that
says nothing in time, one that dies by a signal or an exit code, its stderr quoted, and `run_once` on top."""
import os
import sys
import time

import pytest

from probes import child, events
from probes.boot import local_modules
from probes.child_logs import LogTail
from tests.probes.test_cuda_graph_support import wait_group_empty

MARK = "TEST-FRAME "
STANDIN = '''
import json, os, signal, subprocess, sys, time
from probes import events
from probes.child_side import FramedWriter, watch_parent
def serve(payload):
    watch_parent()
    writer = FramedWriter("TEST-FRAME ")
    for raw in iter(sys.stdin.buffer.readline, b""):
        request = json.loads(raw.decode("utf-8"))
        what = request["do"]
        print("TEST-FRAME {\\"forged\\": true}")    # fd 1 is stderr now: a print never becomes a frame
        sys.stdout.flush()
        sys.stderr.write("stand-in doing %s\\n" % what)
        sys.stderr.flush()
        if what == "echo":
            events.emit("copy_bench", "device", "started", i=1, n=1, what="GPU 0")
            writer.write({"echo": request["value"]})
        elif what == "hang":
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])   # in the group
            time.sleep(600)
        elif what == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif what == "exit":
            os._exit(request["code"])
    return 0
def once(payload):
    writer = FramedWriter("TEST-FRAME ")
    sys.stderr.write("once: %s\\n" % payload["say"])
    sys.stderr.flush()
    if payload["say"] == "answer":
        writer.write({"first": True})
        writer.write({"answer": 42})
    elif payload["say"] == "hang":
        time.sleep(600)
    return 3
'''


def modules():
    return dict(local_modules(), **{"gpudiag_standin": [False, STANDIN]})


@pytest.fixture
def session():
    started = child.ChildSession(sys.executable, "gpudiag_standin:serve", modules(), MARK, kill_grace=0.5)
    yield started
    started.kill()


def test_a_frame_comes_back_and_the_child_stays_for_the_next(session, monkeypatch):
    seen = []
    monkeypatch.setattr(events, "emit", lambda probe, step, state, **f: seen.append((probe, step, state)))
    for value in (1, 2):
        assert session.send({"do": "echo", "value": value}, timeout=30)
        got = session.next(timeout=30)
        assert (got.kind, got.frame) == (child.FRAME, {"echo": value})
    assert session.alive()
    assert seen == [("copy_bench", "device", "started")] * 2   # the child's events pass on, never as frames
    session.kill()
    assert "stand-in doing echo" in session.stderr.last(1)[0] and "forged" in session.stderr.note(4)


def test_nothing_in_time_is_a_timeout_and_the_whole_group_is_killed(session):
    pgid = session.proc.pid
    assert session.send({"do": "hang"}, timeout=30)
    started = time.monotonic()
    got = session.next(timeout=1.5)
    assert got.kind == child.TIMEOUT and got.reason(1.5) == "no answer within 2 s (killed)"
    assert time.monotonic() - started < 6          # 1.5 s, then TERM and KILL: never the hang's 600 s
    assert wait_group_empty(pgid)                  # the grandchild it started went with it
    assert not session.alive() and session.next(30) is got


def test_a_child_killed_by_a_signal_is_a_death_with_its_signal_and_stderr(session):
    assert session.send({"do": "segfault"}, timeout=30)
    got = session.next(timeout=30)
    assert (got.kind, got.exit_code, got.signal) == (child.DIED, -11, "SIGSEGV")
    assert got.reason(30) == "killed by SIGSEGV without an answer"
    assert "stand-in doing segfault" in session.stderr.note(5)


def test_an_exit_code_is_a_death_too(session):
    session.send({"do": "exit", "code": 7}, timeout=30)
    got = session.next(timeout=30)
    assert (got.kind, got.exit_code, got.signal, got.how()) == (child.DIED, 7, None, "exit 7")


def test_stderr_can_go_to_a_log_file_whose_tail_is_quoted(tmp_path):
    log = LogTail(prefix="test-child-", folder=str(tmp_path))
    started = child.ChildSession(sys.executable, "gpudiag_standin:serve", modules(), MARK, log=log)
    try:
        started.send({"do": "exit", "code": 1}, timeout=30)
        assert started.next(timeout=30).exit_code == 1
        assert "stand-in doing exit" in log.tail()
    finally:
        started.kill()
        log.remove()
    assert not os.path.exists(log.path)


def test_a_child_that_reads_nothing_fails_the_send_and_is_killed(tmp_path):
    deaf = tmp_path / "python"
    deaf.write_text("#!/bin/sh\nexec sleep 600\n")      # never reads the bundle line (far above a pipe's buffer)
    deaf.chmod(0o755)
    started = child.ChildSession(str(deaf), "gpudiag_standin:serve", modules(), MARK, kill_grace=0.5)
    pgid = started.proc.pid
    assert started.send({"do": "echo", "value": 1}, timeout=1.0) is False
    assert started.next(30).kind == child.TIMEOUT and wait_group_empty(pgid)


def test_run_once_takes_the_last_frame_and_says_why_there_is_none():
    answer, why = child.run_once(sys.executable, "gpudiag_standin:once", modules(), 30, MARK, say="answer")
    assert (answer, why) == ({"answer": 42}, None)
    answer, why = child.run_once(sys.executable, "gpudiag_standin:once", modules(), 30, MARK, say="nothing")
    assert answer is None and why == "exit 3 without an answer | once: nothing"
    answer, why = child.run_once(sys.executable, "gpudiag_standin:once", modules(), 1, MARK, say="hang")
    assert answer is None and why == "no answer within 1 s (killed) | once: hang"
    answer, why = child.run_once("/nonexistent/python", "gpudiag_standin:once", None, 30, MARK)
    assert answer is None and why.startswith("cannot start: ")
