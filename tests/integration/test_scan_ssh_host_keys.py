"""Against a real sshd on loopback, with `ssh -G` resolving (HOME the account's home, GPUDIAG_SSH_CONFIG the
test's own config): the host's UserKnownHostsFile decides which keys are known and where accept-new records
a new one, StrictHostKeyChecking accept-new in the config acts as --accept-new, a changed key in that file is
refused even under StrictHostKeyChecking no, and every IdentityFile is offered in turn."""
from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

FAST = ("--probes", "env", "--set", "env.torch=false")
NAME = "gpu-keys"


def new_key(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30)
    return path


def scan(fleet, tmp_path, settings: str, identity: str | None = None):
    """`scan NAME` with only the test's config and an empty own known-hosts file."""
    h = fleet.hosts[0]
    keys = identity if identity is not None else f"  IdentityFile {h.key_path}\n"
    config = tmp_path / "ssh_config"
    config.write_text(f"Host {NAME}\n  HostName {h.address}\n  Port {h.port}\n  User {h.user}\n{keys}{settings}")
    own = tmp_path / "own_known_hosts"
    own.touch()
    reports = tmp_path / "reports"
    env = fleet.env(GPUDIAG_SSH_CONFIG=str(config), GPUDIAG_KNOWN_HOSTS=str(own),
                    HOME=pwd.getpwuid(os.getuid()).pw_dir)
    proc = fleet.run_gpudiag("scan", NAME, "--python", fleet.system_python, *FAST, "--json",
                             "--reports-dir", str(reports), timeout=120, env=env)
    run, hosts = fleet.load_run(proc, reports=reports)
    assert run["ssh_settings"]["resolved_by"][NAME].startswith("`ssh -G`"), run["ssh_settings"]
    assert own.read_text() == ""   # gpudiag's own file is never where these keys go
    return proc, hosts[NAME]


def test_a_key_known_only_in_the_configs_user_known_hosts_file_connects(sshd_fleet, tmp_path):
    known = tmp_path / "kh_b"
    known.write_text(sshd_fleet.hosts[0].known_hosts_line + "\n")
    # the first file named does not exist: as in ssh, it knows no key, and the next one is read
    proc, host = scan(sshd_fleet, tmp_path, f"  UserKnownHostsFile {tmp_path}/kh_a {known}\n")
    assert proc.returncode == 0, proc.stderr
    assert host["status"] == "ok", host
    assert "warning" not in proc.stderr, proc.stderr


def test_strict_host_key_checking_accept_new_records_into_the_first_user_known_hosts_file(sshd_fleet, tmp_path):
    first, second = tmp_path / "kh_first", tmp_path / "kh_second"
    settings = f"  StrictHostKeyChecking accept-new\n  UserKnownHostsFile {first} {second}\n"
    proc, host = scan(sshd_fleet, tmp_path, settings)
    assert host["status"] == "ok", host
    line = sshd_fleet.hosts[0].known_hosts_line
    assert first.read_text() == line + "\n"
    assert not second.exists()
    fingerprint = sshd_fleet.hosts[0].host_key_fingerprint
    assert f"recorded the host key of {line.split()[0]}: ssh-ed25519 {fingerprint} in {first}" in proc.stderr


def test_without_accept_new_an_unknown_key_is_refused_and_not_recorded(sshd_fleet, tmp_path):
    known = tmp_path / "kh"
    proc, host = scan(sshd_fleet, tmp_path, f"  StrictHostKeyChecking yes\n  UserKnownHostsFile {known}\n")
    assert host["status"] == "host_key_unknown", host
    assert not known.exists()


def test_a_wrong_key_in_that_file_is_refused_even_with_checking_off(sshd_fleet, tmp_path):
    other = new_key(tmp_path / "other").with_suffix(".pub").read_text().split()
    address = sshd_fleet.hosts[0].known_hosts_line.split()[0]
    known = tmp_path / "kh"
    known.write_text(f"{address} {other[0]} {other[1]}\n")
    proc, host = scan(sshd_fleet, tmp_path, f"  StrictHostKeyChecking no\n  UserKnownHostsFile {known}\n")
    assert host["status"] == "host_key_changed", host
    assert f"{known}:1" in host["reason"], host
    assert known.read_text() == f"{address} {other[0]} {other[1]}\n"   # nothing recorded over it
    assert "StrictHostKeyChecking no is taken as accept-new" in proc.stderr


def test_every_identity_file_is_tried_in_order(sshd_fleet, tmp_path):
    known = tmp_path / "kh"
    known.write_text(sshd_fleet.hosts[0].known_hosts_line + "\n")
    wrong = new_key(tmp_path / "wrong")
    keys = f"  IdentityFile {tmp_path}/missing\n  IdentityFile {wrong}\n  IdentityFile {sshd_fleet.hosts[0].key_path}\n"
    proc, host = scan(sshd_fleet, tmp_path, f"  UserKnownHostsFile {known}\n", identity=keys)
    assert host["status"] == "ok", host
    # the right key alone in second place, after a missing one, is what authenticates
    proc, host = scan(sshd_fleet, tmp_path, f"  UserKnownHostsFile {known}\n",
                      identity=f"  IdentityFile {tmp_path}/missing\n  IdentityFile {sshd_fleet.hosts[0].key_path}\n")
    assert host["status"] == "ok", host
    proc, host = scan(sshd_fleet, tmp_path, f"  UserKnownHostsFile {known}\n",
                      identity=f"  IdentityFile {tmp_path}/missing\n  IdentityFile {wrong}\n")
    assert host["status"] == "auth_failed", host   # and a wrong key alone does not


def test_a_jump_host_is_not_accepted_new_under_the_destinations_config(sshd_fleet, tmp_path):
    """ssh reaches a jump host with the jump host's own config: the destination's accept-new and files are
    not its, so its unknown key is refused and recorded nowhere."""
    hop = sshd_fleet.hosts[1]
    known = tmp_path / "kh"
    settings = (f"  StrictHostKeyChecking accept-new\n  UserKnownHostsFile {known}\n"
                f"  ProxyJump {hop.user}@{hop.address}:{hop.port}\n")
    proc, host = scan(sshd_fleet, tmp_path, settings)
    assert host["status"] == "host_key_unknown", host
    assert "jump host" in host["reason"] and f"[{hop.address}]:{hop.port}" in host["reason"], host
    assert not known.exists() or hop.known_hosts_line.split()[2] not in known.read_text()
