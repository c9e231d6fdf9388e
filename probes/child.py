"""The one way probes start and run children (torch checks, copy bench, graph worker, sglang launcher).

Child side: `watch_parent` (a killed runner takes its children with it) and `FramedWriter` (answers on the
real stdout as `MARK {json}` lines, everything else the child or its libraries print goes to stderr).
Parent side: `spawn` (own process group, its stdin payload written by a thread, stderr to a log file or a
pipe), `parse_frame`, `LogTail` (a log file) and `StderrTail` (in memory), `kill_group` (TERM, then KILL, then
reap) and `run_once` (the supervisor of a child that gives one answer before a deadline). Standard library only.
"""
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from probes import events
from probes.boot import child_argv, child_payload

LOG_TAIL_BYTES = 6000


# -- child side ------------------------------------------------------------------------------------------
def watch_parent(interval=0.5):
    """If the process that started us dies, take our whole group down with it, even while the main thread
    hangs inside CUDA."""
    parent = os.getppid()

    def loop():
        while os.getppid() == parent:
            time.sleep(interval)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=loop, name="parent-watch", daemon=True).start()


class FramedWriter(object):
    """Owns the real stdout of a child: fd 1 is pointed at stderr, so only `write` reaches the parent.
    Progress events the child emits (probes/events.py) travel on the same channel under their own mark."""

    def __init__(self, mark):
        self.mark = mark
        self._lock = threading.Lock()   # one whole line at a time, whichever thread writes
        sys.stdout.flush()
        self.fd = os.dup(1)
        os.dup2(2, 1)
        events.relay_through(self)

    def write(self, document):
        self.write_marked(self.mark, document)

    def write_marked(self, mark, document):
        line = (mark + json.dumps(document, default=str, sort_keys=True) + "\n").encode("utf-8")
        with self._lock:
            while line:
                line = line[os.write(self.fd, line):]


def flush_std():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


# -- parent side -----------------------------------------------------------------------------------------
def parse_frame(mark, line):
    """The JSON object a `MARK {json}` line carries, or None for any other line."""
    if not line.startswith(mark):
        return None
    try:
        found = json.loads(line[len(mark):])
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


class LogTail(object):
    """A temp file a child's stderr goes to; its tail is quoted when the child fails, then it is removed."""

    def __init__(self, prefix="gpudiag-child-", folder=None):
        fd, self.path = tempfile.mkstemp(prefix=prefix, suffix=".log", dir=folder)
        self.file = os.fdopen(fd, "wb")

    def size(self):
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def tail(self, offset=0, limit=LOG_TAIL_BYTES):
        try:
            with open(self.path, "rb") as fh:
                fh.seek(max(offset, self.size() - limit))
                return fh.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def remove(self):
        try:
            self.file.close()
            os.unlink(self.path)
        except OSError:
            pass


# Children import torch and sglang as the serving interpreter does: without -I, so PYTHONPATH and the user
# site count as they do for a server started normally; run from / so the current directory's files (`-c`
# puts it on sys.path) cannot shadow a module.
CHILD_CWD = os.path.abspath(os.sep)


def serving_argv(python):
    """`PYTHON -c BOOTSTRAP`: the bootstrap argv less -I (which would hide PYTHONPATH and the user site)."""
    return [word for word in child_argv(python) if word != "-I"]


def spawn(python, entry, modules, env=None, stderr=None, payload_fields=None, close_stdin=False):
    """A child `PYTHON -c BOOTSTRAP` in its own process group, started in /. Its first stdin line is written by
    a thread (`proc.payload_writer`), so an interpreter that hangs before reading cannot block the caller;
    stdin stays open for later requests unless `close_stdin`. `stderr`: a file object or None (a pipe)."""
    proc = subprocess.Popen(serving_argv(python), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr if stderr is not None else subprocess.PIPE, env=env,
                            start_new_session=True, cwd=CHILD_CWD)
    data = child_payload(entry, modules, **(payload_fields or {}))

    def send():
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
            if close_stdin:
                proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the child died at once (or was killed); reading its output tells the caller

    proc.payload_writer = threading.Thread(target=send, name="child-payload", daemon=True)
    proc.payload_writer.start()
    return proc


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


def close_streams(proc):
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        try:
            if stream is not None:
                stream.close()
        except Exception:
            pass


def signal_name(returncode):
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return "signal %d" % -returncode


def run_once(python, entry, modules, timeout, mark, env=None, **fields):
    """Run a one-answer child under `python`: (answer dict, None) or (None, why there is none: missing
    interpreter, crash with its signal and stderr tail, or no answer before `timeout`). Its stderr is kept in
    memory (a bounded tail), so a light probe's child writes nothing to disk."""
    try:
        proc = spawn(python, entry, modules, env=env, payload_fields=fields, close_stdin=True)
    except OSError as exc:
        return None, "cannot start: %s" % (exc.strerror or exc)
    tail = StderrTail(proc)
    found = _first_frame(proc, mark, timeout)
    tail.reader.join(2.0)
    close_streams(proc)
    if found == "timeout":
        return None, "no answer within %.0f s (killed)%s" % (timeout, tail.note())
    if found is not None:
        return found, None
    sig = signal_name(proc.returncode)
    how = "killed by %s" % sig if sig else "exit %s" % proc.returncode
    return None, "%s without an answer%s" % (how, tail.note())


class StderrTail(object):
    """The last lines a child wrote on its stderr pipe, read by a thread, bounded in memory."""

    def __init__(self, proc, lines=20, width=500):
        self.lines = collections.deque(maxlen=lines)
        self.width = width
        self.reader = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self.reader.start()

    def _read(self, stream):
        try:
            for raw in iter(stream.readline, b""):
                text = raw.decode("utf-8", "replace").strip()
                if text:
                    self.lines.append(text[:self.width])
        except (OSError, ValueError):
            pass

    def note(self, count=2):
        tail = list(self.lines)[-count:]
        return " | " + " | ".join(t[:300] for t in tail) if tail else ""


def _first_frame(proc, mark, timeout):
    """The last framed answer of a child that ends by itself, None when it ended without one, "timeout"
    when its output did not end in time (the group is killed either way: grandchildren it left behind)."""
    chunks = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    reader.join(timeout)
    timed_out = reader.is_alive()
    kill_group(proc, grace=1.0 if timed_out else 0.2)
    reader.join(2.0)
    for line in reversed(b"".join(chunks).decode("utf-8", "replace").splitlines()):
        found = parse_frame(mark, line)
        if found is not None:
            return found
    return "timeout" if timed_out else None
