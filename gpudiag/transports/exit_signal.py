"""A command killed by a signal on the host, told apart from a dropped connection.

sshd reports such an end with an `exit-signal` request (RFC 4254 6.10: signal name without "SIG", core
dumped, message); paramiko ignores that request and leaves the exit status at -1, the same as a closed
connection, so `watch_exit_signal` reads it off the channel first. A local child shows it as a negative
return code; a login shell that does not `exec` its last command reports 128+N instead.
"""

from __future__ import annotations

import signal
import threading
import weakref
from typing import Any

import paramiko
from paramiko.common import MSG_CHANNEL_REQUEST

from gpudiag.models import CommandResult

_lock = threading.Lock()
_watched: weakref.WeakKeyDictionary[paramiko.Channel, dict[str, Any]] = weakref.WeakKeyDictionary()

# Exit codes a shell gives for these (128+N) are read as the signal only when no frame came back.
FATAL_SIGNALS = ("SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGTERM")


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def watch_exit_signal(channel: paramiko.Channel) -> dict[str, Any]:
    """Fills the returned dict with `signal` ("SIGKILL") and `core_dumped` if the server reports an
    exit signal on this channel, and sets the channel's status event as an exit status would. paramiko
    dispatches channel requests through a per-class table: this transport gets its own copy."""
    seen: dict[str, Any] = {}
    transport: Any = getattr(channel, "get_transport", lambda: None)()
    table = getattr(transport, "_channel_handler_table", None)  # private: a paramiko without it is not watched
    if not isinstance(table, dict) or MSG_CHANNEL_REQUEST not in table:
        return seen
    with _lock:
        _watched[channel] = seen
        if "_channel_handler_table" not in vars(transport):
            transport._channel_handler_table = {**table, MSG_CHANNEL_REQUEST: _handle_request}
    return seen


def _handle_request(channel: paramiko.Channel, message: Any) -> None:
    with _lock:
        seen = _watched.get(channel)
    if seen is not None:
        start = message.packet.tell()
        try:
            if message.get_text() == "exit-signal":
                message.get_boolean()  # want_reply: sshd sends False
                seen["signal"] = "SIG" + message.get_text()
                seen["core_dumped"] = message.get_boolean()
                channel.status_event.set()
                return
        except Exception:  # a short or odd packet: paramiko's own handler judges it
            pass
        message.packet.seek(start)
    paramiko_handler: Any = paramiko.Channel
    paramiko_handler._handle_request(channel, message)


def killed_result(seen: dict[str, Any], stdout: bytes, stderr: bytes, duration_s: float) -> CommandResult:
    """The result of a command the server reported killed (`seen` from watch_exit_signal)."""
    return CommandResult(None, stdout, stderr, duration_s, signal=seen["signal"], core_dumped=seen["core_dumped"])


def describe_kill(command: CommandResult) -> str | None:
    """The one-line reason for a command that died of a signal, or None."""
    name = command.signal
    how = ""
    if name is None and command.exit_code is not None and 128 < command.exit_code < 160:
        shell_report = signal_name(command.exit_code - 128)
        if shell_report in FATAL_SIGNALS:
            name, how = shell_report, f" (exit {command.exit_code}, the shell's report of it)"
    if name is None:
        return None
    oom = (
        "; the kernel's OOM killer sends SIGKILL too, look for it in the host's kernel log" if name == "SIGKILL" else ""
    )
    core = " and dumped core" if command.core_dumped else ""
    return f"the probe process was killed by {name} on the host{how}{core}{oom}"
