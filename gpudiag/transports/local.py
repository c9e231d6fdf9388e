"""Runs the command as a child process on this machine (the `localhost` target), output bounded."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from typing import IO

from gpudiag.models import CommandResult
from gpudiag.transports.capture import DEFAULT_OUTPUT_LIMIT, BoundedCapture
from gpudiag.transports.exit_signal import signal_name
from gpudiag.transports.events import EventReader
from probes.child import exited

KILL_GRACE_S = 2.0  # after the deadline's kill, how long to wait for the pipes to close
# After close()'s SIGTERM, how long the runner gets to end its children's process groups (they lead their own, so
# a kill of the runner's group misses them) and itself before its group is killed.
STOP_GRACE_S = 2.0
CHUNK = 65536


class LocalTransport:
    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = threading.Event()

    def run(
        self,
        argv: list[str],
        stdin: bytes,
        timeout: float,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        events: EventReader | None = None,
        hold_stdin: bool = False,
    ) -> CommandResult:
        """`hold_stdin`: stdin stays open after `stdin` is written, until the command ends or is stopped (a runner
        in a container reads its end as the control side gone)."""
        started = time.monotonic()
        try:
            # A new session so a deadline or Ctrl-C can kill the whole tree, probes' children included.
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            return CommandResult(127, b"", f"{argv[0]}: {exc.strerror}\n".encode(), 0.0)
        self._proc = proc
        if self._closed.is_set():  # close() ran while the child was being started
            self._kill(proc)
        capture = BoundedCapture(output_limit, events)
        try:
            ending = _pump(proc, stdin, capture, started + timeout, self._closed, hold_stdin)
            if ending != "done":
                _close_quietly(proc.stdin)  # first: a held stdin's end is what stops a runner in a container
            if ending == "done":
                try:
                    proc.wait(max(0.0, started + timeout - time.monotonic()))
                except subprocess.TimeoutExpired:  # the pipes closed but the process lives on
                    ending = "timeout"
            if ending == "closed":
                _await_exit(proc, STOP_GRACE_S)
            if ending != "done":
                self._kill(proc)
                _pump(proc, b"", capture, time.monotonic() + KILL_GRACE_S, threading.Event())
                try:
                    proc.wait(KILL_GRACE_S)
                except subprocess.TimeoutExpired:
                    pass
            duration = time.monotonic() - started
            if ending == "overflow":
                return CommandResult(
                    None, capture.stdout, capture.stderr, duration, overflow=capture.describe_overflow()
                )
            if ending == "done" and proc.returncode is not None and proc.returncode < 0:  # died of a signal
                return CommandResult(
                    None, capture.stdout, capture.stderr, duration, signal=signal_name(-proc.returncode)
                )
            if ending == "done":
                return CommandResult(proc.returncode, capture.stdout, capture.stderr, duration)
            return CommandResult(None, capture.stdout, capture.stderr, duration, timed_out=True)
        finally:
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                _close_quietly(pipe)
            self._proc = None

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes], signum: int = signal.SIGKILL) -> None:
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            proc.send_signal(signum)

    def close(self) -> None:
        """SIGTERM to the command's group now (the runner ends its children, then itself); run() kills what is
        left after STOP_GRACE_S, and a timer does it if run() is not there to."""
        self._closed.set()
        proc = self._proc
        if proc is not None and proc.returncode is None:
            self._kill(proc, signal.SIGTERM)
            timer = threading.Timer(STOP_GRACE_S + KILL_GRACE_S, self._kill_if_running, (proc,))
            timer.daemon = True
            timer.start()

    def _kill_if_running(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.returncode is None:
            self._kill(proc)


def _close_quietly(pipe: IO[bytes] | None) -> None:
    try:
        if pipe is not None:
            pipe.close()
    except OSError:
        pass


def _await_exit(proc: subprocess.Popen[bytes], within_s: float) -> None:
    """Wait for the leader to exit, leaving it unreaped so its group id cannot be reused before the group is
    killed."""
    ends = time.monotonic() + within_s
    while time.monotonic() < ends and not exited(proc):
        time.sleep(0.02)


def _pump(
    proc: subprocess.Popen[bytes],
    stdin: bytes,
    capture: BoundedCapture,
    deadline: float,
    stop: threading.Event,
    hold_stdin: bool = False,
) -> str:
    """Feed stdin (left open after it when `hold_stdin`) and read both pipes as data arrives, never holding more
    than the capture keeps. Returns "done" (both pipes ended), "timeout", "overflow" or "closed"."""
    selector = selectors.DefaultSelector()
    readers = {
        pipe.fileno(): pipe is proc.stdout
        for pipe in (proc.stdout, proc.stderr)
        if pipe is not None and not pipe.closed
    }  # fd → is stdout
    writer = proc.stdin if proc.stdin is not None and not proc.stdin.closed else None
    try:
        if writer is not None and stdin:
            os.set_blocking(writer.fileno(), False)
            selector.register(writer.fileno(), selectors.EVENT_WRITE)
        elif writer is not None:
            writer.close()
        for fd in readers:
            selector.register(fd, selectors.EVENT_READ)
        data, offset = memoryview(stdin), 0
        while readers:
            if stop.is_set():
                return "closed"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            for key, _ in selector.select(min(0.2, remaining)):
                fd = key.fd
                if fd not in readers:  # stdin
                    try:
                        offset += os.write(fd, data[offset : offset + CHUNK])
                    except BlockingIOError:
                        continue
                    except OSError:  # the command exited without reading it all
                        offset = len(data)
                    if offset >= len(data) and writer is not None:
                        selector.unregister(fd)
                        if not hold_stdin:
                            writer.close()
                    continue
                chunk = os.read(fd, CHUNK)
                if not chunk:
                    selector.unregister(fd)
                    del readers[fd]
                elif readers[fd]:
                    if not capture.add_stdout(chunk):
                        return "overflow"
                else:
                    capture.add_stderr(chunk)
        return "done"
    finally:
        selector.close()
