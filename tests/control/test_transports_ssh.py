"""SSH transport pieces that need no server: jump specs, and failures against local sockets."""
import socket
import threading
import time

import pytest

from gpudiag.models import Host
from gpudiag.transports import TransportError
from gpudiag.transports.ssh import SSHTransport, parse_jump


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


@pytest.fixture
def silent_port():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    yield server.getsockname()[1]
    server.close()


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
