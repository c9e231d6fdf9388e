"""Runs crash-prone work (graph capture, replay) in a child process that may die without harm.

The child is `PYTHON -c probes.boot.BOOTSTRAP_COMMAND` started by probes/child.py (PYTHON: the host's
chosen interpreter, given by the caller; this process by default); the first
stdin line carries the bundle's module sources (the same in-memory import as gpudiag's bootstrap), then
one JSON request per line. The child answers one `GRAPHREPRO-RESULT {json}` line per request. A segfault,
abort, hang or exception in the child becomes a result dict here; the parent always kills the child's
whole process group.
"""
import json
import queue
import subprocess
import sys
import threading
import time
import traceback

from probes.child import (
    FramedWriter,
    LogTail,
    kill_group,
    signal_name,
    spawn,
    watch_parent,
)

RESULT_PREFIX = "GRAPHREPRO-RESULT "



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
        writer.write(result)


class Worker(object):
    """Parent side: one long-lived child, restarted after anything but a clean answer."""

    def __init__(self, modules=None, env=None, python=None, log_dir=None):
        self.modules = modules
        self.env = env
        self.python = python or sys.executable
        self.log_dir = log_dir
        self.proc = None
        self.log_path = None
        self.log = None
        self._lines = None
        self.starts = 0

    def _start(self):
        self.remove_logs()  # the previous child's log was quoted already
        self.log = LogTail(prefix="gpudiag-graph-child-", folder=self.log_dir)
        self.log_path = self.log.path
        self.proc = spawn(self.python, "probes.graphrepro.worker:serve", self.modules, env=self.env,
                          stderr=self.log.file)
        self.starts += 1
        self._lines = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout, self._lines), daemon=True).start()

    @staticmethod
    def _read(stream, lines):
        for raw in iter(stream.readline, b""):
            text = raw.decode("utf-8", "replace")
            if text.startswith(RESULT_PREFIX):
                lines.put(text[len(RESULT_PREFIX):])
        lines.put(None)  # end of output: the child is gone

    def _send(self, doc):
        self.proc.stdin.write((json.dumps(doc) + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def call(self, handler, args, timeout):
        """Run handler(args) in the child; always returns a dict with at least `status`."""
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            try:
                self._start()
            except OSError as exc:  # a missing or unrunnable interpreter: that is the cell's answer
                self.close()
                return {"status": "died", "detail": "cannot start %s: %s" % (self.python, exc.strerror or exc),
                        "signal": None, "exit_code": None, "log_tail": ""}
        offset = self.log.size()
        started = time.monotonic()
        self.proc.payload_writer.join(timeout)  # the modules line goes first, whole; a hung child never reads it
        if self.proc.payload_writer.is_alive():
            self.close()
            return {"status": "timeout", "detail": "%s read no input within %.0f s; child killed" % (
                self.python, timeout), "log_tail": self.log_tail(offset)}
        timeout = max(0.1, timeout - (time.monotonic() - started))
        try:
            self._send({"handler": handler, "args": args})
        except (BrokenPipeError, OSError):
            pass  # the child died at start; the reader reports the end of output
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.close()
            return {"status": "timeout", "detail": "no answer within %.0f s; child killed" % timeout,
                    "log_tail": self.log_tail(offset)}
        if line is not None:
            try:
                return json.loads(line)
            except ValueError:
                line = None
        return self._death(offset)

    def _death(self, offset):
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        tail = self.log_tail(offset)
        self.close()
        sig = signal_name(code)
        detail = "child killed by %s" % sig if sig else "child exited with code %s" % code
        return {"status": "died", "detail": detail, "signal": sig, "exit_code": code, "log_tail": tail}

    def log_tail(self, offset=0, limit=6000):
        return self.log.tail(offset, limit) if self.log is not None else ""

    def close(self):
        """Kill the child's whole group (it may have started its own children) and reap it."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        kill_group(proc)
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except Exception:
                pass

    def remove_logs(self):
        if self.log is not None:
            self.log.remove()
            self.log = None
