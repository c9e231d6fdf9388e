"""SSH transport pieces that need no server: jump specs, and failures against local sockets."""
import socket
import threading
import time

import pytest

from gpudiag.models import Host
from gpudiag.transports import TransportError
from gpudiag.transports.ssh import SSHTransport
from gpudiag.transports.ssh_support import parse_jump


@pytest.mark.parametrize("spec, expected", [
    ("bastion", ("me", "bastion", 22)),
    ("ops@bastion", ("ops", "bastion", 22)),
    ("ops@bastion:2200", ("ops", "bastion", 2200)),
    ("[fd00::1]:2022", ("me", "fd00::1", 2022)),
    ("a@b@host:23", ("a@b", "host", 23)),
])
def test_parse_jump(spec, expected):
    assert parse_jump(spec, "me") == expected


def test_parse_jump_rejects_a_bad_port():
    with pytest.raises(TransportError, match="port 'x' is not a number"):
        parse_jump("ops@bastion:x", "me")


def ssh_to(port, **kw):
    host = Host(name="t", address="127.0.0.1", port=port, user="nobody", transport="ssh")
    return SSHTransport(host, **kw)


def test_refused_port_is_unreachable_at_once(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TransportError) as caught:
        ssh_to(port, known_hosts=str(tmp_path / "kh")).run(["true"], b"", 10)
    assert caught.value.status == "unreachable"
    assert f"127.0.0.1:{port}: connection refused" in caught.value.reason


def test_unresolvable_name_is_unreachable(tmp_path):
    host = Host(name="t", address="no-such-host.invalid", transport="ssh")
    with pytest.raises(TransportError) as caught:
        SSHTransport(host, known_hosts=str(tmp_path / "kh")).run(["true"], b"", 10)
    assert caught.value.status == "unreachable" and "cannot resolve" in caught.value.reason



def test_silent_listener_no_banner_within_connect_timeout(tmp_path, silent_port):
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        ssh_to(silent_port, known_hosts=str(tmp_path / "kh"), connect_timeout=0.5).run(["true"], b"", 10)
    assert caught.value.status == "unreachable" and "sent no SSH banner" in caught.value.reason
    assert time.monotonic() - started < 3


def test_silent_listener_past_the_host_deadline_is_timeout(tmp_path, silent_port):
    with pytest.raises(TransportError) as caught:
        ssh_to(silent_port, known_hosts=str(tmp_path / "kh"), connect_timeout=30).run(["true"], b"", 1)
    assert caught.value.status == "timeout" and "1 s deadline" in caught.value.reason


def test_close_aborts_a_connect_in_progress(tmp_path, silent_port):
    ssh = ssh_to(silent_port, known_hosts=str(tmp_path / "kh"), connect_timeout=30)
    threading.Timer(0.5, ssh.close).start()
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        ssh.run(["true"], b"", 30)
    assert caught.value.status == "interrupted"
    assert time.monotonic() - started < 3


def test_missing_identity_file_is_auth_failed(tmp_path, silent_port):
    host = Host(name="t", address="127.0.0.1", port=silent_port, transport="ssh",
                identity_file=str(tmp_path / "nope"))
    with pytest.raises(TransportError) as caught:
        SSHTransport(host, known_hosts=str(tmp_path / "kh")).run(["true"], b"", 10)
    assert caught.value.status == "auth_failed" and "no such file" in caught.value.reason


class FakeChannel:
    """Stands in for a paramiko channel whose command never ends: closing it behaves as paramiko's does
    (readers see EOF, the status event fires with exit status -1), or raises like a half-closed one."""

    def __init__(self, close_raises: bool):
        self.close_raises = close_raises
        self.closed = threading.Event()
        self.status_event = threading.Event()
        self.exit_status = -1

    def exec_command(self, command):
        pass

    def sendall(self, data):
        pass

    def shutdown_write(self):
        pass

    def _recv(self, size):
        self.closed.wait(30)
        return b""

    recv = recv_stderr = _recv

    def exit_status_ready(self):
        return self.status_event.is_set()

    def close(self):
        if self.close_raises:
            raise EOFError()
        self.closed.set()
        self.status_event.set()


class FakeClient:
    def __init__(self, channel):
        self.channel = channel

    def get_transport(self):
        return self

    def open_session(self, timeout):
        return self.channel

    def close(self):
        pass


@pytest.mark.parametrize("close_raises", [False, True], ids=["timer-closes-channel", "close-raises"])
def test_deadline_firing_during_the_command_is_a_timeout(tmp_path, monkeypatch, close_raises):
    channel = FakeChannel(close_raises)
    ssh = ssh_to(22, known_hosts=str(tmp_path / "kh"))
    monkeypatch.setattr(ssh, "_connect", lambda deadline: FakeClient(channel))
    if not close_raises:
        # The timer fires before the readers' wait runs out, as it does on a loaded machine.
        real_timer = threading.Timer
        monkeypatch.setattr(threading, "Timer", lambda interval, function: real_timer(interval / 2, function))
    result = ssh.run(["sleep", "20"], b"", 0.5)
    assert result.timed_out and result.exit_code is None
