"""Launches the host's sglang (or any server command) for one repro cell, and always cleans up.

The server runs under a tiny supervisor in its own session: the supervisor watches a pipe from this
process, so if the probe dies (Ctrl-C on the control side kills the runner) the whole server group is
killed too. Which flags a launch passes is launch_plan's job.
"""
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from probes.child import kill_group

STOP_GRACE_S = 10.0   # TERM, then KILL the server group this long after

SUPERVISOR = r'''import os, signal, subprocess, sys, threading
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
def watch():
    sys.stdin.buffer.read()          # EOF: the probe that started us is gone
    os.killpg(0, signal.SIGKILL)
threading.Thread(target=watch, daemon=True).start()
code = child.wait()
os._exit(code if code >= 0 else 128 - code)
'''


def free_port():
    """A loopback port nobody listens on now (a live server's port is never chosen: it is bound)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
    finally:
        sock.close()


class ServerProcess(object):
    """One supervised server; `wait_ready` says ready, died or hang; `stop` kills the whole group."""

    def __init__(self, argv, port, log_path, env=None):
        self.argv, self.port, self.log_path, self.env = argv, port, log_path, env
        self.proc = None

    def start(self):
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", SUPERVISOR] + list(self.argv),
                                         stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                         env=self.env, start_new_session=True)
        finally:
            log.close()
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def exit_description(self):
        code = None if self.proc is None else self.proc.poll()
        if code is None:
            return "running"
        if code > 128:
            try:
                return "killed by %s" % signal.Signals(code - 128).name
            except ValueError:
                return "exit %d" % code
        return "exit %d" % code

    def wait_ready(self, timeout, poll=0.5):
        """'ready', 'died' or 'hang' (neither ready nor dead within `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                return "died"
            if self.health(timeout=min(5.0, poll * 4)):
                return "ready"
            time.sleep(poll)
        return "died" if not self.alive() else "hang"

    def health(self, timeout=5.0):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/health" % self.port, timeout=timeout) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def log_text(self, limit=200000):
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(max(0, os.path.getsize(self.log_path) - limit))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self):
        if self.proc is None:
            return
        kill_group(self.proc, grace=STOP_GRACE_S)
        try:
            self.proc.stdin.close()
        except Exception:
            pass

    def __enter__(self):
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
