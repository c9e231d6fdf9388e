"""Reading a log bounded by bytes, lines and time: the last TAIL_BYTES of a regular file (a seek, never the
whole file), the newest lines of that (probes/log_window.py), and never past a deadline. A FIFO is opened
without blocking and read with poll() against the deadline, so a FIFO no writer ever opens, a writer that
trickles forever or a terminal on stdin stops the read at the deadline instead of holding the command; a
command (`journalctl`, `docker logs`) runs in its own process group, which is killed at the deadline.

Every read says why it stopped short, if it did: `cut` is "time", "bytes" (older bytes left out) or "lines"
(older lines or a long blank run left out), None for a whole log; `cut_note` words a cut by time for output.
Standard library only, Python 3.9+ (runs on hosts too)."""
import collections
import math
import os
import select
import signal
import stat
import subprocess
import time

from probes.log_window import MAX_LINES, last_lines

TAIL_BYTES = 8 * 1024 * 1024
CLI_SECONDS = 20.0  # a log named on the command line
HOST_SECONDS = 10.0  # all server-log reads of one host scan together
SECONDS_ENV = "GPUDIAG_LOG_READ_SECONDS"
CHUNK = 1 << 20
ERR_BYTES = 4096

# text: the log's kept lines; bytes_read: bytes decoded; truncated: something was left out; cut: why, or None
LogRead = collections.namedtuple("LogRead", "text bytes_read truncated cut seconds")
# code: exit status (None: killed or not started); data: newest stdout bytes; error: a line saying why not
CommandRead = collections.namedtuple("CommandRead", "code data error cut seconds")


def read_seconds(default=CLI_SECONDS):
    """The time bound for a log read: GPUDIAG_LOG_READ_SECONDS when it is a positive number, else `default`."""
    try:
        value = float(os.environ.get(SECONDS_ENV, ""))
    except ValueError:
        return default
    return value if 0 < value <= 86400 else default


def cut_note(read):
    """Words for a read its time limit stopped ("read stopped after 20 s"), else "": a read cut by bytes or
    lines keeps the newest part, which callers report as a tail."""
    return time_note(read.seconds) if read.cut == "time" else ""


def time_note(seconds):
    return "read stopped after %g s" % round(seconds, 1)


def read_log(path, seconds=CLI_SECONDS, max_bytes=TAIL_BYTES, max_lines=MAX_LINES, start=0):
    """LogRead of the file at `path` (a regular file from byte `start` on, a FIFO, a device). Raises OSError
    when it cannot be opened or read, IsADirectoryError for a directory."""
    deadline = time.monotonic() + seconds
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        return read_fd(fd, seconds, max_bytes, max_lines, start, deadline)
    finally:
        os.close(fd)


def read_fd(fd, seconds=CLI_SECONDS, max_bytes=TAIL_BYTES, max_lines=MAX_LINES, start=0, deadline=None):
    """LogRead of an open descriptor (a file or stdin); the descriptor stays open."""
    deadline = time.monotonic() + seconds if deadline is None else deadline
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(21, "Is a directory")
    if stat.S_ISREG(info.st_mode):
        data, older, timed = _file_tail(fd, info.st_size, max_bytes, start, deadline)
    else:
        data, older, timed = _stream_tail(fd, max_bytes, deadline)
    return finish(data, older, timed, seconds, max_lines)


def finish(data, older, timed, seconds, max_lines=MAX_LINES):
    """LogRead of the newest bytes read (`older`: bytes before them were left out; `timed`: the deadline hit)."""
    if older and b"\n" in data:
        data = data[data.index(b"\n") + 1:]  # the first line is a fragment
    text, fewer = last_lines(data.decode("utf-8", "replace"), max_lines)
    cut = "time" if timed else "bytes" if older else "lines" if fewer else None
    return LogRead(text, len(data), bool(cut), cut, seconds)


def _file_tail(fd, size, max_bytes, start, deadline):
    offset = max(start, size - max_bytes)
    os.lseek(fd, offset, os.SEEK_SET)
    parts, left = [], max_bytes
    while left > 0:
        if time.monotonic() >= deadline:  # a file on a stalled network mount
            return b"".join(parts), offset > start, True
        chunk = os.read(fd, min(CHUNK, left))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts), offset > start, False


def _stream_tail(fd, max_bytes, deadline):
    """(newest bytes, whether older ones were dropped, whether the deadline hit) of a pipe, FIFO or device."""
    kept, dropped = bytearray(), False
    while True:
        chunk = _read_by(fd, deadline)
        if chunk is None:
            return bytes(kept[-max_bytes:]), dropped or len(kept) > max_bytes, True
        if not chunk:
            return bytes(kept[-max_bytes:]), dropped or len(kept) > max_bytes, False
        kept += chunk
        if len(kept) > 2 * max_bytes:
            del kept[: len(kept) - max_bytes]
            dropped = True


def _read_by(fd, deadline):
    """The next chunk of `fd` (b"" at its end), or None when the deadline passes first. A FIFO no writer has
    opened yet does not poll readable: the read waits for a writer until the deadline."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if not _ready([fd], left):
            continue  # poll's clock may end a hair early: the loop ends at the deadline itself
        try:
            return os.read(fd, CHUNK)
        except BlockingIOError:  # woken without data (another reader took it)
            continue


def run_tail(argv, seconds=HOST_SECONDS, max_bytes=TAIL_BYTES, merge_stderr=False):
    """CommandRead of one command (its newest `max_bytes` of stdout, with stderr too when `merge_stderr`): it
    runs in its own process group, killed when the deadline passes. Never raises."""
    deadline = time.monotonic() + seconds
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                                start_new_session=True)
    except OSError as exc:
        why = "not found" if isinstance(exc, FileNotFoundError) else exc.strerror or str(exc)
        return CommandRead(None, b"", "%s: %s" % (argv[0], why), None, seconds)
    out, err = [bytearray(), max_bytes, 0], [bytearray(), ERR_BYTES, 0]  # newest bytes, cap, bytes seen
    pipes = {proc.stdout.fileno(): out}
    if proc.stderr is not None:
        pipes[proc.stderr.fileno()] = err
    code = None
    try:
        timed = _drain(pipes, deadline)
        if not timed:  # its output ended: it is exiting, or lingers with its pipes closed
            code = _reap(proc, max(0.1, deadline - time.monotonic()))
            timed = code is None
    finally:
        if proc.returncode is None:
            kill_group(proc)  # timed out or interrupted: nothing the command started lives on
            _reap(proc, 2)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    cut = "time" if timed else "bytes" if out[2] > max_bytes else None
    return CommandRead(code, bytes(out[0][-max_bytes:]), _error_line(argv[0], code, err[0], timed, seconds), cut,
                       seconds)


def _drain(pipes, deadline):
    """Read every pipe into its [buffer, cap, bytes seen] until each ends: whether the deadline hit first."""
    open_fds = set(pipes)
    while open_fds:
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        for fd in _ready(sorted(open_fds), left):
            chunk = os.read(fd, CHUNK)
            if not chunk:
                open_fds.discard(fd)
                continue
            kept = pipes[fd]
            kept[0] += chunk
            kept[2] += len(chunk)
            if len(kept[0]) > 2 * kept[1]:
                del kept[0][: len(kept[0]) - kept[1]]
    return False


def _ready(fds, seconds):
    """The descriptors among `fds` readable (or at their end) within `seconds`."""
    if not hasattr(select, "poll"):
        return select.select(fds, [], [], seconds)[0]
    poller = select.poll()  # poll: no FD_SETSIZE limit on the descriptor numbers
    for fd in fds:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return [fd for fd, _ in poller.poll(max(1, math.ceil(seconds * 1000)))]


def kill_group(proc):
    """SIGKILL the command's process group (its own session: everything it started)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _reap(proc, seconds):
    try:
        return proc.wait(timeout=seconds)  # a process stuck in the kernel may never die: do not wait forever
    except subprocess.TimeoutExpired:
        return None


def _error_line(name, code, err, timed, seconds):
    if timed:
        return "%s: %s" % (name, time_note(seconds))
    last = err.decode("utf-8", "replace").strip().splitlines()[-1:]
    if last:
        return last[0][:200]
    return None if code == 0 else "%s: exit %s" % (name, code)
