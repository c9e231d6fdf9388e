"""ssh config rules beyond the ssh -G corpus: token expansion (OpenSSH's own, read from `ssh -v`),
syntax errors, Include depth, Match criteria gpudiag cannot evaluate, `Match exec` limits, and the one
warning per host that names every setting gpudiag cannot honour."""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from gpudiag.cli import cli
from gpudiag.inventory import sshconfig_match
from gpudiag.inventory.sshconfig import SshConfig, SshConfigError

SSH = shutil.which("ssh")


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SHELL", "/bin/sh")
    return home


def config(tmp_path, text):
    path = tmp_path / "config"
    path.write_text(text)
    return path


@pytest.mark.skipif(SSH is None, reason="OpenSSH client (ssh) not installed")
def test_identity_file_tokens_expand_as_openssh_expands_them(home, tmp_path):
    """`ssh -v` logs each identity file it will offer, expanded; ProxyCommand=false means nothing
    connects anywhere."""
    path = config(tmp_path, "Host tok\n  HostName Tok.Example\n  User tu\n  Port 2200\n"
                            "  IdentityFile ~/.ssh/id_%r@%h:%p-%n-%u-%l-%L-%i-%k-%C-%%\n")
    done = subprocess.run([SSH, "-v", "-F", str(path), "-o", "ProxyCommand=false", "-o", "BatchMode=yes",
                           "tok", "true"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, HOME=str(home)), check=False)
    logged = [line.split("identity file ", 1)[1].rsplit(" type ", 1)[0]
              for line in done.stderr.splitlines() if "identity file " in line]
    assert logged, done.stderr
    # OpenSSH expands `~` from the passwd entry; gpudiag from $HOME (the same outside tests)
    mine = SshConfig(path).lookup("tok").identity_file
    assert mine.replace(str(home), pwd.getpwuid(os.getuid()).pw_dir, 1) == logged[0]


@pytest.mark.parametrize("text,words", [
    ("Host a\n  User 'unterminated\n", "config:2: unterminated quote"),
    ("Host a\n  Port\n", "config:2: cannot read ssh config: Port has no value"),
    ("Include {self}\n", "Include nested more than 16 deep"),
])
def test_unreadable_config_is_one_line_naming_file_and_line(home, tmp_path, text, words):
    with pytest.raises(SshConfigError) as err:
        SshConfig(config(tmp_path, text.format(self=tmp_path / "config")))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_match_criterion_gpudiag_cannot_evaluate_is_not_applied_and_named(home, tmp_path):
    found = SshConfig(config(tmp_path, "Match localnetwork 10.0.0.0/8\n  User never\n")).lookup("h")
    assert found.user is None
    assert found.ignored == ("%s:1: Match localnetwork is not supported (the block is not applied)"
                             % (tmp_path / "config"),)


def test_match_exec_that_hangs_is_no_match(home, tmp_path, monkeypatch):
    monkeypatch.setattr(sshconfig_match, "EXEC_TIMEOUT_S", 0.5)
    found = SshConfig(config(tmp_path, 'Match exec "sleep 5"\n  User never\n')).lookup("h")
    assert found.user is None and "ran past" in found.ignored[0]


def test_explicit_user_and_port_are_what_match_and_tokens_see(home, tmp_path):
    path = config(tmp_path, "Match user ops\n  IdentityFile ~/.ssh/%r-%p\n")
    assert SshConfig(path).lookup("h").identity_file is None
    assert SshConfig(path).lookup("h", user="ops", port=2022).identity_file == str(home / ".ssh" / "ops-2022")


def test_one_warning_per_host_names_every_setting_not_honoured(home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # the checkout's inventory.yaml would add a warning for `other`
    path = config(tmp_path, "Host gpu-*\n  ProxyCommand nc %h %p\n  IdentityFile ~/.ssh/a\n"
                            "  IdentityFile ~/.ssh/b\n  CertificateFile ~/.ssh/a-cert.pub\n"
                            "Match originalhost gpu-1 localnetwork 10.0.0.0/8\n  User x\n")
    result = CliRunner().invoke(cli, ["hosts", "gpu-1", "gpu-2", "other", "--json"],
                                env={"GPUDIAG_SSH_CONFIG": str(path), "HOME": str(home)})
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 2, warnings
    first = next(w for w in warnings if "gpu-1:" in w)
    for words in ("ProxyCommand", "IdentityFile: 2 files", "CertificateFile", "Match localnetwork"):
        assert words in first
    assert "Match localnetwork" not in next(w for w in warnings if "gpu-2:" in w)


def test_match_exec_runs_only_for_the_hosts_a_command_targets(home, tmp_path, monkeypatch):
    from gpudiag.inventory import load_inventory, resolve_targets

    marks = tmp_path / "marks"
    marks.mkdir()
    path = config(tmp_path, f'Match exec "touch {marks}/%n"\n  User matched\n')
    monkeypatch.setenv("GPUDIAG_SSH_CONFIG", str(path))
    inventory = tmp_path / "hosts"
    inventory.write_text("[gpus]\ngpu-01\ngpu-02\n[cpus]\ncpu-01\n")
    hosts = resolve_targets(["gpus:!gpu-02"], load_inventory(inventory))
    assert [(h.name, h.user) for h in hosts] == [("gpu-01", "matched")]
    assert sorted(p.name for p in marks.iterdir()) == ["gpu-01"]   # excluded or untargeted: never resolved


def test_a_command_runs_each_match_exec_once_per_host(home, tmp_path):
    marks = tmp_path / "marks"
    path = config(tmp_path, f'Match exec "echo %n >> {marks}"\n  ProxyCommand nc %h %p\n')
    result = CliRunner().invoke(cli, ["hosts", "gpu-1", "gpu-2", "--json"],
                                env={"GPUDIAG_SSH_CONFIG": str(path), "HOME": str(home)})
    assert result.exit_code == 0, result.output
    assert sorted(marks.read_text().split()) == ["gpu-1", "gpu-2"]
    assert sum("ProxyCommand" in line for line in result.stderr.splitlines()) == 2


def test_jump_host_settings_gpudiag_cannot_honour_are_named_for_the_host(home, tmp_path):
    path = config(tmp_path, "Host gpu-*\n  ProxyJump bastion\nHost bastion\n  HostName bastion.example\n"
                            "  IdentityFile ~/.ssh/bastion_key\n  ProxyCommand nc %h %p\n")
    result = CliRunner().invoke(cli, ["hosts", "gpu-1", "--json"],
                                env={"GPUDIAG_SSH_CONFIG": str(path), "HOME": str(home)})
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1
    assert "jump bastion: ProxyCommand" in warnings[0] and "jump bastion: IdentityFile" in warnings[0]


def test_jump_host_with_the_destinations_key_needs_no_warning(home, tmp_path):
    path = config(tmp_path, "Host gpu-* bastion\n  IdentityFile ~/.ssh/shared\nHost gpu-*\n  ProxyJump bastion\n")
    result = CliRunner().invoke(cli, ["hosts", "gpu-1", "--json"],
                                env={"GPUDIAG_SSH_CONFIG": str(path), "HOME": str(home)})
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr
