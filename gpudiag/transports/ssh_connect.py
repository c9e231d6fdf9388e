"""Opening an SSH session to a host with paramiko: each ProxyJump hop in turn, TCP made in short slices, every
server key checked by gpudiag's own host-key checker, every failure a TransportError with a one-line reason.

Everything opened is handed to the transport's `track` so its teardown closes it; `stopped()` (close() was
called or the deadline passed) ends a connect at the next slice.
"""

from __future__ import annotations

import errno
import functools
import os
import select
import socket
import time
from typing import Any, Callable

import paramiko

from gpudiag.models import AUTH_FAILED, UNREACHABLE, Host
from gpudiag.transports.base import TransportError
from gpudiag.transports.hostkeys import HostKeyChecker, HostKeyError, host_id
from gpudiag.transports.ssh_support import RecordingSocket, connect_error, describe_failure, parse_jump

KEEPALIVE_S = 15
_RSA_ALGORITHMS = ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]


class Stopped(Exception):
    """The deadline passed or close() was called while connecting."""


class _CheckPolicy(paramiko.MissingHostKeyPolicy):
    """paramiko asks this about every server key (its own host-key store is left empty on purpose)."""

    def __init__(self, checker: HostKeyChecker):
        self.checker = checker

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        self.checker.check(hostname, key)


class Connector:
    """Connects to one host as one user, within a deadline each call is given."""

    def __init__(
        self,
        host: Host,
        user: str,
        checker: HostKeyChecker,
        connect_timeout: float,
        track: Callable[[Any], None],
        stopped: Callable[[], bool],
        hop_checker: HostKeyChecker | None = None,
    ):
        """`hop_checker` checks the jump hosts' keys (default: `checker`): the host's own ssh config
        (its known-hosts files, StrictHostKeyChecking) is not a jump host's."""
        self.host = host
        self.user = user
        self.checker = checker
        self.hop_checker = hop_checker or checker
        self.connect_timeout = connect_timeout
        self._track = track
        self._stopped = stopped

    def connect(self, deadline: float) -> paramiko.SSHClient:
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
            checker = self.checker if last else self.hop_checker
            previous = self._open_client(address, port, user, make_sock, deadline, label, checker)
            previous_label = label
        assert previous is not None
        return previous

    def _tunnel(self, via: paramiko.SSHClient, address: str, port: int, via_label: str, deadline: float) -> Any:
        try:
            return via.get_transport().open_channel(  # type: ignore[union-attr]
                "direct-tcpip", (address, port), ("127.0.0.1", 0), timeout=self.limit(deadline)
            )
        except paramiko.ChannelException as exc:
            raise TransportError(UNREACHABLE, f"{via_label}cannot reach {address}:{port}: {exc.text}") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if self._stopped():
                raise Stopped() from None
            raise TransportError(UNREACHABLE, f"{via_label}cannot open a tunnel to {address}:{port}: {exc}") from None

    def limit(self, deadline: float) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or self._stopped():
            raise Stopped()
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
        limit_at = time.monotonic() + self.limit(deadline)
        code = sock.connect_ex(sockaddr)
        while code in (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
            remaining = min(limit_at, deadline) - time.monotonic()
            self.limit(deadline)
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
        self,
        address: str,
        port: int,
        user: str,
        make_sock: Callable[[], Any],
        deadline: float,
        label: str,
        checker: HostKeyChecker,
    ) -> paramiko.SSHClient:
        try:
            sock = make_sock()
        except TransportError as exc:
            raise TransportError(exc.status, label + exc.reason) from None
        self._track(sock)
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(_CheckPolicy(checker))
        self._track(client)
        name = host_id(address, port)
        limit = self.limit(deadline)
        identity = self._identity(label)
        try:
            client.connect(
                address,
                port,
                username=user,
                sock=sock,
                key_filename=identity,  # type: ignore[arg-type]  # paramiko takes a list too
                allow_agent=True,
                look_for_keys=True,
                timeout=limit,
                banner_timeout=limit,
                auth_timeout=limit,
                channel_timeout=limit,
                transport_factory=self._transport_factory(name, checker),
            )
        except HostKeyError as exc:
            raise TransportError(exc.status, label + exc.reason) from None
        except Exception as exc:
            if self._stopped():
                raise Stopped() from None
            heard = sock.non_ssh() if isinstance(sock, RecordingSocket) else b""
            raise TransportError(
                *describe_failure(exc, client, address, port, user, identity, limit, label, heard)
            ) from None
        client.get_transport().set_keepalive(KEEPALIVE_S)  # type: ignore[union-attr]
        return client

    def _identity(self, label: str) -> str | list[str] | None:
        """The key files offered before the agent's and the default ones: the inventory's one (which must
        be readable), or every IdentityFile of the host's ssh config that exists, in order (as ssh, which
        skips a missing one)."""
        from_config = self.host.ssh.identity_files if self.host.ssh else ()
        if from_config:
            return [path for path in from_config if os.path.isfile(path) and os.access(path, os.R_OK)] or None
        identity = os.path.expanduser(self.host.identity_file) if self.host.identity_file else None
        if identity and not os.path.isfile(identity):
            raise TransportError(AUTH_FAILED, f"{label}identity file {identity}: no such file")
        if identity and not os.access(identity, os.R_OK):
            raise TransportError(AUTH_FAILED, f"{label}identity file {identity}: not readable")
        return identity

    def _transport_factory(self, name: str, checker: HostKeyChecker) -> Callable[..., paramiko.Transport]:
        """Ask the server for a key type we already know for it, so a known host is checked, not 'new'."""
        preferred: list[str] = []
        for kind in checker.known_types(name):
            preferred += _RSA_ALGORITHMS if kind == "ssh-rsa" else [kind]

        def make(sock: Any, disabled_algorithms: dict | None = None) -> paramiko.Transport:
            transport = paramiko.Transport(sock, disabled_algorithms=disabled_algorithms)
            options = transport.get_security_options()
            available = list(options.key_types)
            # order_hostkeyalgs: the known types first, in the default order (ed25519 before ECDSA before RSA)
            first = [k for k in available if k in preferred]
            options.key_types = first + [k for k in available if k not in first]
            return transport

        return make
