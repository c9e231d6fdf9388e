"""The system-wide ssh config (/etc/ssh/ssh_config and what it includes, moved by GPUDIAG_SSH_SYSTEM_CONFIG
here) is read after the user's, as ssh reads it: a fleet-wide ProxyJump or User set only there applies, the
user's first value wins, relative Includes are under the system file's folder, and GPUDIAG_SSH_CONFIG (ssh -F)
reads its file alone."""
import json

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli


@pytest.fixture
def system(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    etc = tmp_path / "etc" / "ssh"
    (etc / "ssh_config.d").mkdir(parents=True)
    (etc / "ssh_config").write_text("Include ssh_config.d/*.conf\nHost *\n    SendEnv LANG LC_*\n")
    (etc / "ssh_config.d" / "fleet.conf").write_text(
        "Host gpu-*\n    ProxyJump ops@bastion.example:2222\n    User fleet\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GPUDIAG_SSH_SYSTEM_CONFIG", str(etc / "ssh_config"))
    monkeypatch.delenv("GPUDIAG_SSH_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    return home


def hosts(*targets):
    result = CliRunner().invoke(cli, ["hosts", *targets, "--json"])
    assert result.exit_code == 0, result.output
    return {h["name"]: h for h in json.loads(result.stdout)}


def test_a_jump_set_only_in_the_system_config_applies(system):
    host = hosts("gpu-3")["gpu-3"]
    assert (host["user"], host["jump"]) == ("fleet", "ops@bastion.example:2222")
    assert "via ops@bastion.example:2222" in host["route"]


def test_the_users_first_value_wins_and_a_closing_host_block_does_not_hide_the_system_file(system):
    (system / ".ssh" / "config").write_text("Host gpu-3\n    User alice\nHost elsewhere\n    Port 2200\n")
    host = hosts("gpu-3")["gpu-3"]
    assert (host["user"], host["jump"], host["port"]) == ("alice", "ops@bastion.example:2222", None)


def test_ssh_dash_f_reads_its_file_alone(system, tmp_path, monkeypatch):
    only = tmp_path / "only.conf"
    only.write_text("Host gpu-*\n    User solo\n")
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(only))
    host = hosts("gpu-3")["gpu-3"]
    assert (host["user"], host["jump"]) == ("solo", None)


def test_the_table_names_both_files(system, tmp_path):
    result = CliRunner().invoke(cli, ["hosts", "gpu-3"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert f"then {tmp_path / 'etc' / 'ssh' / 'ssh_config'}" in result.output


def test_environment_variables_in_identity_file_are_expanded_as_ssh_does_when_it_connects(tmp_path, monkeypatch):
    from gpudiag.inventory.sshconfig import SshConfig, SshConfigError

    config = tmp_path / "config"
    config.write_text("Host h1\n  IdentityFile ${KEYDIR}/id_%h\n")
    monkeypatch.setenv("KEYDIR", str(tmp_path / "keys"))
    assert SshConfig(config).lookup("h1").identity_file == str(tmp_path / "keys" / "id_h1")
    monkeypatch.delenv("KEYDIR")
    with pytest.raises(SshConfigError, match="environment variable KEYDIR is not set"):
        SshConfig(config).lookup("h1")
