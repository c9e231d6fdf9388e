"""The runner's watchdog: when the control side is gone, nothing of the run outlives it on the host.

The control side is gone when nobody reads the runner's output any more (the SSH session was closed by a
stopped scan or a deadline, the connection dropped, the gpudiag process was killed): the pipes' read ends
close and poll() reports POLLERR (POLLHUP on a socket or a terminal). SIGTERM and SIGHUP to the runner mean
the same. Then every child's process group gets SIGTERM, SIGKILL after GRACE_S, and the runner ends: with
its whole process group when it leads it (subprocesses a probe started), else alone. A file or /dev/null
as output never reports these, so a bundle run by hand into a file runs to its end.

Inside a container (`docker exec -i`) the output pipes belong to the engine's shim, which keeps them open
after the exec client is gone; what the runner sees there is its stdin ending. So when the control side
holds stdin open for the whole run (payload `watch_stdin`), the end of stdin means the same: the runner
keeps a private copy of it to watch and gives fd 0 /dev/null, so what it starts reads an empty stdin as
before. Standard library only.
"""
import os
import select
import signal
import stat
import threading
import time

from probes import child

GRACE_S = 1.0      # how long children get between SIGTERM and SIGKILL
POLL_S = 0.5       # how often the watch looks at its stop flag
GONE = select.POLLERR | select.POLLHUP
INPUT_GONE = GONE | getattr(select, "POLLRDHUP", 0)   # a socket's peer shut its writing half
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class StopWatch(object):
    """Watches `fds` (the runner's output), `input_fd` (the control side's stdin, ending means gone) and the
    stop signals from a daemon thread; `stop()` ends the watch before an fd it watches is closed. Signals are
    handled only while the watch runs."""

    def __init__(self, fds, input_fd=None):
        self.fds = list(fds)
        self.input_fd = input_fd
        self._stopped = threading.Event()
        self._wake_r, self._wake_w = os.pipe()   # a stop signal's number arrives here, one byte
        self._previous = {}
        self.ending = threading.Event()   # set before the children are killed: their deaths are not results

    def start(self):
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:   # under nohup a hangup stays ignored
                    self._previous[signum] = signal.signal(signum, self._on_signal)
        threading.Thread(target=self._watch, name="stop-watch", daemon=True).start()
        return self

    def stop(self):
        if self._stopped.is_set():
            return
        self._stopped.set()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def hold_if_ending(self):
        """Called before the result is written: when a stop is ending the run, a probe whose child it killed
        has no result to give, so the runner waits here for the watch to end it instead of reporting it."""
        if self.ending.is_set():
            time.sleep(4 * GRACE_S)

    def _on_signal(self, signum, frame):
        # The work happens in the watch thread (the main thread may hold a lock it needs); a second signal
        # of the kind ends the runner at once.
        signal.signal(signum, signal.SIG_DFL)
        try:
            os.write(self._wake_w, bytes([signum]))
        except OSError:
            pass   # the watch has just stopped: the runner is past its frame and reaping already

    def _watch(self):
        poller = select.poll()
        for fd in self.fds:
            poller.register(fd, 0)   # no events asked: only POLLERR, POLLHUP and POLLNVAL come back
        if self.input_fd is not None:
            poller.register(self.input_fd, select.POLLIN | INPUT_GONE)
        poller.register(self._wake_r, select.POLLIN)
        while not self._stopped.is_set():
            for fd, flags in poller.poll(POLL_S * 1000):
                if self._stopped.is_set():
                    return   # the fd may have been closed (and its number reused) after stop()
                if fd == self._wake_r:
                    self.ending.set()
                    return end_run(os.read(self._wake_r, 1)[0])
                if flags & select.POLLNVAL:
                    poller.unregister(fd)   # closed or never open: says nothing about the control side
                elif fd == self.input_fd and not _input_ended(fd, flags):
                    continue   # bytes nobody asked for: read and dropped, the control side is still there
                elif flags & GONE or fd == self.input_fd:
                    self.ending.set()
                    return end_run(signal.SIGKILL)


def _input_ended(fd, flags):
    if flags & INPUT_GONE:
        return True
    try:
        return not os.read(fd, 65536)
    except OSError:
        return True


def detach_stdin():
    """A private copy of fd 0 to watch, and /dev/null as fd 0 from here on; None when stdin is not a pipe or a
    socket (a file or /dev/null would read as ended at once)."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    private = os.dup(0)   # not inheritable: no child holds the control side's pipe
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return private


def end_run(signum):
    """Children's groups down (TERM, then KILL after GRACE_S), then the runner itself by `signum` (its default
    action, set back by the handler): its whole process group when it leads one, so a subprocess a probe
    started goes too."""
    procs = child.live_procs()
    for proc in procs:
        _kill_group(proc.pid, signal.SIGTERM)
    ends = time.monotonic() + GRACE_S
    while time.monotonic() < ends and any(proc.poll() is None for proc in procs):
        time.sleep(0.05)
    for proc in procs:
        _kill_group(proc.pid, signal.SIGKILL)
    if os.getpgrp() == os.getpid():
        _kill_group(0, signum)
    os.kill(os.getpid(), signum)
    time.sleep(GRACE_S)
    os._exit(128 + signum)   # a signal blocked or ignored in this thread: the runner still ends


def _kill_group(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass
