"""A command killed by a signal on the host, told apart from a dropped connection.

A local child shows it as a negative return code; a login shell that does not `exec` its last command reports
128+N instead; over ssh, transports/ssh_exit_signal.py reads sshd's `exit-signal` request. This module needs no
paramiko: a localhost scan runs without it.
"""

from __future__ import annotations

import signal
from typing import Any

from gpudiag.models import CommandResult

# Exit codes a shell gives for these (128+N) are read as the signal only when no frame came back.
FATAL_SIGNALS = ("SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGTERM")


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def killed_result(seen: dict[str, Any], stdout: bytes, stderr: bytes, duration_s: float) -> CommandResult:
    """The result of a command the server reported killed (`seen` from watch_exit_signal)."""
    return CommandResult(None, stdout, stderr, duration_s, signal=seen["signal"], core_dumped=seen["core_dumped"])


def kill_signal(command: CommandResult) -> tuple[str, str] | None:
    """(the signal's name, how it was learnt) for a command that died of a signal, or None."""
    if command.signal is not None:
        return command.signal, ""
    if command.exit_code is not None and 128 < command.exit_code < 160:
        shell_report = signal_name(command.exit_code - 128)
        if shell_report in FATAL_SIGNALS:
            return shell_report, f" (exit {command.exit_code}, the shell's report of it)"
    return None


def describe_kill(command: CommandResult, oom_hint: bool = True) -> str | None:
    """The one-line reason for a command that died of a signal, or None. `oom_hint`: for SIGKILL, point at the
    kernel log (False once the log was read: gpudiag/oom_check.py says what it found)."""
    killed = kill_signal(command)
    if killed is None:
        return None
    name, how = killed
    oom = (
        "; the kernel's OOM killer sends SIGKILL too, look for it in the host's kernel log"
        if name == "SIGKILL" and oom_hint
        else ""
    )
    core = " and dumped core" if command.core_dumped else ""
    return f"the probe process was killed by {name} on the host{how}{core}{oom}"
