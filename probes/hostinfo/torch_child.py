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
import sys
import threading
import time

from probes import child, child_side
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
    """Parent side of one long-lived child (a ChildSession); questions are asked one at a time."""

    def __init__(self, python, modules, results):
        self.python = python
        self.modules = modules
        self.results = results   # held, so the run's id cannot be reused while this child is known
        self.session = None
        self.failed = None       # why the child cannot answer any more, once it cannot
        self._lock = threading.Lock()

    def ask(self, job, args, timeout):
        started = time.monotonic()
        if not self._lock.acquire(timeout=max(0.1, timeout)):
            return None, "an earlier torch question is still running"
        try:
            if self.session is None and self.failed is None:
                self._start()
            if self.failed is not None:
                return None, self.failed
            left = max(0.1, timeout - (time.monotonic() - started))
            return self._question(job, dict(args, budget_s=max(1.0, left - STARTUP_MARGIN_S)), left)
        finally:
            self._lock.release()

    def _start(self):
        try:
            self.session = child.ChildSession(self.python, "probes.hostinfo.torch_child:serve", self.modules, MARK,
                                              env=dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID"),
                                              kill_grace=0.5)
        except OSError as exc:
            self.failed = "cannot start: %s" % (exc.strerror or exc)

    def _question(self, job, args, timeout):
        started = time.monotonic()
        # Written by a thread after the bundle line: a child that never reads cannot block this probe.
        if not self.session.send({"job": job, "args": args}, timeout):
            return self._fail("no answer within %.0f s (killed; it read no input)" % timeout)
        got = self.session.next(max(0.1, timeout - (time.monotonic() - started)))
        if got.kind != child.FRAME:
            return self._fail(got.reason(timeout))
        answer = got.frame
        if not answer.get("ok"):
            return None, answer.get("reason") or "failed"
        return answer.get("data"), None

    def _fail(self, why):
        self.close(why)
        return None, self.failed

    def close(self, why):
        """Kill the child's group and remember why it answers no more."""
        session, self.session = self.session, None
        if session is None:
            return
        session.kill()
        if self.failed is None:
            self.failed = why + session.stderr.note()


def serve(payload):
    """Child side: answer questions until stdin closes, then end at once (CUDA teardown can hang)."""
    child_side.watch_parent()
    writer = child_side.FramedWriter(MARK)
    stdin = sys.stdin.buffer
    while True:
        raw = stdin.readline()
        if not raw:
            break
        writer.write(answer(raw))
    child_side.flush_std()
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
