"""Runs a command on a host over SSH (paramiko): keys, agent, ProxyJump, host-key checks, one deadline.

The whole run, connection included, is bounded by `timeout`; `close()` from another thread (Ctrl-C)
aborts a connect or a running command at once. The argv is written by transports/shell.py, so every
login shell (bash, dash, zsh, tcsh, fish) reads the same words; a word none can be trusted with is refused.
"""

from __future__ import annotations

import errno
import functools
import getpass
import logging
import os
import select
import socket
import threading
import time
from typing import Any, Callable

import paramiko

from gpudiag.models import (
    AUTH_FAILED,
    INTERRUPTED,
    TIMEOUT,
    UNREACHABLE,
    CommandResult,
    Host,
)
from gpudiag.transports.base import TransportError
from gpudiag.transports.capture import DEFAULT_OUTPUT_LIMIT, BoundedCapture
from gpudiag.transports.events import EventReader
from gpudiag.transports.exit_signal import killed_result
from gpudiag.transports.ssh_exit_signal import watch_exit_signal
from gpudiag.transports.hostkeys import HostKeyChecker, HostKeyError, host_id
from gpudiag.transports.shell import UnsafeWord, command_line
from gpudiag.transports.ssh_support import (
    RecordingSocket,
    connect_error,
    describe_failure,
    drain,
    feed,
    parse_jump,
    shutdown,
)

# paramiko logs handshake failures at ERROR; without a handler Python would print them on stderr,
# in the middle of the progress output. Every failure becomes a host status instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

KEEPALIVE_S = 15
_RSA_ALGORITHMS = ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]


class _Stopped(Exception):
    """The deadline passed or close() was called while connecting."""


class _CheckPolicy(paramiko.MissingHostKeyPolicy):
    """paramiko asks this about every server key (its own host-key store is left empty on purpose)."""

    def __init__(self, checker: HostKeyChecker):
        self.checker = checker

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        self.checker.check(hostname, key)


class SSHTransport:
    def __init__(
        self, host: Host, accept_new: bool = False, known_hosts: str | None = None, connect_timeout: float = 10.0
    ):
        self.host = host
        self.checker = HostKeyChecker(accept_new=accept_new, own_file=known_hosts)
        self.connect_timeout = connect_timeout
        self.user = host.user or getpass.getuser()
        self._lock = threading.Lock()
        self._resources: list[Any] = []  # sockets, paramiko clients and channels to tear down
        self._closed = threading.Event()  # close() was called
        self._expired = threading.Event()  # the run's deadline passed

    # -- public ---------------------------------------------------------------------------------
    def run(
        self,
        argv: list[str],
        stdin: bytes,
        timeout: float,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        events: EventReader | None = None,
    ) -> CommandResult:
        started = time.monotonic()
        self._output_limit = output_limit
        self._events = events
        deadline = started + timeout
        self._expired.clear()
        watchdog = threading.Timer(timeout, self._expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            try:
                client = self._connect(deadline)
            except (_Stopped, TransportError) as exc:
                if self._closed.is_set():
                    raise TransportError(INTERRUPTED, "closed while connecting") from None
                if self._expired.is_set() or isinstance(exc, _Stopped):
                    raise TransportError(
                        TIMEOUT, f"no SSH session within the {timeout:.0f} s deadline (connecting to {self._where()})"
                    ) from None
                raise
            return self._execute(client, argv, stdin, deadline, started)
        finally:
            watchdog.cancel()
            self._teardown()

    def close(self) -> None:
        """Abort whatever is in flight and free the connection; safe from any thread, idempotent."""
        self._closed.set()
        self._teardown()

    # -- connecting -----------------------------------------------------------------------------
    def _where(self) -> str:
        port = f":{self.host.port}" if self.host.port else ""
        via = f" via {self.host.jump}" if self.host.jump else ""
        return f"{self.user}@{self.host.address}{port}{via}"

    def _connect(self, deadline: float) -> paramiko.SSHClient:
        """Connect through each ProxyJump hop in turn (`hop1,hop2`), each over the previous one's
        direct-tcpip channel, then to the host itself. Every hop's host key is checked too."""
        hops = [parse_jump(part.strip(), self.user) for part in (self.host.jump or "").split(",") if part.strip()]
        hops.append((self.user, self.host.address, self.host.port or 22))
        previous: paramiko.SSHClient | None = None
        previous_label = ""
        for index, (user, address, port) in enumerate(hops):
            last = index == len(hops) - 1
            label = "" if last else f"jump host {user}@{address}:{port}: "
            make_sock: Callable[[], Any]
            if previous is None:
                make_sock = functools.partial(self._tcp, address, port, deadline)
            else:
                make_sock = functools.partial(self._tunnel, previous, address, port, previous_label, deadline)
            previous = self._open_client(address, port, user, make_sock, deadline, label)
            previous_label = label
        assert previous is not None
        return previous

    def _tunnel(self, via: paramiko.SSHClient, address: str, port: int, via_label: str, deadline: float) -> Any:
        try:
            return via.get_transport().open_channel(  # type: ignore[union-attr]
                "direct-tcpip", (address, port), ("127.0.0.1", 0), timeout=self._limit(deadline)
            )
        except paramiko.ChannelException as exc:
            raise TransportError(UNREACHABLE, f"{via_label}cannot reach {address}:{port}: {exc.text}") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if self._closed.is_set() or self._expired.is_set():
                raise _Stopped() from None
            raise TransportError(UNREACHABLE, f"{via_label}cannot open a tunnel to {address}:{port}: {exc}") from None

    def _limit(self, deadline: float) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or self._closed.is_set() or self._expired.is_set():
            raise _Stopped()
        return min(self.connect_timeout, remaining)

    def _tcp(self, address: str, port: int, deadline: float) -> socket.socket:
        """A TCP connection made in short slices, so close() and the deadline can interrupt it."""
        try:
            family, kind, proto, _, sockaddr = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0]
        except socket.gaierror as exc:
            raise TransportError(UNREACHABLE, f"cannot resolve {address!r}: {exc.strerror}") from None
        sock = socket.socket(family, kind, proto)
        self._track(sock)
        sock.setblocking(False)
        limit_at = time.monotonic() + self._limit(deadline)
        code = sock.connect_ex(sockaddr)
        while code in (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
            remaining = min(limit_at, deadline) - time.monotonic()
            self._limit(deadline)
            if remaining <= 0:
                raise TransportError(
                    UNREACHABLE,
                    f"{address}:{port}: TCP connect timed out after "
                    f"{self.connect_timeout:.0f} s (no answer; firewall or host down?)",
                )
            _, writable, _ = select.select([], [sock], [], min(0.1, remaining))
            if writable:
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code != 0:
            raise TransportError(UNREACHABLE, f"{address}:{port}: {connect_error(code)}")
        sock.setblocking(True)
        return RecordingSocket(sock)  # type: ignore[return-value]

    def _open_client(
        self, address: str, port: int, user: str, make_sock: Callable[[], Any], deadline: float, label: str
    ) -> paramiko.SSHClient:
        try:
            sock = make_sock()
        except TransportError as exc:
            raise TransportError(exc.status, label + exc.reason) from None
        self._track(sock)
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(_CheckPolicy(self.checker))
        self._track(client)
        name = host_id(address, port)
        limit = self._limit(deadline)
        identity = os.path.expanduser(self.host.identity_file) if self.host.identity_file else None
        if identity and not os.path.isfile(identity):
            raise TransportError(AUTH_FAILED, f"{label}identity file {identity}: no such file")
        if identity and not os.access(identity, os.R_OK):
            raise TransportError(AUTH_FAILED, f"{label}identity file {identity}: not readable")
        try:
            client.connect(
                address,
                port,
                username=user,
                sock=sock,
                key_filename=identity,
                allow_agent=True,
                look_for_keys=True,
                timeout=limit,
                banner_timeout=limit,
                auth_timeout=limit,
                channel_timeout=limit,
                transport_factory=self._transport_factory(name),
            )
        except HostKeyError as exc:
            raise TransportError(exc.status, label + exc.reason) from None
        except Exception as exc:
            if self._closed.is_set() or self._expired.is_set():
                raise _Stopped() from None
            heard = sock.non_ssh() if isinstance(sock, RecordingSocket) else b""
            raise TransportError(
                *describe_failure(exc, client, address, port, user, identity, limit, label, heard)
            ) from None
        client.get_transport().set_keepalive(KEEPALIVE_S)  # type: ignore[union-attr]
        return client

    def _transport_factory(self, name: str) -> Callable[..., paramiko.Transport]:
        """Ask the server for a key type we already know for it, so a known host is checked, not 'new'."""
        preferred: list[str] = []
        for kind in self.checker.known_types(name):
            preferred += _RSA_ALGORITHMS if kind == "ssh-rsa" else [kind]

        def make(sock: Any, disabled_algorithms: dict | None = None) -> paramiko.Transport:
            transport = paramiko.Transport(sock, disabled_algorithms=disabled_algorithms)
            options = transport.get_security_options()
            available = list(options.key_types)
            first = [k for k in preferred if k in available]
            options.key_types = first + [k for k in available if k not in first]
            return transport

        return make

    # -- running --------------------------------------------------------------------------------
    def _execute(
        self, client: paramiko.SSHClient, argv: list[str], stdin: bytes, deadline: float, started: float
    ) -> CommandResult:
        try:
            command_line(argv)
        except UnsafeWord as exc:  # checked before the scan too; never sent
            raise TransportError(UNREACHABLE, f"refused to run: {exc}") from None
        try:
            channel = client.get_transport().open_session(timeout=self._limit(deadline))  # type: ignore
            self._track(channel)
            exit_signal = watch_exit_signal(channel)
            channel.exec_command(command_line(argv))
        except (_Stopped, paramiko.SSHException, OSError, EOFError) as exc:
            return self._stopped_result(started, exc)
        capture = BoundedCapture(self._output_limit, self._events)
        overflowed = threading.Event()

        def stop_at_cap() -> None:
            overflowed.set()
            _close_quietly(channel)  # the host's flood ends here; the other reader sees EOF

        threads = [
            threading.Thread(target=feed, args=(channel, stdin), daemon=True),
            threading.Thread(target=drain, args=(channel.recv, capture.add_stdout, stop_at_cap), daemon=True),
            threading.Thread(target=drain, args=(channel.recv_stderr, capture.add_stderr, lambda: None), daemon=True),
        ]
        for thread in threads:
            thread.start()
        for reader in threads[1:]:
            reader.join(max(0.0, deadline - time.monotonic()))
        if overflowed.is_set():
            return CommandResult(
                None, capture.stdout, capture.stderr, time.monotonic() - started, overflow=capture.describe_overflow()
            )
        if not any(reader.is_alive() for reader in threads[1:]) and not self._closed.is_set():
            # Both streams ended; the exit status follows the EOFs closely.
            channel.status_event.wait(max(0.0, min(5.0, deadline - time.monotonic())))
            # The deadline timer closing the channel also ends the readers and sets the status event
            # (exit status -1): that is a timeout, not the command's own exit.
            if exit_signal and not self._expired.is_set():  # killed on the host: not a dropped connection
                return killed_result(exit_signal, capture.stdout, capture.stderr, time.monotonic() - started)
            if channel.exit_status_ready() and not self._expired.is_set() and channel.exit_status != -1:
                return CommandResult(channel.exit_status, capture.stdout, capture.stderr, time.monotonic() - started)
        if self._closed.is_set():
            raise TransportError(INTERRUPTED, "the run was interrupted")
        if not self._expired.is_set() and time.monotonic() < deadline:
            # The connection dropped without an exit status (sshd killed, network gone).
            raise TransportError(UNREACHABLE, f"{self._where()}: the connection closed before the command finished")
        _close_quietly(channel)  # the deadline timer may be closing the same channel at this moment
        return CommandResult(None, capture.stdout, capture.stderr, time.monotonic() - started, timed_out=True)

    def _stopped_result(self, started: float, exc: BaseException) -> CommandResult:
        if self._closed.is_set():
            raise TransportError(INTERRUPTED, "the run was interrupted")
        if isinstance(exc, _Stopped) or self._expired.is_set():
            return CommandResult(None, b"", b"", time.monotonic() - started, timed_out=True)
        raise TransportError(UNREACHABLE, f"{self._where()}: could not start the command: {exc}")

    # -- teardown -------------------------------------------------------------------------------
    def _track(self, resource: Any) -> None:
        with self._lock:
            self._resources.append(resource)
        if self._closed.is_set():
            self._teardown()

    def _expire(self) -> None:
        self._expired.set()
        self._teardown()

    def _teardown(self) -> None:
        """Close in reverse order of opening: channel, destination client, jump client, sockets."""
        with self._lock:
            resources, self._resources = self._resources[::-1], []
        for resource in resources:
            try:
                if isinstance(resource, socket.socket):
                    shutdown(resource)
                resource.close()
            except Exception:
                pass


def _close_quietly(channel: paramiko.Channel) -> None:
    try:
        channel.close()
    except Exception:
        pass
