"""SSHTransport against the real sshd fleet: what reaches the remote shell and stdout, large streams both
ways, chained jumps, close() from another thread, and (through the CLI) keys from ssh-agent and ~/.ssh."""
import os
import threading
import time

import pytest

from gpudiag.models import Host
from gpudiag.transports import TransportError
from gpudiag.transports.capture import NOISE_TAIL, STDERR_TAIL
from gpudiag.transports.ssh import SSHTransport


@pytest.fixture
def home(sshd_fleet, monkeypatch):
    monkeypatch.setenv("HOME", str(sshd_fleet.home))          # no default keys, no ~/.ssh/known_hosts
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def transport(fleet, name, **changes):
    h = fleet.host(name)
    host = Host(name=name, address=h.address, port=h.port, user=h.user, identity_file=h.key_path,
                transport="ssh").with_(**changes)
    return SSHTransport(host, known_hosts=str(fleet.known_hosts), connect_timeout=10)


def test_noisy_bashrc_really_prints_on_stdout(sshd_fleet, home):
    from tests.integration.conftest import NOISY_LINE
    result = transport(sshd_fleet, "h0", user="gdnoisy").run(["echo", "payload"], b"", 20)
    assert result.exit_code == 0
    assert result.stdout.decode().splitlines() == [NOISY_LINE, "payload"]


def test_every_word_reaches_the_remote_command_unchanged(sshd_fleet, home, tmp_path):
    marker = tmp_path / "ran"
    words = ["a b", '"q"', f";touch {marker}", "$(touch " + str(marker) + ")", "`id`", "*", "", "~", "=x",
             "%self", "{a,b}", "#c"]
    result = transport(sshd_fleet, "h1").run(["printf", "%s|"] + words, b"", 20)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split(b"|")[:-1] == [w.encode() for w in words]
    assert not marker.exists()
    # Words login shells read differently are refused, never sent.
    for word in ("it's", "a\\b", "x\ny", "hi!"):
        with pytest.raises(TransportError, match="read differently"):
            transport(sshd_fleet, "h1").run(["printf", "%s", word], b"", 20)


def test_large_stdin_and_both_output_streams_do_not_deadlock(sshd_fleet, home):
    data = os.urandom(4 * 1024 * 1024)
    result = transport(sshd_fleet, "h2").run(["sh", "-c", "cat; head -c 3000000 /dev/zero >&2; exit 7"], data, 60)
    assert result.exit_code == 7 and not result.timed_out
    # Unframed stdout and stderr are kept as bounded tails (transports/capture.py).
    assert data.endswith(result.stdout) and len(result.stdout) >= NOISE_TAIL
    assert result.stderr == b"\0" * STDERR_TAIL


def test_a_frame_after_megabytes_of_noise_is_kept_whole_and_the_noise_as_a_tail(sshd_fleet, home):
    frame = b"GPUDIAG-BEGIN n1\n" + b"f" * 3000000 + b"\nGPUDIAG-END n1\n"
    script = "yes | head -c 5000000; echo; cat"
    result = transport(sshd_fleet, "h2").run(["sh", "-c", script], frame, 60)
    assert result.exit_code == 0 and result.overflow is None, result.stderr
    assert result.stdout.endswith(b"\n" + frame) and len(result.stdout) <= NOISE_TAIL + len(frame) + 32


def test_output_past_the_cap_is_cut_off_and_the_command_closed(sshd_fleet, home):
    started = time.monotonic()
    result = transport(sshd_fleet, "h2").run(["yes"], b"", 60, output_limit=8 * 2 ** 20)
    assert result.overflow == "output exceeded 8 MiB" and result.exit_code is None
    assert time.monotonic() - started < 30          # closed at the cap, not at the 60 s deadline
    assert len(result.stdout) <= NOISE_TAIL + 64


def test_chained_jump_hosts(sshd_fleet, home):
    h0, h1 = sshd_fleet.host("h0"), sshd_fleet.host("h1")
    result = transport(sshd_fleet, "h2", jump=f"{h0.jump_spec},{h1.jump_spec}").run(["echo", "via two hops"],
                                                                                    b"", 30)
    assert result.stdout == b"via two hops\n"


def test_close_aborts_a_running_command_promptly(sshd_fleet, home):
    ssh = transport(sshd_fleet, "h3")
    threading.Timer(1.0, ssh.close).start()
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        ssh.run(["sleep", "15"], b"", 60)
    assert caught.value.status == "interrupted"
    assert time.monotonic() - started < 5


def test_deadline_ends_a_running_command_with_partial_output(sshd_fleet, home):
    result = transport(sshd_fleet, "h3").run(["sh", "-c", "echo started; sleep 20"], b"", 4)
    assert result.timed_out and result.exit_code is None
    assert result.stdout == b"started\n"
    assert result.duration_s < 4 + 5        # the deadline, not the 20 s sleep (slack for a loaded machine)


def scan_without_identity_file(fleet, tmp_path, env):
    inventory = fleet.write_inventory(tmp_path / "inventory.yaml", [], variants={
        "keyless": ("h1", {"identity_file": None})})
    reports = tmp_path / "reports"
    proc = fleet.run_gpudiag("scan", "-i", str(inventory), "all", *fleet.fast_scan_args, "--json",
                             env=fleet.env(GPUDIAG_REPORTS=str(reports), **env))
    return proc, fleet.load_run(proc, reports)[1]["keyless"]


def test_key_from_ssh_agent(sshd_fleet, tmp_path):
    import shutil
    import subprocess
    if not shutil.which("ssh-agent"):
        pytest.skip("ssh-agent not installed")
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        env = {"SSH_AUTH_SOCK": str(sock)}
        proc, host = scan_without_identity_file(sshd_fleet, tmp_path, env)
        assert host["status"] == "auth_failed"                       # the agent is still empty
        subprocess.run(["ssh-add", "-q", sshd_fleet.client_key], env=dict(os.environ, **env), check=True,
                       capture_output=True, timeout=10)
        proc, host = scan_without_identity_file(sshd_fleet, tmp_path, env)
        assert host["status"] == "ok", host["reason"]
    finally:
        agent.terminate()
        agent.wait(5)


def test_default_key_in_home_ssh(sshd_fleet, tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    key = home / ".ssh" / "id_ed25519"
    key.write_bytes(open(sshd_fleet.client_key, "rb").read())
    key.chmod(0o600)
    proc, host = scan_without_identity_file(sshd_fleet, tmp_path, {"HOME": str(home)})
    assert host["status"] == "ok", host["reason"]
