"""Runs a command on a host over SSH (paramiko): keys, agent, ProxyJump, host-key checks, one deadline.

Connecting (hops, TCP, host keys, authentication) is transports/ssh_connect.py; this module runs the command
on the session and tears down what both opened. The whole run, connection included, is bounded by `timeout`;
`close()` from another thread (Ctrl-C) aborts a connect or a running command at once. The argv is written by
transports/shell.py, so every login shell (bash, dash, zsh, tcsh, fish) reads the same words; a word none can be
trusted with is refused.
"""

from __future__ import annotations

import getpass
import logging
import socket
import threading
import time
from typing import Any, Callable

import paramiko

from gpudiag.models import INTERRUPTED, TIMEOUT, UNREACHABLE, CommandResult, Host
from gpudiag.ssh_options import SshOptions
from gpudiag.transports.base import TransportError
from gpudiag.transports.capture import DEFAULT_OUTPUT_LIMIT, BoundedCapture
from gpudiag.transports.events import EventReader
from gpudiag.transports.exit_signal import killed_result
from gpudiag.transports.hostkeys import HostKeyChecker
from gpudiag.transports.shell import UnsafeWord, command_line
from gpudiag.transports.ssh_connect import Connector, Stopped
from gpudiag.transports.ssh_exit_signal import watch_exit_signal
from gpudiag.transports.ssh_support import drain, feed, shutdown

# paramiko logs handshake failures at ERROR; without a handler Python would print them on stderr,
# in the middle of the progress output. Every failure becomes a host status instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
# After the command's exit status, how long its output may stay open with nothing arriving before the
# session is closed: a grandchild holding stdout open would otherwise cost the whole deadline.
EXIT_GRACE_S = 2.0
DEFAULT_CONNECT_TIMEOUT = 10.0


class SSHTransport:
    def __init__(
        self,
        host: Host,
        accept_new: bool = False,
        known_hosts: str | None = None,
        connect_timeout: float | None = None,
    ):
        """`connect_timeout`: --connect-timeout when given; else the host's ConnectTimeout, else 10 s."""
        self.host = host
        options = host.ssh or SshOptions()
        self.checker = HostKeyChecker(
            accept_new=accept_new or options.accept_new,
            own_file=known_hosts,
            extra_files=list(options.known_hosts) or None,
            record_to=options.record_to,
        )
        if connect_timeout is None:
            connect_timeout = options.connect_timeout or DEFAULT_CONNECT_TIMEOUT
        self.user = host.user or getpass.getuser()
        self._lock = threading.Lock()
        self._resources: list[Any] = []  # sockets, paramiko clients and channels to tear down
        self._closed = threading.Event()  # close() was called
        self._expired = threading.Event()  # the run's deadline passed
        # a jump host is checked as before: the files and policy of the host's own ssh config are not its own
        hops = HostKeyChecker(accept_new=accept_new, own_file=known_hosts) if host.ssh and host.jump else None
        self._connector = Connector(host, self.user, self.checker, connect_timeout, self._track, self._stopped, hops)

    # -- public ---------------------------------------------------------------------------------
    def run(
        self,
        argv: list[str],
        stdin: bytes,
        timeout: float,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
        events: EventReader | None = None,
        hold_stdin: bool = False,
    ) -> CommandResult:
        """`hold_stdin`: no EOF is sent after `stdin`; the session's end closes it (a runner in a container reads
        that as the control side gone)."""
        started = time.monotonic()
        try:  # before connecting: a host whose command line no login shell reads alike is not contacted
            command_line(argv)
        except UnsafeWord as exc:
            raise TransportError(UNREACHABLE, f"refused to run: python or container {exc}") from None
        self._output_limit = output_limit
        self._events = events
        self._hold_stdin = hold_stdin
        deadline = started + timeout
        self._expired.clear()
        watchdog = threading.Timer(timeout, self._expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            try:
                client = self._connect(deadline)
            except (Stopped, TransportError) as exc:
                if self._closed.is_set():
                    raise TransportError(INTERRUPTED, "closed while connecting") from None
                if self._expired.is_set() or isinstance(exc, Stopped):
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
        return self._connector.connect(deadline)

    # -- running --------------------------------------------------------------------------------
    def _execute(
        self, client: paramiko.SSHClient, argv: list[str], stdin: bytes, deadline: float, started: float
    ) -> CommandResult:
        try:
            command_line(argv)
        except UnsafeWord as exc:  # checked before the scan too; never sent
            raise TransportError(UNREACHABLE, f"refused to run: {exc}") from None
        try:
            channel = client.get_transport().open_session(timeout=self._connector.limit(deadline))  # type: ignore
            self._track(channel)
            exit_signal = watch_exit_signal(channel)
            channel.exec_command(command_line(argv))
        except (Stopped, paramiko.SSHException, OSError, EOFError) as exc:
            return self._stopped_result(started, exc)
        capture = BoundedCapture(self._output_limit, self._events)
        overflowed = threading.Event()
        threads = _start_streams(channel, stdin, capture, overflowed, self._hold_stdin)
        readers = threads[1:]
        if self._wait_for_readers(channel, readers, deadline, lambda: capture.total):
            # The command exited but something it started still holds its output open (a grandchild): what
            # it wrote is all there is, so the session is closed instead of waiting for the deadline.
            _close_quietly(channel)
            for reader in readers:
                reader.join(1.0)
            if exit_signal:
                return killed_result(exit_signal, capture.stdout, capture.stderr, time.monotonic() - started)
            return CommandResult(channel.exit_status, capture.stdout, capture.stderr, time.monotonic() - started)
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
        if not self._expired.is_set() and capture.frame_ended():
            # The output ended with a frame in it but no exit status came (the probe closed its output and
            # kept running, or the connection went): the frame is the answer; classify reads it.
            _close_quietly(channel)
            return CommandResult(None, capture.stdout, capture.stderr, time.monotonic() - started)
        if not self._expired.is_set() and time.monotonic() < deadline:
            # The connection dropped without an exit status (sshd killed, network gone).
            raise TransportError(UNREACHABLE, f"{self._where()}: the connection closed before the command finished")
        _close_quietly(channel)  # the deadline timer may be closing the same channel at this moment
        return CommandResult(None, capture.stdout, capture.stderr, time.monotonic() - started, timed_out=True)

    def _wait_for_readers(
        self, channel: paramiko.Channel, readers: list[threading.Thread], deadline: float, received: Callable[[], int]
    ) -> bool:
        """Wait for both output streams to end, up to the deadline; True when the command's exit status came
        and no output has arrived for EXIT_GRACE_S while a stream is still open."""
        quiet_since, seen = time.monotonic(), -1
        while any(reader.is_alive() for reader in readers) and time.monotonic() < deadline:
            for reader in readers:
                reader.join(min(0.1, max(0.0, deadline - time.monotonic())))
            if channel.status_event.is_set() and not self._stopped():
                if received() != seen:  # output still flowing after the exit status: not stuck yet
                    quiet_since, seen = time.monotonic(), received()
                if time.monotonic() - quiet_since >= EXIT_GRACE_S and any(r.is_alive() for r in readers):
                    return True
        return False

    def _stopped_result(self, started: float, exc: BaseException) -> CommandResult:
        if self._closed.is_set():
            raise TransportError(INTERRUPTED, "the run was interrupted")
        if isinstance(exc, Stopped) or self._expired.is_set():
            return CommandResult(None, b"", b"", time.monotonic() - started, timed_out=True)
        raise TransportError(UNREACHABLE, f"{self._where()}: could not start the command: {exc}")

    # -- teardown -------------------------------------------------------------------------------
    def _track(self, resource: Any) -> None:
        with self._lock:
            self._resources.append(resource)
        if self._closed.is_set():
            self._teardown()

    def _stopped(self) -> bool:
        return self._closed.is_set() or self._expired.is_set()

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


def _start_streams(
    channel: paramiko.Channel, stdin: bytes, capture: BoundedCapture, overflowed: threading.Event, hold_stdin: bool
) -> list[threading.Thread]:
    """[stdin feeder, stdout reader, stderr reader], started; stdout past the cap sets `overflowed` and closes the
    channel."""

    def stop_at_cap() -> None:
        overflowed.set()
        _close_quietly(channel)  # the host's flood ends here; the other reader sees EOF

    threads = [
        threading.Thread(target=feed, args=(channel, stdin, hold_stdin), daemon=True),
        threading.Thread(target=drain, args=(channel.recv, capture.add_stdout, stop_at_cap), daemon=True),
        threading.Thread(target=drain, args=(channel.recv_stderr, capture.add_stderr, lambda: None), daemon=True),
    ]
    for thread in threads:
        thread.start()
    return threads
