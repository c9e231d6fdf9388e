"""Stateless pieces of the ssh transport: jump specs, one-line failure reasons, stream pumps."""

from __future__ import annotations

import errno
import os
import socket
from typing import Callable

import paramiko

from gpudiag.models import AUTH_FAILED, UNREACHABLE
from gpudiag.transports.base import TransportError


def parse_jump(spec: str, default_user: str) -> tuple[str, str, int]:
    """`[user@]host[:port]` → (user, host, port)."""
    user, at, rest = spec.rpartition("@")
    host, port = rest, 22
    if rest.startswith("["):  # [v6addr]:port
        host, _, tail = rest[1:].partition("]")
        port = int(tail[1:]) if tail.startswith(":") and tail[1:].isdigit() else 22
    elif rest.count(":") == 1:
        host, _, raw = rest.partition(":")
        if not raw.isdigit():
            raise TransportError(UNREACHABLE, f"jump host {spec!r}: port {raw!r} is not a number")
        port = int(raw)
    if not host:
        raise TransportError(UNREACHABLE, f"jump host {spec!r}: no host name")
    return (user if at else default_user), host, port


def describe_failure(
    exc: Exception,
    client: paramiko.SSHClient,
    address: str,
    port: int,
    user: str,
    identity: str | list[str] | None,
    limit: float,
    label: str,
    heard: bytes = b"",
) -> tuple[str, str]:
    """`heard`: the first bytes the server sent, when they were not an SSH banner."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, paramiko.PasswordRequiredException):
        return (
            AUTH_FAILED,
            f"{label}{user}@{address}: private key {_names(identity)} is encrypted; load it into ssh-agent",
        )
    if isinstance(exc, paramiko.AuthenticationException):
        return AUTH_FAILED, f"{label}{user}@{address}:{port}: server refused every key offered ({offered(identity)})"
    if "No authentication methods available" in text:
        return AUTH_FAILED, (
            f"{label}{user}@{address}:{port}: no key to offer (no identity file, no "
            f"ssh-agent, no default key in ~/.ssh)"
        )
    transport = client.get_transport()
    if transport is not None and getattr(transport, "host_key", None) is not None and not transport.is_authenticated():
        # The server's key was checked, so whatever broke happened while authenticating (bad key file...).
        return AUTH_FAILED, f"{label}{user}@{address}:{port}: authentication failed: {text}"
    if (
        "protocol banner" in text
        or "protocol version" in text
        or (transport is not None and not transport.remote_version)
    ):
        if heard:
            return UNREACHABLE, (
                f"{label}{address}:{port} answered, but not with SSH: it sent "
                f"{shown_bytes(heard)} (another service on that port?)"
            )
        return UNREACHABLE, (
            f"{label}{address}:{port} accepts TCP but sent no SSH banner within "
            f"{limit:.0f} s (not an SSH server, or overloaded)"
        )
    if isinstance(exc, (EOFError, ConnectionResetError)):
        return UNREACHABLE, f"{label}{address}:{port}: connection closed during the SSH handshake"
    return UNREACHABLE, f"{label}{address}:{port}: SSH handshake failed: {type(exc).__name__}: {text}"


def connect_error(code: int) -> str:
    if code == errno.ECONNREFUSED:
        return "connection refused (nothing listens on that port)"
    if code == errno.EHOSTUNREACH:
        return "no route to host"
    if code == errno.ENETUNREACH:
        return "network unreachable"
    if code == errno.ETIMEDOUT:
        return "TCP connect timed out"
    return os.strerror(code)


def _names(identity: str | list[str] | None) -> str:
    return identity if isinstance(identity, str) else " or ".join(identity or [])


def offered(identity: str | list[str] | None) -> str:
    many = isinstance(identity, list) and len(identity) > 1
    offered = [f"key file{'s' if many else ''} {', '.join(identity) if isinstance(identity, list) else identity}"]
    offered = offered if identity else []
    if os.environ.get("SSH_AUTH_SOCK"):
        offered.append("ssh-agent keys")
    offered.append("default keys in ~/.ssh")
    return ", ".join(offered)


def shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def feed(channel: paramiko.Channel, data: bytes, hold: bool = False) -> None:
    """Send `data`, then EOF unless `hold` (stdin then stays open until the session ends)."""
    try:
        channel.sendall(data)
        if not hold:
            channel.shutdown_write()
    except (OSError, EOFError, paramiko.SSHException):
        pass  # the command exited or the channel closed: the readers see it


def drain(recv: Callable[[int], bytes], add: Callable[[bytes], object], on_stop: Callable[[], None]) -> None:
    """Read a stream until it ends; `add` returning False (over the output cap) stops it and calls
    `on_stop`, which closes the channel."""
    try:
        while True:
            data = recv(65536)
            if not data:
                return
            if add(data) is False:
                on_stop()
                return
    except (OSError, EOFError, paramiko.SSHException):
        return


def shown_bytes(data: bytes, limit: int = 60) -> str:
    """Bytes from a host as a short, escaped literal: nothing in it reaches a terminal raw."""
    text = repr(bytes(data[:limit]))[1:]
    return text + (f" … ({len(data)} bytes)" if len(data) > limit else "")


class RecordingSocket:
    """A socket that remembers the first bytes it received, so a port that answers with something
    other than SSH can be told apart from one that answers nothing."""

    KEEP = 256

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self.first = b""

    def recv(self, size: int, *args: int) -> bytes:
        data = self._sock.recv(size, *args)
        if len(self.first) < self.KEEP:
            self.first += data[: self.KEEP - len(self.first)]
        return data

    def __getattr__(self, name: str) -> object:
        return getattr(self._sock, name)

    def non_ssh(self) -> bytes:
        """What the server sent, when it does not start like an SSH banner (b"" otherwise)."""
        lines = self.first.split(b"\n")
        return b"" if any(line.startswith(b"SSH-") for line in lines) or not self.first else self.first
