"""Runs the command as a child process on this machine (the `localhost` target)."""
from __future__ import annotations

import os
import signal
import subprocess
import time

from gpudiag.models import CommandResult

KILL_GRACE_S = 2.0   # after the deadline's kill, how long to wait for the pipes to close


class LocalTransport:
    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False

    def run(self, argv: list[str], stdin: bytes, timeout: float) -> CommandResult:
        started = time.monotonic()
        try:
            # A new session so a deadline or Ctrl-C can kill the whole tree, probes' children included.
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            return CommandResult(127, b"", f"{argv[0]}: {exc.strerror}\n".encode(), 0.0)
        self._proc = proc
        if self._closed:   # close() ran while the child was being started
            self._kill(proc)
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
            return CommandResult(proc.returncode, out, err, time.monotonic() - started)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            out, err = self._collect_after_kill(proc)
            return CommandResult(None, out, err, time.monotonic() - started, timed_out=True)
        finally:
            self._proc = None

    @staticmethod
    def _collect_after_kill(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
        """What the killed tree printed. A descendant that left the process group (setsid, a daemon)
        may still hold the pipes open: wait briefly, then close them and keep the partial output."""
        try:
            return proc.communicate(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired as exc:
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            try:
                proc.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            return exc.stdout or b"", exc.stderr or b""

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()

    def close(self) -> None:
        self._closed = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            self._kill(proc)
