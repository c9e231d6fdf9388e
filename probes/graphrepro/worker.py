"""Runs crash-prone work (graph capture, replay) in a child process that may die without harm.

The child is `PYTHON -c probes.boot.BOOTSTRAP_COMMAND` supervised by probes/child.py's ChildSession (PYTHON:
the host's chosen interpreter, given by the caller; this process by default); the first stdin line carries
the bundle's module sources (the same in-memory import as gpudiag's bootstrap), then one JSON request per
line. The child answers one `GRAPHREPRO-RESULT {json}` line per request. A segfault, abort, hang or
exception in the child becomes a result dict here; the session kills the child's whole process group.
"""
import json
import sys
import time
import traceback

from probes.child import FRAME, TIMEOUT, ChildSession
from probes.child_side import FramedWriter, watch_parent
from probes.child_logs import LogTail

RESULT_PREFIX = "GRAPHREPRO-RESULT "
# A hung capture gets this long after SIGTERM before SIGKILL (its allocator may be flushing).
KILL_GRACE_S = 3.0


def resolve(dotted):
    """'package.module:function' -> the function (imported through the bundle's importer)."""
    import importlib
    module_name, _, func = dotted.partition(":")
    return getattr(importlib.import_module(module_name), func)


def serve(payload=None):
    """Child side: answer requests until stdin closes. fd 1 is kept for results only."""
    watch_parent()
    writer = FramedWriter(RESULT_PREFIX)  # library prints go to the log, never into the result channel
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return 0
        try:
            request = json.loads(line.decode("utf-8"))
            result = resolve(request["handler"])(request.get("args") or {})
        except BaseException as exc:  # whatever the handler raises is data for the parent
            result = {"status": "error", "detail": "%s: %s" % (type(exc).__name__, str(exc)[:500]),
                      "traceback": traceback.format_exc().splitlines()[-8:]}
        if not isinstance(result, dict):   # a frame is an object: anything else would never arrive
            result = {"status": "error", "detail": "the handler returned %s, not a dict" % type(result).__name__}
        writer.write(result)


class Worker(object):
    """Parent side: one long-lived child, restarted after anything but a clean answer. Its stderr goes to a
    log file, kept until the next child starts (or `remove_logs`), so a failure's tail can be quoted."""

    def __init__(self, modules=None, env=None, python=None, log_dir=None):
        self.modules = modules
        self.env = env
        self.python = python or sys.executable
        self.log_dir = log_dir
        self.session = None
        self.log = None
        self.starts = 0

    @property
    def proc(self):
        """The running child's process, None when there is none."""
        return self.session.proc if self.session is not None else None

    def _start(self):
        self.remove_logs()  # the previous child's log was quoted already
        self.log = LogTail(prefix="gpudiag-graph-child-", folder=self.log_dir)
        self.session = ChildSession(self.python, "probes.graphrepro.worker:serve", self.modules, RESULT_PREFIX,
                                    env=self.env, log=self.log, kill_grace=KILL_GRACE_S)
        self.starts += 1

    def call(self, handler, args, timeout):
        """Run handler(args) in the child; always returns a dict with at least `status`."""
        if self.session is None or not self.session.alive():
            self.close()
            try:
                self._start()
            except OSError as exc:  # a missing or unrunnable interpreter: that is the cell's answer
                self.close()
                return {"status": "died", "detail": "cannot start %s: %s" % (self.python, exc.strerror or exc),
                        "signal": None, "exit_code": None, "log_tail": ""}
        offset = self.log.size()
        started = time.monotonic()
        if not self.session.send({"handler": handler, "args": args}, timeout):
            tail = self.log_tail(offset)   # a hung child never read the modules line
            self.close()
            return {"status": "timeout", "detail": "%s read no input within %.0f s; child killed" % (
                self.python, timeout), "log_tail": tail}
        timeout = max(0.1, timeout - (time.monotonic() - started))
        got = self.session.next(timeout)
        if got.kind == FRAME:
            return got.frame
        tail = self.log_tail(offset)
        self.close()
        if got.kind == TIMEOUT:
            return {"status": "timeout", "detail": "no answer within %.0f s; child killed" % timeout,
                    "log_tail": tail}
        detail = "child killed by %s" % got.signal if got.signal else "child exited with code %s" % got.exit_code
        return {"status": "died", "detail": detail, "signal": got.signal, "exit_code": got.exit_code,
                "log_tail": tail}

    def log_tail(self, offset=0, limit=6000):
        return self.log.tail(offset, limit) if self.log is not None else ""

    def close(self):
        """Kill the child's whole group (it may have started its own children) and reap it."""
        session, self.session = self.session, None
        if session is not None:
            session.kill()

    def remove_logs(self):
        if self.log is not None:
            self.log.remove()
            self.log = None
