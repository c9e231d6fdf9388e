"""The one torch child of a host run: started under the chosen interpreter at the first torch question and
asked every later one (env's build facts, the GPU list without nvidia-smi, torch_caps' checks), so a light
scan imports torch once. Built on probes/child.py: the first stdin line is the bundle, then one request per
line; each answer is one `GPUDIAG-TORCH {json}` line on the child's real stdout.

Once the child dies or misses a deadline it is killed and not started again for this run: its failure
(missing interpreter, crash with its signal and stderr tail, hang) is the reason of every later question.
A run is the probe runner's results dict, shared by its probes; a child is kept per (interpreter, run).
"""
import importlib
import json
import os
import queue
import subprocess
import sys
import threading
import time

from probes import child
from probes.context import Skip

MARK = "GPUDIAG-TORCH "
STARTUP_MARGIN_S = 5.0
# The questions the child answers: name -> "module:function(args) -> data". Nothing else is callable.
JOBS = {"build": "probes.env:torch_facts_job", "gpus": "probes.hostinfo.gpus:torch_gpus_job",
        "caps": "probes.torch_caps:caps_job"}

_children = {}  # type: dict  # (interpreter, run) -> its one torch child
_registry_lock = threading.Lock()


def ask(python, results, job, modules, timeout, args=None):
    """(data, None) from `job` in the run's torch child under `python`, or (None, why there is none; the
    caller names `python`)."""
    with _registry_lock:
        key = (python, id(results))
        found = _children.get(key)
        if found is None:
            found = _children[key] = SharedChild(python, modules, results)
    return found.ask(job, args or {}, timeout)


def close_all():
    """End every child (stdin closed, group killed): for callers that run several scans in one process."""
    with _registry_lock:
        children = list(_children.values())
        _children.clear()
    for found in children:
        found.close("closed")


class SharedChild(object):
    """Parent side of one long-lived child; questions are asked one at a time."""

    def __init__(self, python, modules, results):
        self.python = python
        self.modules = modules
        self.results = results   # held, so the run's id cannot be reused while this child is known
        self.proc = None
        self.failed = None       # why the child cannot answer any more, once it cannot
        self.started = 0
        self._answers = queue.Queue()
        self._lock = threading.Lock()

    def ask(self, job, args, timeout):
        started = time.monotonic()
        if not self._lock.acquire(timeout=max(0.1, timeout)):
            return None, "an earlier torch question is still running"
        try:
            if self.proc is None and self.failed is None:
                self._start()
            if self.failed is not None:
                return None, self.failed
            left = max(0.1, timeout - (time.monotonic() - started))
            return self._question(job, dict(args, budget_s=max(1.0, left - STARTUP_MARGIN_S)), left)
        finally:
            self._lock.release()

    def _start(self):
        try:
            self.proc = child.spawn(self.python, "probes.hostinfo.torch_child:serve", self.modules,
                                    env=dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID"))
        except OSError as exc:
            self.failed = "cannot start: %s" % (exc.strerror or exc)
            return
        self.started += 1
        self.tail = child.StderrTail(self.proc)
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream):
        try:
            for raw in iter(stream.readline, b""):
                found = child.parse_frame(MARK, raw.decode("utf-8", "replace"))
                if found is not None:
                    self._answers.put(found)
        except (OSError, ValueError):
            pass
        self._answers.put(None)  # end of output: the child is gone

    def _question(self, job, args, timeout):
        started = time.monotonic()
        line = (json.dumps({"job": job, "args": args}) + "\n").encode("utf-8")
        # Written by a thread after the bundle line: a child that never reads cannot block this probe.
        writer = threading.Thread(target=self._send, args=(self.proc, line), daemon=True)
        writer.start()
        writer.join(timeout)
        if writer.is_alive():
            self.close("no answer within %.0f s (killed; it read no input)" % timeout)
            return None, self.failed
        try:
            answer = self._answers.get(timeout=max(0.1, timeout - (time.monotonic() - started)))
        except queue.Empty:
            self.close("no answer within %.0f s (killed)" % timeout)
            return None, self.failed
        if answer is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass  # closed its stdout yet still running: killed below, reported as it is
            sig = child.signal_name(self.proc.returncode)
            how = "killed by %s" % sig if sig else "exit %s" % self.proc.returncode
            self.close("%s without an answer" % how)
            return None, self.failed
        if not answer.get("ok"):
            return None, answer.get("reason") or "failed"
        return answer.get("data"), None

    @staticmethod
    def _send(proc, line):
        proc.payload_writer.join()  # the bundle line goes first, whole
        try:
            proc.stdin.write(line)
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the child died at start (or was killed); the end of its output says so

    def close(self, why):
        """Kill the child's group and remember why it answers no more."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        child.kill_group(proc, grace=0.5)
        self.tail.reader.join(1.0)
        child.close_streams(proc)
        if self.failed is None:
            self.failed = why + self.tail.note()


def serve(payload):
    """Child side: answer questions until stdin closes, then end at once (CUDA teardown can hang)."""
    child.watch_parent()
    writer = child.FramedWriter(MARK)
    stdin = sys.stdin.buffer
    while True:
        raw = stdin.readline()
        if not raw:
            break
        writer.write(answer(raw))
    child.flush_std()
    os._exit(0)


def answer(raw):
    """{ok, data} or {ok: False, reason} for one request line; whatever the job raises is its reason."""
    try:
        request = json.loads(raw.decode("utf-8"))
        module_name, _, function = JOBS[request["job"]].partition(":")
        data = getattr(importlib.import_module(module_name), function)(request.get("args") or {})
        return {"ok": True, "data": dict(data, executable=sys.executable)}
    except Skip as exc:
        return {"ok": False, "reason": "skipped: %s" % exc}
    except BaseException as exc:  # a broken install can raise anything, SystemExit included
        return {"ok": False, "reason": "%s: %s" % (type(exc).__name__, str(exc)[:500])}


def deadline(args):
    """The monotonic deadline a job's `budget_s` gives."""
    return time.monotonic() + float(args.get("budget_s") or 60.0)
