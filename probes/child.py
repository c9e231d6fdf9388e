"""The one way probes start and run children (torch checks, copy bench, graph worker, sglang launcher).

Parent side (the child side, `watch_parent` and `FramedWriter`, is probes/child_side.py): `spawn` (own process
group, its stdin payload written by a thread, stderr to a log file or a pipe), `parse_frame` (the one frame parser), `kill_group` (TERM, then KILL, then reap) and `ChildSession`, the
one supervisor: every child's frames, timeouts and death are judged there, for one-answer children
(`run_once`) and long-lived ones (copy bench, graph worker, torch child). The stderr it keeps comes from
probes/child_logs.py. Standard library only.
"""
import json
import os
import queue
import signal
import subprocess
import threading
import time

from probes import events
from probes.boot import child_argv, child_payload
from probes.child_logs import StderrTail

# After its output ends, a child gets this long to exit before it is reported as it is (exit None).
DEATH_WAIT_S = 10.0
# Every session not yet killed: the runner reaps them before it exits (`reap_all`).
_live = set()  # type: set
_live_lock = threading.Lock()


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
    events.announce_process("child", proc.pid)  # the OOM killer may pick a child: name it too
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


FRAME, TIMEOUT, DIED = "frame", "timeout", "died"


class Outcome(object):
    """What `ChildSession.next` saw: a frame, nothing in time, or the child's end (exit code, signal)."""

    def __init__(self, kind, frame=None, exit_code=None):
        self.kind, self.frame, self.exit_code = kind, frame, exit_code
        self.signal = signal_name(exit_code)

    def how(self):
        """`killed by SIGSEGV`, `exit 3`, or `exit None` (it closed its output yet had not ended)."""
        return "killed by %s" % self.signal if self.signal else "exit %s" % self.exit_code

    def reason(self, timeout):
        """Why a question got no answer, in the words every caller reports."""
        if self.kind == TIMEOUT:
            return "no answer within %.0f s (killed)" % timeout
        return "%s without an answer" % self.how()


class ChildSession(object):
    """The supervisor of one child, for one-answer and long-lived children alike: started by `spawn`, its
    `MARK {json}` lines parsed by one reader thread into a queue (progress events passed on), its stderr kept
    (`log`, a LogTail whose file takes it, or a StderrTail). `next` gives the next frame; when none comes in
    time, or the child's output ends, the group is killed and the Outcome says which, with exit code and
    signal. `spawn`'s OSError (a missing interpreter) reaches the caller."""

    def __init__(self, python, entry, modules, mark, env=None, payload_fields=None, close_stdin=False,
                 log=None, kill_grace=1.0):
        self.mark, self.kill_grace = mark, kill_grace
        self.proc = spawn(python, entry, modules, env=env, payload_fields=payload_fields, close_stdin=close_stdin,
                          stderr=log.file if log is not None else None)
        self.stderr = log if log is not None else StderrTail(self.proc)
        self.ended = None      # the Outcome that ended the child, once one did
        self._killed = False
        with _live_lock:
            _live.add(self)
        self._frames = queue.Queue()
        threading.Thread(target=self._read, name="child-frames", daemon=True).start()

    def _read(self):
        try:
            for raw in iter(self.proc.stdout.readline, b""):
                text = raw.decode("utf-8", "replace")
                if events.forward(text):   # a progress line of the child's: the runner passes it on
                    continue
                found = parse_frame(self.mark, text)
                if found is not None:
                    self._frames.put(found)
        except (OSError, ValueError):
            pass
        self._frames.put(None)   # end of output: the child is gone

    def alive(self):
        return self.ended is None and not self._killed and self.proc.poll() is None

    def send(self, doc, timeout):
        """Write `doc` as one stdin line, after the payload line, from a thread: True once written (or once
        the child is gone, which `next` reports), False when it read nothing within `timeout` (then killed)."""
        line = (json.dumps(doc) + "\n").encode("utf-8")
        writer = threading.Thread(target=self._write, args=(line,), name="child-request", daemon=True)
        writer.start()
        writer.join(max(0.0, timeout))
        if writer.is_alive():
            self._end(Outcome(TIMEOUT))
            return False
        return True

    def _write(self, line):
        self.proc.payload_writer.join()   # the payload line goes first, whole
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass   # the child died (or was killed); the end of its output says so

    def next(self, timeout):
        """Outcome(FRAME) with the next frame; else, the group killed, Outcome(TIMEOUT) when none came
        within `timeout` or Outcome(DIED) with the exit code when the child's output ended."""
        if self.ended is not None:
            return self.ended
        try:
            frame = self._frames.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return self._end(Outcome(TIMEOUT))
        if frame is not None:
            return Outcome(FRAME, frame)
        try:
            code = self.proc.wait(timeout=DEATH_WAIT_S)
        except subprocess.TimeoutExpired:
            code = None   # closed its output yet still running: reported as it is, and killed
        return self._end(Outcome(DIED, exit_code=code))

    def _end(self, outcome):
        self.ended = outcome
        self.kill()
        return outcome

    def kill(self):
        """Kill the whole group (grandchildren too), reap the leader, let the stderr reader finish (its last
        lines name the failure) and close the pipes. Once is enough; later calls do nothing."""
        if self._killed:
            return
        self._killed = True
        with _live_lock:
            _live.discard(self)
        kill_group(self.proc, grace=self.kill_grace)
        if isinstance(self.stderr, StderrTail):
            self.stderr.reader.join(2.0)
        close_streams(self.proc)


def reap_all(within_s):
    """Before the runner exits: every child still alive has its stdin closed (a serving child ends on it),
    gets until `within_s` seconds from now to exit, and then its whole group is killed and its leader
    reaped, so no child outlives the runner and the runner's own accounting (wait4) counts them."""
    with _live_lock:
        sessions = list(_live)
    ends = time.monotonic() + max(0.0, within_s)
    for session in sessions:
        try:
            session.proc.stdin.close()
        except Exception:
            pass
    for session in sessions:
        while time.monotonic() < ends and not exited(session.proc):
            time.sleep(0.02)
        session.kill_grace = 0.0
        session.kill()   # TERM then KILL the group (grandchildren too), then reap the leader


def live_procs():
    """The leaders of every child session not yet killed (each leads its own process group)."""
    with _live_lock:
        return [session.proc for session in _live]


def exited(proc):
    """Whether the leader has exited, leaving it unreaped where the system allows: a zombie leader keeps its
    process group's id taken, so killing the group next cannot reach a process that reused the id."""
    waitid = getattr(os, "waitid", None)
    if waitid is None:
        return proc.poll() is not None
    try:
        return waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True   # reaped already (by the session's own wait)


def run_once(python, entry, modules, timeout, mark, env=None, **fields):
    """Run a one-answer child under `python`: (answer dict, None) or (None, why there is none: missing
    interpreter, crash with its signal and stderr tail, or no answer before `timeout`). The last frame it
    wrote before its output ended (or the deadline came) is the answer; its stderr stays in memory."""
    try:
        session = ChildSession(python, entry, modules, mark, env=env, payload_fields=fields, close_stdin=True)
    except OSError as exc:
        return None, "cannot start: %s" % (exc.strerror or exc)
    deadline = time.monotonic() + timeout
    answer = None
    while True:
        got = session.next(deadline - time.monotonic())
        if got.kind != FRAME:
            break
        answer = got.frame
    if answer is not None:
        return answer, None
    return None, got.reason(timeout) + session.stderr.note()
