"""sshd reports a command killed by a signal with an `exit-signal` request (RFC 4254 6.10: signal name without
"SIG", core dumped, message); paramiko ignores that request and leaves the exit status at -1, the same as a closed
connection, so `watch_exit_signal` reads it off the channel first."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import paramiko
from paramiko.common import MSG_CHANNEL_REQUEST

_lock = threading.Lock()
_watched: weakref.WeakKeyDictionary[paramiko.Channel, dict[str, Any]] = weakref.WeakKeyDictionary()


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
