"""The benchmark in a child process, so a CUDA fault, a crash in graph capture or a hung GPU cannot take
the probe runner down. The child streams one framed line per device as soon as that device is done; the
parent keeps every line it got, blames a silent device (`timeout`) or a dead child (`error`) on the first
device without a result, and starts a fresh child for the devices left.
"""
import collections
import os
import queue
import subprocess
import threading
import time

from probes import events
from probes.child import (
    FramedWriter,
    close_streams,
    flush_std,
    kill_group,
    parse_frame,
    spawn,
    watch_parent,
)

MARK = "COPYBENCH-DEVICE "
# Past its share of the time, a device gets this much longer before the parent calls it hung: a workload
# in progress finishes past the budget, and the first device also pays for importing torch and sglang.
GRACE_S = 20.0
# The child's own budget ends this long before the parent's deadline, so its last line still arrives.
CHILD_MARGIN_S = 8.0


def child_main(payload):
    """In the child: run the job, one framed line per device on the real stdout, noise on stderr."""
    watch_parent()   # a killed runner takes this child (and its GPU work) down with it
    job = payload["job"]
    from probes.copybench.devices import bench_all
    writer = FramedWriter(MARK)   # anything torch or sglang prints goes to stderr, not into the frames
    results = bench_all(job, emit=writer.write)
    flush_std()
    failed = results and results[-1].get("status") == "error" and len(results) < len(job.get("gpus") or [1])
    os._exit(3 if failed else 0)


def parse_line(line):
    """The device result one framed line carries, or None for any other line."""
    return parse_frame(MARK, line)


class Child(object):
    """One running benchmark child: its framed lines arrive on a queue, its stderr's tail is kept."""

    def __init__(self, python, modules, payload):
        self.stderr_tail = collections.deque(maxlen=3)
        self.lines = queue.Queue()
        # GPUs numbered as nvidia-smi numbers them (PCI bus order), as the probe's GPU indices are.
        self.proc = spawn(python, "probes.copybench.child:child_main", modules, payload_fields=payload,
                          close_stdin=True, env=dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID"))
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self.stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.stderr_reader.start()

    def _read_stdout(self):
        for raw in iter(self.proc.stdout.readline, b""):
            text = raw.decode("utf-8", "replace")
            if events.forward(text):   # a progress line of the child's: the runner passes it on
                continue
            found = parse_line(text)
            if found is not None:
                self.lines.put(found)
        self.lines.put(None)   # end of output: the child is gone

    def _read_stderr(self):
        for raw in iter(self.proc.stderr.readline, b""):
            text = raw.decode("utf-8", "replace").strip()
            if text:
                self.stderr_tail.append(text)

    def next_result(self, timeout):
        """A device result, None when the child ended, or "timeout" when it said nothing in time."""
        try:
            return self.lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return "timeout"

    def exit_code(self):
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None
        self.stderr_reader.join(timeout=2)   # the last lines of its stderr name the failure
        return code

    def kill(self):
        kill_group(self.proc, grace=1.0)
        close_streams(self.proc)


def run_isolated(job, modules, deadline, python=None):
    """Run the job in children until every device has a result or time is up: [device results]."""
    targets = [None] if job["device"] == "cpu" else list(job["gpus"])
    results = DeviceSteps(targets)
    for _ in range(len(targets) + 1):
        remaining = [t for t in targets if _key(t) not in results]
        if not remaining:
            break
        if deadline - time.monotonic() < 5:
            for t in remaining:
                results[_key(t)] = {"index": t, "status": "skipped", "reason": "time budget spent"}
            break
        _run_child(job, modules, deadline, python, remaining, results)
    return [results.get(_key(t), {"index": t, "status": "error", "reason": "no result"}) for t in targets]


class DeviceSteps(dict):
    """Device results by key, reporting each device's progress (GPU i of N started, finished) as it goes."""

    def __init__(self, targets):
        dict.__init__(self)
        self.numbers = {_key(t): n for n, t in enumerate(targets, 1)}
        self.started = set()

    def start(self, index):
        key = _key(index)
        if key not in self.started and key not in self:
            self.started.add(key)
            events.emit("copy_bench", "device", "started", i=self.numbers.get(key), n=len(self.numbers),
                        what=_label(index))

    def __setitem__(self, key, result):
        dict.__setitem__(self, key, result)
        events.emit("copy_bench", "device", "finished", i=self.numbers.get(key), n=len(self.numbers),
                    what=_label(result.get("index")), status=result.get("status"))


def targets_of(job):
    return [None] if job["device"] == "cpu" else list(job["gpus"])


def _label(index):
    return "cpu" if index is None else "GPU %s" % index


def _run_child(job, modules, deadline, python, remaining, results):
    """One child for the `remaining` devices; every line it sends is kept in `results` as it arrives."""
    budget = max(1.0, deadline - time.monotonic() - CHILD_MARGIN_S)
    # A wall-clock deadline, so the child's own start-up (torch, sglang imports) counts against it.
    # all_gpus: a restarted child keeps each GPU's place in the workload rotation (devices.rotated_grid).
    sub = dict(job, gpus=[t for t in remaining if t is not None], budget_s=budget,
               all_gpus=job.get("all_gpus") or [t for t in targets_of(job) if t is not None],
               deadline_epoch=time.time() + budget)
    child_deadline = time.monotonic() + budget
    child = Child(python, modules, {"job": sub})
    try:
        while True:
            waiting = [t for t in remaining if _key(t) not in results]
            if not waiting:
                break
            results.start(waiting[0])
            now = time.monotonic()
            share = max(0.0, child_deadline - now) / len(waiting)   # as the child's bench_all divides it
            got = child.next_result(min(share + GRACE_S, deadline - 1.0 - now))
            if got == "timeout":
                results[_key(waiting[0])] = {
                    "index": waiting[0], "status": "timeout",
                    "reason": "no result within %.0f s (its share of the time and %.0f s grace): the benchmark "
                              "process was killed and the devices after it get a new one" % (share, GRACE_S)}
                return
            if got is None:
                _blame_death(child, waiting, results)
                return
            results[_key(got.get("index"))] = got
    finally:
        child.kill()


def _blame_death(child, waiting, results):
    code = child.exit_code()
    if code in (0, 3):
        return   # 3: the child stopped on purpose after a CUDA fault it already reported
    tail = list(child.stderr_tail)
    # The child died or was killed: the first device without a result is the one it was on.
    results[_key(waiting[0])] = {"index": waiting[0], "status": "error",
                                 "reason": "benchmark process failed: exit %s%s"
                                           % (code, "; " + " | ".join(tail) if tail else "")}


def _key(index):
    return "cpu" if index is None else str(index)
