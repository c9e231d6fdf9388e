"""Runs crash-prone work (graph capture, replay) in a child process that may die without harm.

The child is `sys.executable -I -c probes.boot.BOOTSTRAP_COMMAND` (BOOTSTRAP as one line); the first
stdin line carries the bundle's module sources (the same in-memory import as gpudiag's bootstrap), then
one JSON request per line. The child answers one `GRAPHREPRO-RESULT {json}` line per request. A segfault,
abort, hang or exception in the child becomes a result dict here; the parent always kills the child's
whole process group.
"""
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from probes.boot import child_argv, child_payload

RESULT_PREFIX = "GRAPHREPRO-RESULT "



def resolve(dotted):
    """'package.module:function' -> the function (imported through the bundle's importer)."""
    import importlib
    module_name, _, func = dotted.partition(":")
    return getattr(importlib.import_module(module_name), func)


def watch_parent(interval=0.5):
    """If the probe that started us dies (a killed runner), take our whole group down with it,
    even while a handler hangs inside CUDA."""
    parent = os.getppid()

    def loop():
        while os.getppid() == parent:
            time.sleep(interval)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=loop, name="parent-watch", daemon=True).start()


def serve(payload=None):
    """Child side: answer requests until stdin closes. fd 1 is kept for results only."""
    watch_parent()
    out_fd = os.dup(1)
    os.dup2(2, 1)  # library prints go to the log, never into the result channel
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
        data = (RESULT_PREFIX + json.dumps(result, default=str) + "\n").encode("utf-8")
        while data:
            data = data[os.write(out_fd, data):]


def signal_name(returncode):
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return "signal %d" % -returncode


class Worker(object):
    """Parent side: one long-lived child, restarted after anything but a clean answer."""

    def __init__(self, modules=None, env=None, python=None, log_dir=None):
        self.modules = modules
        self.env = env
        self.python = python or sys.executable
        self.log_dir = log_dir
        self.proc = None
        self.log_path = None
        self._lines = None
        self.starts = 0

    def _start(self):
        self.remove_logs()  # the previous child's log was quoted already
        fd, self.log_path = tempfile.mkstemp(prefix="gpudiag-graph-child-", suffix=".log", dir=self.log_dir)
        log = os.fdopen(fd, "wb")
        self.proc = subprocess.Popen(child_argv(self.python), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=log, env=self.env, start_new_session=True)
        log.close()
        self.starts += 1
        self._lines = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout, self._lines), daemon=True).start()
        try:
            self.proc.stdin.write(child_payload("probes.graphrepro.worker:serve", self.modules))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the child died at once; the reader reports the end of its output

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
            self._start()
        offset = os.path.getsize(self.log_path)
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
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(max(offset, os.path.getsize(self.log_path) - limit))
                return fh.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

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
        if self.log_path and os.path.exists(self.log_path):
            os.unlink(self.log_path)


def kill_group(proc, grace=3.0):
    """SIGTERM the process group, SIGKILL what is left after `grace` seconds, reap the leader."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
