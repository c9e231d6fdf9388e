"""Progress events on the host: bounded lines on the runner's stderr, relayed from children, silent after the
frame starts, and never in the frame."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from probes import cuda_graph, events
from probes.boot import local_modules
from probes.child import close_streams, parse_frame, spawn
from probes.context import ProbeContext
from probes.copybench import child

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Pipe(object):
    """Events written to a pipe for the test."""

    def __init__(self):
        self.read_fd, self.fd = os.pipe()

    def lines(self):
        events.close_stream()
        os.close(self.fd)
        data = b""
        while True:
            chunk = os.read(self.read_fd, 65536)
            if not chunk:
                return data.decode().splitlines()
            data += chunk


@pytest.fixture
def pipe():
    """A pipe the module's events go to; the sink is closed again afterwards."""
    sink = Pipe()
    events.open_stream("n0", sink.fd)
    yield sink
    events.close_stream()
    for fd in (sink.read_fd, sink.fd):
        try:
            os.close(fd)
        except OSError:
            pass


def test_an_event_is_one_tagged_line_with_capped_fields(pipe):
    events.emit("copy_bench", "device", "started", i=2, n=8, what="GPU 1 " + "x" * 5000)
    events.emit("copy_bench", "device", "finished", i=True, n="8", what="a\nb", status="ok", duration_s=1.23456)
    first, second = pipe.lines()
    assert first.startswith("GPUDIAG-EVENT n0 {") and len(first) < events.MAX_LINE
    doc = json.loads(first[len("GPUDIAG-EVENT n0 "):])
    assert doc["i"] == 2 and doc["n"] == 8 and len(doc["what"]) == events.MAX_TEXT
    doc = json.loads(second[len("GPUDIAG-EVENT n0 "):])
    assert "i" not in doc and "n" not in doc          # a bool and a string are not counts
    assert doc["what"] == "a b" and doc["duration_s"] == 1.235


def test_nothing_is_written_once_the_stream_is_closed(pipe):
    events.emit("env", "probe", "started")
    events.close_stream()
    events.emit("env", "probe", "finished", status="ok")
    assert len(pipe.lines()) == 1


class Writer(object):
    def __init__(self):
        self.lines = []

    def write_marked(self, mark, document):
        self.lines.append(mark + json.dumps(document))


def test_a_child_relays_through_its_writer_and_the_parent_forwards(pipe):
    writer = Writer()
    events.relay_through(writer)
    events.emit("copy_bench", "device", "started", i=1, n=2, what="GPU 0")
    (relayed,) = writer.lines
    assert relayed.startswith(events.CHILD_MARK)
    events.open_stream("n0", pipe.fd)
    assert events.forward(relayed) is True
    assert events.forward(events.CHILD_MARK + "{not json") is True               # dropped, still not stderr
    assert events.forward(events.CHILD_MARK + '{"probe": "x", "step": "rm -rf", "state": "started"}') is True
    assert events.forward("COPYBENCH-DEVICE {}") is False
    (line,) = pipe.lines()
    assert json.loads(line.split(" ", 2)[2]) == {"probe": "copy_bench", "step": "device", "state": "started",
                                                 "i": 1, "n": 2, "what": "GPU 0"}


def test_numbered_steps_report_each_call_and_its_status(pipe):
    steps = events.NumberedSteps("cuda_graph", "cell", 6)
    cell = steps.wrap(lambda bs, dt: {"status": "capture_failed" if dt > 4 else "ok"},
                      lambda bs, dt: "EAGLE bs=%d draft=%d" % (bs, dt))
    launch = events.NumberedSteps("cuda_graph", "launch", 3).wrap(
        lambda dt: [{"status": "ok"}, {"status": "skipped"}], lambda dt: "EAGLE draft=%d" % dt)
    assert cell(1, 8) == {"status": "capture_failed"} and cell(1, 2) == {"status": "ok"}
    launch(4)
    docs = [json.loads(line.split(" ", 2)[2]) for line in pipe.lines()]
    assert [(d["step"], d["state"], d["i"], d.get("status")) for d in docs] == [
        ("cell", "started", 1, None), ("cell", "finished", 1, "capture_failed"),
        ("cell", "started", 2, None), ("cell", "finished", 2, "ok"),
        ("launch", "started", 1, None), ("launch", "finished", 1, "ok")]
    assert docs[0]["what"] == "EAGLE bs=1 draft=8" and docs[0]["n"] == 6


def test_the_runner_streams_probe_steps_on_stderr_and_keeps_them_out_of_the_frame():
    script = textwrap.dedent("""
        import sys, types
        sys.path.insert(0, %r)
        import probes.runner as r
        from probes import events
        m = types.ModuleType("probes.stepper")
        def collect(ctx):
            events.emit("stepper", "device", "started", i=1, n=1, what="cpu")
            return {"fine": True}
        m.collect = collect
        sys.modules["probes.stepper"] = m
        declared = {"probes.stepper": [False, "PROBE = {'set': 'deep'}"]}  # how a bundle declares a probe
        r.main({"nonce": "n1", "probes": ["stepper"], "modules": declared})
    """) % ROOT
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert "GPUDIAG-EVENT" not in out
    body = out.split("GPUDIAG-BEGIN n1\n", 1)[1].split("\nGPUDIAG-END n1", 1)[0]
    assert json.loads(body)["probes"]["stepper"]["data"] == {"fine": True}
    steps = [json.loads(line.split(" ", 2)[2]) for line in err.splitlines() if line.startswith("GPUDIAG-EVENT n1 ")]
    assert [(s["probe"], s["step"], s["state"]) for s in steps] == [
        ("stepper", "probe", "started"), ("stepper", "device", "started"), ("stepper", "probe", "finished")]
    assert steps[-1]["status"] == "ok" and steps[-1]["i"] == 1 and steps[-1]["n"] == 1


EMITTER = '''
from probes import events
from probes.child_side import FramedWriter


def main(payload):
    writer = FramedWriter("ANSWER ")
    print("library noise")
    events.emit("copy_bench", "device", "started", i=1, n=1, what="GPU 0")
    writer.write({"done": True})
    return 0
'''


def test_a_real_childs_events_reach_the_runners_stream_through_its_parent(pipe):
    modules = dict(local_modules(), **{"probes.test_emitter": [False, EMITTER]})
    proc = spawn(sys.executable, "probes.test_emitter:main", modules, close_stdin=True)
    answers = []
    for raw in iter(proc.stdout.readline, b""):
        text = raw.decode()
        if not events.forward(text):
            answers.append(parse_frame("ANSWER ", text))
    proc.wait(timeout=60)
    close_streams(proc)
    assert answers == [{"done": True}]
    announced, line = pipe.lines()     # the child is named by its pid first, for a kill's follow-up
    assert announced.startswith("GPUDIAG-PROCESS n0 ") and json.loads(announced.split(" ", 2)[2])["pid"] == proc.pid
    assert line.startswith("GPUDIAG-EVENT n0 ") and '"what":"GPU 0"' in line


def test_the_runner_announces_itself_on_the_stream_and_nowhere_else(pipe):
    events.announce_process("runner")
    (line,) = pipe.lines()
    doc = json.loads(line[len("GPUDIAG-PROCESS n0 "):])
    assert line.startswith("GPUDIAG-PROCESS n0 ") and doc["pid"] == os.getpid() and doc["role"] == "runner"
    assert abs(doc["clock_s"] - time.monotonic()) < 60     # the kernel log's clock (CLOCK_MONOTONIC), not the wall
    events.announce_process("child", 5)                     # the stream is closed: silent, never raising


def test_cuda_graph_reports_each_synthetic_cell_as_k_of_at_most_k(monkeypatch):
    class FakeWorker(object):
        def __init__(self, **kwargs):
            pass

        def call(self, handler, args, timeout):
            return {"status": "ok" if args["draft_tokens"] <= 5 else "capture_failed", "detail": ""}

        def close(self):
            pass

        def remove_logs(self):
            pass

    seen = []
    monkeypatch.setattr(cuda_graph, "Worker", FakeWorker)
    monkeypatch.setattr(events, "emit", lambda probe, step, state, **f: seen.append((probe, step, state, f)))
    settings = cuda_graph.settings_from({"algorithms": ["EAGLE"], "batch_sizes": [1, 4], "draft_tokens": [2, 9]})
    data = {"cells": [], "boundaries": [], "notes": []}
    ctx = ProbeContext(options={}, deadline=time.monotonic() + 600)
    cuda_graph.run_synthetic(ctx, settings, data, {}, "", sys.executable)
    started = [f for _, step, state, f in seen if step == "cell" and state == "started"]
    finished = [f for _, step, state, f in seen if step == "cell" and state == "finished"]
    assert len(started) == len(finished) == len(data["cells"]) > 0
    assert [f["i"] for f in started] == list(range(1, len(started) + 1))
    assert all(f["n"] >= len(started) for f in started)           # K bounds what the bisection ran
    # cells are measured most informative first and stored in plan order: each stored cell was announced once
    labels = ["%s bs=%d draft=%d" % (c["path"], c["batch_size"], c["draft_tokens"]) for c in data["cells"]]
    assert sorted(f["what"] for f in started) == sorted(labels)
    assert sorted(f["status"] for f in finished) == sorted(c["status"] for c in data["cells"])


HANGS_ON_2 = '''
import time
def bench_all(job, emit=None, extra_strategies=None):
    out = []
    for i in job["gpus"]:
        if i == 2:
            time.sleep(3600)
        r = {"index": i, "status": "ok"}
        emit(r); out.append(r)
    return out
'''


def test_copy_bench_reports_gpu_i_of_n_with_each_outcome_a_hung_gpu_included(monkeypatch):
    seen = []
    monkeypatch.setattr(child, "GRACE_S", 1.0)
    monkeypatch.setattr(events, "emit", lambda probe, step, state, **f: seen.append(
        (step, state, f.get("i"), f.get("n"), f.get("what"), f.get("status"))))
    modules = dict(local_modules(), **{"probes.copybench.devices": [False, HANGS_ON_2]})
    child.run_isolated({"device": "cuda", "gpus": [0, 1, 2, 3]}, modules, time.monotonic() + 16)
    assert seen == [("device", "started", 1, 4, "GPU 0", None), ("device", "finished", 1, 4, "GPU 0", "ok"),
                    ("device", "started", 2, 4, "GPU 1", None), ("device", "finished", 2, 4, "GPU 1", "ok"),
                    ("device", "started", 3, 4, "GPU 2", None), ("device", "finished", 3, 4, "GPU 2", "timeout"),
                    ("device", "started", 4, 4, "GPU 3", None), ("device", "finished", 4, 4, "GPU 3", "ok")]
